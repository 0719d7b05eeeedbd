//! The Redis port, by the scheme of each `redis_url` node: `redis://`/`rediss://` through
//! Spin's Redis interface ([`SpinRedis`]), `https://` through the Upstash REST protocol over
//! Spin's outbound HTTP ([`RestStore`]). Same scripts, same replies, same errors.

use seckill_domain::nodes::Nodes;
use seckill_domain::store::{Replies, Store, StoreError};

use crate::config;
use crate::error::ApiError;
use crate::redis::SpinRedis;
use crate::rest::RestStore;

/// The Redis nodes of `redis_url` (see [`seckill_domain::nodes`]): one variable read; each node
/// is opened when a request first needs it, so a sale request opens only its home shard's node.
pub fn nodes() -> Result<Nodes<SpinStore>, ApiError> {
    Ok(Nodes::open(
        &config::get(config::REDIS_URL)?,
        SpinStore::open,
    ))
}

/// One Redis node, however it is reached.
pub enum SpinStore {
    /// `redis://` or `rediss://`.
    Redis(SpinRedis),
    /// `https://<token>@<host>`.
    Rest(RestStore),
}

impl SpinStore {
    /// Opens `url` with the transport its scheme names.
    pub fn open(url: &str) -> Result<Self, String> {
        if url.starts_with("https://") || url.starts_with("http://") {
            RestStore::open(url).map(SpinStore::Rest)
        } else {
            SpinRedis::open(url)
                .map(SpinStore::Redis)
                .map_err(|e| e.to_string())
        }
    }
}

impl SpinStore {
    /// `PING`: the node answers.
    pub fn ping(&self) -> Result<(), String> {
        match self {
            SpinStore::Redis(s) => match s
                .0
                .execute("PING", &[])
                .map_err(|e| e.to_string())?
                .as_slice()
            {
                [spin_sdk::redis::RedisResult::Status(s)] if s == "PONG" => Ok(()),
                other => Err(format!("unexpected PING reply {other:?}")),
            },
            SpinStore::Rest(s) => s.ping().map_err(|e| e.message),
        }
    }
}

impl Store for SpinStore {
    fn evalsha(&self, sha: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        match self {
            SpinStore::Redis(s) => s.evalsha(sha, keys, args),
            SpinStore::Rest(s) => s.evalsha(sha, keys, args),
        }
    }

    fn eval(&self, source: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        match self {
            SpinStore::Redis(s) => s.eval(source, keys, args),
            SpinStore::Rest(s) => s.eval(source, keys, args),
        }
    }
}
