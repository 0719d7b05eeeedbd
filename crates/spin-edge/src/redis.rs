//! The Redis port over Spin's Redis interface (`fermyon:spin/redis`): one EVALSHA per script
//! run, EVAL only on NOSCRIPT.

use seckill_domain::scripts::Script;
use seckill_domain::store::{Replies, Reply, Store, StoreError, is_noscript};
use spin_sdk::redis::{Connection, Error, RedisParameter, RedisResult};

/// A Spin Redis connection, as the domain's [`Store`].
pub struct SpinRedis(pub Connection);

impl SpinRedis {
    /// Opens a connection to `url` (Spin checks it against `allowed_outbound_hosts`).
    pub fn open(url: &str) -> Result<Self, Error> {
        Connection::open(url).map(SpinRedis)
    }
}

impl Store for SpinRedis {
    fn run(
        &self,
        script: &Script,
        keys: &[String],
        args: &[String],
    ) -> Result<Replies, StoreError> {
        let mut params = Vec::with_capacity(2 + keys.len() + args.len());
        params.push(RedisParameter::Binary(script.sha.as_bytes().to_vec()));
        params.push(RedisParameter::Int64(keys.len() as i64));
        params.extend(
            keys.iter()
                .chain(args)
                .map(|s| RedisParameter::Binary(s.as_bytes().to_vec())),
        );
        let result = match self.0.execute("EVALSHA", &params) {
            Err(Error::Other(msg)) if is_noscript(&msg) => {
                params[0] = RedisParameter::Binary(script.source.as_bytes().to_vec());
                self.0.execute("EVAL", &params)
            }
            other => other,
        };
        let values = result.map_err(|e| match e {
            Error::Other(msg) => StoreError::from_message(format!("{}: {msg}", script.name)),
            Error::TooManyConnections => StoreError::unreachable("too many connections"),
            e => StoreError::failed(format!("{}: {e}", script.name)),
        })?;
        Ok(Replies(
            values
                .into_iter()
                .map(|v| match v {
                    RedisResult::Nil => Reply::Nil,
                    RedisResult::Int64(i) => Reply::Int(i),
                    RedisResult::Binary(b) => Reply::Bytes(b),
                    RedisResult::Status(s) => Reply::Status(s),
                })
                .collect(),
        ))
    }
}
