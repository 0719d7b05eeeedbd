//! The Redis port over Spin's Redis interface (`fermyon:spin/redis`).

use seckill_domain::store::{Replies, Reply, Store, StoreError, StoreErrorKind};
use spin_sdk::redis::{Connection, Error, RedisParameter, RedisResult};

/// A Spin Redis connection, as the domain's [`Store`].
pub struct SpinRedis(pub Connection);

impl SpinRedis {
    /// Opens a connection to `url` (Spin checks it against `allowed_outbound_hosts`).
    pub fn open(url: &str) -> Result<Self, Error> {
        Connection::open(url).map(SpinRedis)
    }

    /// `command first numkeys keys… args…`, the reply flattened as Spin flattens it.
    fn eval_command(
        &self,
        command: &str,
        first: &str,
        keys: &[String],
        args: &[String],
    ) -> Result<Replies, StoreError> {
        let mut params = Vec::with_capacity(2 + keys.len() + args.len());
        params.push(RedisParameter::Binary(first.as_bytes().to_vec()));
        params.push(RedisParameter::Int64(keys.len() as i64));
        params.extend(
            keys.iter()
                .chain(args)
                .map(|s| RedisParameter::Binary(s.as_bytes().to_vec())),
        );
        let values = self.0.execute(command, &params).map_err(store_error)?;
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

impl Store for SpinRedis {
    fn evalsha(&self, sha: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        self.eval_command("EVALSHA", sha, keys, args)
    }

    fn eval(&self, source: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        self.eval_command("EVAL", source, keys, args)
    }
}

/// Spin's error, by kind.
fn store_error(e: Error) -> StoreError {
    match e {
        Error::Other(message) => StoreError::new(kind_of_other(&message), message),
        Error::TooManyConnections => StoreError::unreachable("too many connections"),
        e => StoreError::failed(e.to_string()),
    }
}

/// Spin reports a failed command as `Other` with the redis-rs error's text
/// (`crates/factor-outbound-redis/src/host.rs`, `other_error`), which has three shapes
/// (redis-rs `types.rs`, `impl Display for RedisError`): a server error Redis knows,
/// `"<description> - <Kind>: <detail>"` with redis-rs's kind name; any other server error,
/// `"<CODE>: <detail>"` with Redis's error code; and an I/O error, its bare text. The kind is
/// read from that structure, not searched for in the text.
fn kind_of_other(message: &str) -> StoreErrorKind {
    if let Some((_, tail)) = message.split_once(" - ") {
        let kind = tail.split(':').next().unwrap_or(tail).trim();
        return match kind {
            "NoScriptError" => StoreErrorKind::NoScript,
            "BusyLoadingError" | "TryAgain" | "ClusterDown" | "MasterDown" | "ReadOnly"
            | "IoError" => StoreErrorKind::Unavailable,
            _ => StoreErrorKind::Failed,
        };
    }
    match message.split_once(": ") {
        Some((code, _)) if !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase()) => {
            StoreErrorKind::of_redis_code(code)
        }
        // No server error's shape: the connection failed underneath.
        _ => StoreErrorKind::Unavailable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_error_texts_sort_by_their_structure() {
        use StoreErrorKind::*;
        for (text, kind) in [
            (
                "An error was signalled by the server - NoScriptError: No matching script.",
                NoScript,
            ),
            (
                "An error was signalled by the server - BusyLoadingError: Redis is loading",
                Unavailable,
            ),
            (
                "An error was signalled by the server - ResponseError: user_script:1: oops",
                Failed,
            ),
            ("BUSY: Redis is busy running a script", Unavailable),
            ("WRONGTYPE: Operation against a key", Failed),
            ("Connection reset by peer (os error 104)", Unavailable),
            ("broken pipe", Unavailable),
        ] {
            assert_eq!(kind_of_other(text), kind, "{text}");
        }
    }
}
