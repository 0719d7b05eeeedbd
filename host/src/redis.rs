//! `fermyon:spin/redis@2.0.0`, as Spin 3.6 implements it (`crates/factor-outbound-redis`).
//!
//! The one deliberate difference is connection reuse: Spin opens a new multiplexed connection for
//! every `open` (so every request pays a TCP handshake); by default we share one auto-reconnecting
//! multiplexed connection per address across all instances. `ConnectionMode::SpinFaithful`
//! restores Spin's behaviour.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{FromRedisValue, Value};
use wasmtime::component::Resource;

use crate::bindings::spin::fermyon::spin::redis::{
    Error, Host, HostConnection, Payload, RedisParameter, RedisResult,
};
use crate::state::{ConnectionMode, Ctx};

/// Spin's per-instance connection table capacity.
const MAX_CONNECTIONS_PER_INSTANCE: u32 = 1024;

/// An open connection, owned by one instance's resource table.
pub enum RedisConnection {
    /// A clone of the app-wide connection to this address.
    Shared(ConnectionManager),
    /// A connection of this instance alone (Spin-faithful mode).
    Own(MultiplexedConnection),
}

impl RedisConnection {
    async fn query<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T, Error> {
        match self {
            RedisConnection::Shared(c) => cmd.query_async(c).await,
            RedisConnection::Own(c) => cmd.query_async(c).await,
        }
        .map_err(other)
    }
}

/// App-wide Redis connections (pooled mode) and the connection mode.
#[derive(Default)]
pub struct RedisPools {
    mode: ConnectionMode,
    shared: RwLock<HashMap<String, ConnectionManager>>,
    /// Held while a first connection to an address is made: a spike's first requests wait for
    /// it instead of each opening a connection of its own.
    connecting: tokio::sync::Mutex<()>,
    opened: Mutex<u64>,
}

impl RedisPools {
    /// Pools that open connections as `mode` says.
    pub fn new(mode: ConnectionMode) -> Self {
        RedisPools {
            mode,
            ..Default::default()
        }
    }

    /// How many TCP connections this host has opened to Redis so far.
    pub fn connections_opened(&self) -> u64 {
        *self.opened.lock().unwrap()
    }

    async fn open(&self, address: &str) -> Result<RedisConnection, Error> {
        // Pooled and already connected: the hot path, a read lock and a clone.
        if self.mode == ConnectionMode::Pooled
            && let Some(conn) = self.shared.read().unwrap().get(address)
        {
            return Ok(RedisConnection::Shared(conn.clone()));
        }
        let client = redis::Client::open(address).map_err(|_| Error::InvalidAddress)?;
        match self.mode {
            ConnectionMode::SpinFaithful => {
                let conn = client
                    .get_multiplexed_async_connection()
                    .await
                    .map_err(other)?;
                *self.opened.lock().unwrap() += 1;
                Ok(RedisConnection::Own(conn))
            }
            ConnectionMode::Pooled => {
                let _connecting = self.connecting.lock().await;
                if let Some(conn) = self.shared.read().unwrap().get(address) {
                    return Ok(RedisConnection::Shared(conn.clone()));
                }
                let conn = ConnectionManager::new_with_config(client, reconnect_policy())
                    .await
                    .map_err(other)?;
                *self.opened.lock().unwrap() += 1;
                self.shared
                    .write()
                    .unwrap()
                    .insert(address.to_owned(), conn.clone());
                Ok(RedisConnection::Shared(conn))
            }
        }
    }
}

/// How the shared connection comes back after Redis went away: a few quick attempts, then the
/// request fails (503 to the client) and the next one tries again. redis-rs's default backs off
/// for minutes (1 s × 100ⁿ, capped at 60 s, 6 times), which would hold every request to a dead
/// node that long instead of failing fast.
fn reconnect_policy() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_number_of_retries(2)
        .set_max_delay(100)
        .set_connection_timeout(std::time::Duration::from_secs(1))
}

fn other(e: redis::RedisError) -> Error {
    Error::Other(e.to_string())
}

impl Ctx {
    fn redis(&mut self, conn: &Resource<RedisConnection>) -> Result<&mut RedisConnection, Error> {
        self.table
            .get_mut(conn)
            .map_err(|e| Error::Other(e.to_string()))
    }
}

impl Host for Ctx {}

impl HostConnection for Ctx {
    async fn open(&mut self, address: String) -> Result<Resource<RedisConnection>, Error> {
        if !self.allows_url(&address) {
            tracing::warn!(component = %self.component.id, "redis address not allowed by allowed_outbound_hosts");
            return Err(Error::InvalidAddress);
        }
        if self.redis_connections >= MAX_CONNECTIONS_PER_INSTANCE {
            return Err(Error::TooManyConnections);
        }
        let conn = self.services.redis.open(&address).await?;
        self.redis_connections += 1;
        self.table.push(conn).map_err(|_| Error::TooManyConnections)
    }

    async fn publish(
        &mut self,
        conn: Resource<RedisConnection>,
        channel: String,
        payload: Payload,
    ) -> Result<(), Error> {
        // The reply is the number of receivers, which the interface does not return.
        let _: i64 = self
            .redis(&conn)?
            .query(redis::cmd("PUBLISH").arg(channel).arg(payload))
            .await?;
        Ok(())
    }

    async fn get(
        &mut self,
        conn: Resource<RedisConnection>,
        key: String,
    ) -> Result<Option<Payload>, Error> {
        self.redis(&conn)?.query(redis::cmd("GET").arg(key)).await
    }

    async fn set(
        &mut self,
        conn: Resource<RedisConnection>,
        key: String,
        value: Payload,
    ) -> Result<(), Error> {
        self.redis(&conn)?
            .query(redis::cmd("SET").arg(key).arg(value))
            .await
    }

    async fn incr(&mut self, conn: Resource<RedisConnection>, key: String) -> Result<i64, Error> {
        // Spin sends INCRBY key 1.
        self.redis(&conn)?
            .query(redis::cmd("INCRBY").arg(key).arg(1))
            .await
    }

    async fn del(
        &mut self,
        conn: Resource<RedisConnection>,
        keys: Vec<String>,
    ) -> Result<u32, Error> {
        self.redis(&conn)?.query(redis::cmd("DEL").arg(keys)).await
    }

    async fn sadd(
        &mut self,
        conn: Resource<RedisConnection>,
        key: String,
        values: Vec<String>,
    ) -> Result<u32, Error> {
        let cmd = redis::cmd("SADD").arg(key).arg(values).clone();
        let result = match self.redis(&conn)? {
            RedisConnection::Shared(c) => cmd.query_async(c).await,
            RedisConnection::Own(c) => cmd.query_async(c).await,
        };
        // Spin maps a client-side type error to `type-error`; anything else is `other`.
        result.map_err(|e| {
            if e.kind() == redis::ErrorKind::TypeError {
                Error::TypeError
            } else {
                other(e)
            }
        })
    }

    async fn smembers(
        &mut self,
        conn: Resource<RedisConnection>,
        key: String,
    ) -> Result<Vec<String>, Error> {
        self.redis(&conn)?
            .query(redis::cmd("SMEMBERS").arg(key))
            .await
    }

    async fn srem(
        &mut self,
        conn: Resource<RedisConnection>,
        key: String,
        values: Vec<String>,
    ) -> Result<u32, Error> {
        self.redis(&conn)?
            .query(redis::cmd("SREM").arg(key).arg(values))
            .await
    }

    async fn execute(
        &mut self,
        conn: Resource<RedisConnection>,
        command: String,
        arguments: Vec<RedisParameter>,
    ) -> Result<Vec<RedisResult>, Error> {
        let mut cmd = redis::cmd(&command);
        for arg in arguments {
            match arg {
                RedisParameter::Int64(v) => cmd.arg(v),
                RedisParameter::Binary(v) => cmd.arg(v),
            };
        }
        let value: Value = self.redis(&conn)?.query(&cmd).await?;
        flatten(value)
    }

    async fn drop(&mut self, conn: Resource<RedisConnection>) -> wasmtime::Result<()> {
        self.table.delete(conn)?;
        Ok(())
    }
}

/// Converts a reply the way Spin does: arrays and sets are flattened recursively into one list.
pub fn flatten(value: Value) -> Result<Vec<RedisResult>, Error> {
    fn push(out: &mut Vec<RedisResult>, value: Value) -> Result<(), Error> {
        match value {
            Value::Nil => out.push(RedisResult::Nil),
            Value::Int(v) => out.push(RedisResult::Int64(v)),
            Value::BulkString(b) => out.push(RedisResult::Binary(b)),
            Value::SimpleString(s) => out.push(RedisResult::Status(s)),
            Value::Okay => out.push(RedisResult::Status("OK".to_owned())),
            Value::Array(items) | Value::Set(items) => {
                for item in items {
                    push(out, item)?;
                }
            }
            Value::Double(d) => out.push(RedisResult::Binary(d.to_string().into_bytes())),
            Value::BigNumber(n) => out.push(RedisResult::Binary(n.to_string().into_bytes())),
            Value::Boolean(b) => out.push(RedisResult::Int64(b as i64)),
            Value::ServerError(e) => return Err(Error::Other(format!("{e:?}"))),
            other => {
                return Err(Error::Other(format!(
                    "unsupported Redis reply type: {other:?}"
                )));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    push(&mut out, value)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_arrays_flatten_like_spin() {
        // A script returning {1, 'two', {3, false}} comes back as [1, "two", 3, nil].
        let reply = Value::Array(vec![
            Value::Int(1),
            Value::BulkString(b"two".to_vec()),
            Value::Array(vec![Value::Int(3), Value::Nil]),
        ]);
        let flat = format!("{:?}", flatten(reply).unwrap());
        assert_eq!(
            flat,
            r#"[RedisResult::Int64(1), RedisResult::Binary([116, 119, 111]), RedisResult::Int64(3), RedisResult::Nil]"#
        );
        assert_eq!(
            format!("{:?}", flatten(Value::Okay).unwrap()),
            r#"[RedisResult::Status("OK")]"#
        );
        assert_eq!(
            format!("{:?}", flatten(Value::Boolean(true)).unwrap()),
            "[RedisResult::Int64(1)]"
        );
        assert!(flatten(Value::Map(vec![])).is_err());
    }
}
