//! The outbound Redis factor: `fermyon:spin/redis@2.0.0`, as Spin 3.6 implements it
//! (`crates/factor-outbound-redis`).
//!
//! Two deliberate differences. Connection reuse: Spin opens a new multiplexed connection for
//! every `open` (so every request pays a TCP handshake); by default we share one auto-reconnecting
//! multiplexed connection per address across all instances. `ConnectionMode::SpinFaithful`
//! restores Spin's behaviour. Reply size: a reply above [`MAX_REPLY_BYTES`] is `other(..)`.
//!
//! The runtime configuration's blocked networks apply here as in Spin 3.6.3
//! (`crates/factor-outbound-redis/src/host.rs`, `SpinDnsResolver`: the blocked addresses are
//! left out of what the name resolves to, so a name left with none does not connect). A new
//! connection resolves through that filter; the shared one (whose redis-rs manager takes no
//! resolver) is refused before it is made when every address is blocked. One difference: Spin
//! hands redis-rs 0.32 an empty list, on which its connect panics (`select_ok` of nothing) and
//! the request traps; here the `open` fails with `other(..)`, which the guest can answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use redis::AsyncConnectionConfig;
use redis::aio::{
    ConnectionLike as _, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::io::AsyncDNSResolver;
use redis::{FromRedisValue, Value};
use seckill_redis_reply::Reply;
use tokio::sync::OnceCell;
use tracing::Instrument;
use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};

use crate::factors::blocked_networks::{BlockedNetworks, Prohibited};
use crate::factors::component::ComponentConfig;
use crate::factors::spin_costs::InstanceMeter;
use crate::factors::tls::TlsTrust;
use crate::factors::{ConfigureAppContext, ConnectionMode, Factor, PrepareContext};
use crate::manifest::ManifestError;
use crate::telemetry::{client_span, redis_command};
use bindings::fermyon::spin::redis::{
    self as wit, Error, Host, HostConnection, Payload, RedisParameter, RedisResult,
};

/// Host bindings of the interface, generated here so that this module is the whole factor.
mod bindings {
    wasmtime::component::bindgen!({
        inline: "
            package seckill:redis-factor;
            world redis { import fermyon:spin/redis@2.0.0; }
        ",
        path: "../wit/deps/spin@2.0.0",
        imports: { default: async },
        with: { "fermyon:spin/redis.connection": crate::factors::redis::RedisConnection },
    });
}

/// Spin's per-instance connection table capacity (`Table::new(1024)` in `prepare`,
/// `crates/factor-outbound-redis/src/lib.rs`).
const MAX_CONNECTIONS_PER_INSTANCE: u32 = 1024;

/// The largest reply a command may return (as [`reply_size`] counts), a deliberate difference:
/// Spin has no cap. A reply is copied into the guest, whose memory is capped at 128 MiB (the
/// store's limit), so a larger one could only trap the instance; half of that leaves room for the
/// guest's own heap. redis-rs reads a whole reply before handing it over and has no limit of its
/// own, so this bounds what the host converts and hands to the guest, not redis-rs's read buffer
/// (which Redis's `proto-max-bulk-len`, 512 MB per string, bounds).
pub const MAX_REPLY_BYTES: usize = 64 << 20;

/// An open connection, owned by one instance's resource table.
pub struct RedisConnection {
    /// The connection itself.
    conn: Conn,
    /// The largest reply accepted on it (see [`MAX_REPLY_BYTES`]).
    max_reply_bytes: usize,
}

/// Where a [`RedisConnection`]'s commands go.
enum Conn {
    /// A clone of the app-wide connection to this address.
    Shared(ConnectionManager),
    /// A connection of this instance alone (Spin-faithful mode).
    Own(MultiplexedConnection),
}

impl RedisConnection {
    /// Runs `cmd`, failures as `other`.
    async fn query<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T, Error> {
        self.query_with(cmd, other).await
    }

    /// Runs `cmd` as redis-rs's `Cmd::query_async` does, refusing a reply above the cap and
    /// mapping redis-rs's errors with `map_err`.
    async fn query_with<T: FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
        map_err: impl Fn(redis::RedisError) -> Error,
    ) -> Result<T, Error> {
        let span = client_span!(
            "spin_outbound_redis.execute",
            "db.system" = "redis",
            command_name(cmd).as_str()
        );
        let reply = match &mut self.conn {
            Conn::Shared(c) => c.req_packed_command(cmd).instrument(span).await,
            Conn::Own(c) => c.req_packed_command(cmd).instrument(span).await,
        }
        .map_err(&map_err)?;
        let size = reply_size(&reply);
        if size > self.max_reply_bytes {
            return Err(Error::Other(format!(
                "reply too large: {size} bytes, the limit is {}",
                self.max_reply_bytes
            )));
        }
        redis::from_owned_redis_value(reply.extract_error().map_err(&map_err)?).map_err(map_err)
    }
}

/// The command `cmd` runs, for its span.
fn command_name(cmd: &redis::Cmd) -> String {
    match cmd.args_iter().next() {
        Some(redis::Arg::Simple(name)) => redis_command(&String::from_utf8_lossy(name)),
        _ => redis_command(""),
    }
}

/// What holding `value` costs, roughly: each value's payload plus 8 bytes (an `int64`), so that
/// many empty values add up too.
fn reply_size(value: &Value) -> usize {
    let all = |values: &[Value]| values.iter().map(reply_size).sum::<usize>();
    let pairs = |pairs: &[(Value, Value)]| {
        pairs
            .iter()
            .map(|(k, v)| reply_size(k) + reply_size(v))
            .sum::<usize>()
    };
    8 + match value {
        Value::BulkString(bytes) => bytes.len(),
        Value::SimpleString(text) | Value::VerbatimString { text, .. } => text.len(),
        Value::Array(items) | Value::Set(items) | Value::Push { data: items, .. } => all(items),
        Value::Map(entries) => pairs(entries),
        Value::Attribute { data, attributes } => reply_size(data) + pairs(attributes),
        _ => 0,
    }
}

/// App-wide Redis connections (pooled mode), the connection mode and the reply cap.
pub struct RedisPools {
    /// How `open` connects.
    mode: ConnectionMode,
    /// The shared connection of each address, made by the first `open` of that address: the
    /// others wait for it instead of each opening a connection of its own, while `open`s of other
    /// addresses go on (a dead address holds up only itself).
    shared: RwLock<HashMap<String, Arc<OnceCell<ConnectionManager>>>>,
    /// TCP connections opened so far.
    opened: AtomicU64,
    /// The largest reply accepted (see [`MAX_REPLY_BYTES`]).
    max_reply_bytes: usize,
    /// The roots `rediss://` trusts.
    trust: TlsTrust,
    /// Clients by address (an address is a handful of Spin variables: a small map).
    clients: RwLock<HashMap<String, redis::Client>>,
    /// Where no connection may go.
    blocked: BlockedNetworks,
}

impl Default for RedisPools {
    fn default() -> Self {
        Self::new(ConnectionMode::default(), TlsTrust::default())
    }
}

impl RedisPools {
    /// Pools that open connections as `mode` says, trusting `trust` for `rediss://`.
    pub fn new(mode: ConnectionMode, trust: TlsTrust) -> Self {
        RedisPools {
            mode,
            shared: RwLock::default(),
            opened: AtomicU64::new(0),
            max_reply_bytes: MAX_REPLY_BYTES,
            trust,
            clients: RwLock::default(),
            blocked: BlockedNetworks::default(),
        }
    }

    /// The same pools, connecting to no address of `blocked`.
    pub fn with_blocked(mut self, blocked: BlockedNetworks) -> Self {
        self.blocked = blocked;
        self
    }

    /// The same pools, refusing replies above `max` bytes instead of [`MAX_REPLY_BYTES`].
    pub fn with_max_reply_bytes(mut self, max: usize) -> Self {
        self.max_reply_bytes = max;
        self
    }

    /// How many TCP connections this host has opened to Redis so far.
    pub fn connections_opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// A connection to `address`: a clone of its shared one (made first if needed) or, in
    /// Spin-faithful mode, a new one.
    async fn open(&self, address: &str) -> Result<RedisConnection, Error> {
        Ok(RedisConnection {
            conn: self.connect(address).await?,
            max_reply_bytes: self.max_reply_bytes,
        })
    }

    /// The client of `address`, parsed once with its TLS roots: what Spin pays per request is the
    /// connection (TCP, TLS handshake, AUTH), not reading the trust store again.
    fn client(&self, address: &str) -> Result<redis::Client, Error> {
        if let Some(client) = self.clients.read().unwrap().get(address) {
            return Ok(client.clone());
        }
        let client = self
            .trust
            .redis_client(address)
            .map_err(|_| Error::InvalidAddress)?;
        self.clients
            .write()
            .unwrap()
            .insert(address.to_owned(), client.clone());
        Ok(client)
    }

    /// The connection behind [`Self::open`].
    async fn connect(&self, address: &str) -> Result<Conn, Error> {
        // Pooled and already connected: the hot path, a read lock and a clone.
        if self.mode == ConnectionMode::Pooled
            && let Some(conn) = self
                .shared
                .read()
                .unwrap()
                .get(address)
                .and_then(|c| c.get())
        {
            return Ok(Conn::Shared(conn.clone()));
        }
        let client = self.client(address)?;
        match self.mode {
            ConnectionMode::SpinFaithful => {
                let config =
                    AsyncConnectionConfig::new().set_dns_resolver(Unblocked(self.blocked.clone()));
                let conn = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map_err(other)?;
                self.opened.fetch_add(1, Ordering::Relaxed);
                Ok(Conn::Own(conn))
            }
            ConnectionMode::Pooled => {
                let cell = self
                    .shared
                    .write()
                    .unwrap()
                    .entry(address.to_owned())
                    .or_default()
                    .clone();
                // A failed attempt leaves the cell empty: the next waiter tries in turn.
                let conn = cell
                    .get_or_try_init(|| async {
                        self.check_not_blocked(&client).await?;
                        let conn = ConnectionManager::new_with_config(client, reconnect_policy())
                            .await
                            .map_err(other)?;
                        self.opened.fetch_add(1, Ordering::Relaxed);
                        Ok::<_, Error>(conn)
                    })
                    .await?;
                Ok(Conn::Shared(conn.clone()))
            }
        }
    }
}

impl RedisPools {
    /// Fails when every address `client`'s host resolves to is blocked.
    async fn check_not_blocked(&self, client: &redis::Client) -> Result<(), Error> {
        if self.blocked.is_empty() {
            return Ok(());
        }
        let (host, port) = match &client.get_connection_info().addr {
            redis::ConnectionAddr::Tcp(host, port)
            | redis::ConnectionAddr::TcpTls { host, port, .. } => (host.as_str(), *port),
            _ => return Ok(()),
        };
        let resolver = Unblocked(self.blocked.clone());
        resolver.resolve(host, port).await.map(drop).map_err(other)
    }
}

/// Resolves a name as Tokio does, leaving out the blocked addresses (Spin's `SpinDnsResolver`).
struct Unblocked(BlockedNetworks);

impl AsyncDNSResolver for Unblocked {
    fn resolve<'a, 'b: 'a>(
        &'a self,
        host: &'b str,
        port: u16,
    ) -> redis::RedisFuture<'a, Box<dyn Iterator<Item = std::net::SocketAddr> + Send + 'a>> {
        Box::pin(async move {
            let all: Vec<_> = tokio::net::lookup_host((host, port)).await?.collect();
            let left: Vec<_> = all
                .iter()
                .copied()
                .filter(|a| !self.0.is_blocked(a.ip()))
                .collect();
            if left.is_empty() && !all.is_empty() {
                tracing::error!(
                    host,
                    "every address of the Redis destination is blocked by the runtime config"
                );
                return Err(std::io::Error::other(Prohibited).into());
            }
            Ok(Box::new(left.into_iter()) as Box<dyn Iterator<Item = _> + Send>)
        })
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

/// A redis-rs error as `other`, with its text.
fn other(e: redis::RedisError) -> Error {
    Error::Other(e.to_string())
}

/// One instance's Redis state: its component's allowed hosts, its open connections (a table of
/// its own, as Spin's `InstanceState` keeps one) and the app-wide pools.
pub struct InstanceState {
    pools: Arc<RedisPools>,
    component: Arc<ComponentConfig>,
    connections: ResourceTable,
    /// Connections open now (Spin's table refuses the 1025th).
    open: u32,
    /// What Spin would pay for this instance.
    meter: Arc<InstanceMeter>,
}

/// How this factor connects: the runtime configuration it owns.
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    pub connection_mode: ConnectionMode,
    /// The roots `rediss://` trusts.
    pub tls: TlsTrust,
    /// Where no connection may go.
    pub blocked: BlockedNetworks,
}

impl Factor for InstanceState {
    type RuntimeConfig = RuntimeConfig;
    type AppState = Arc<RedisPools>;

    /// Nothing of the manifest is this factor's to check: the addresses a component may open
    /// are its allowed hosts, checked when it is resolved (Spin's `configure_app` checks
    /// nothing either: `crates/factor-outbound-redis/src/lib.rs`).
    fn configure_app(
        config: RuntimeConfig,
        _: &ConfigureAppContext<'_>,
    ) -> Result<Arc<RedisPools>, ManifestError> {
        Ok(Arc::new(
            RedisPools::new(config.connection_mode, config.tls).with_blocked(config.blocked),
        ))
    }

    fn prepare(ctx: PrepareContext<'_, Arc<RedisPools>>) -> Self {
        InstanceState {
            pools: ctx.app_state.clone(),
            component: ctx.component.clone(),
            connections: ResourceTable::new(),
            open: 0,
            meter: ctx.meter.clone(),
        }
    }

    fn add_to_linker<T: Send + 'static>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut Self,
    ) -> wasmtime::Result<()> {
        wit::add_to_linker::<T, HasSelf<InstanceState>>(linker, get)
    }
}

impl InstanceState {
    /// The open connection behind `conn`.
    fn redis(&mut self, conn: &Resource<RedisConnection>) -> Result<&mut RedisConnection, Error> {
        self.connections
            .get_mut(conn)
            .map_err(|e| Error::Other(e.to_string()))
    }
}

impl Host for InstanceState {}

impl HostConnection for InstanceState {
    async fn open(&mut self, address: String) -> Result<Resource<RedisConnection>, Error> {
        // Spin: `check_url` first, then a new connection (`factor-outbound-redis/src/host.rs`).
        self.meter.outbound_open();
        if !self.component.allowed_hosts.allows_url(&address) {
            tracing::warn!(component = %self.component.id, "redis address not allowed by allowed_outbound_hosts");
            return Err(Error::InvalidAddress);
        }
        if self.open >= MAX_CONNECTIONS_PER_INSTANCE {
            return Err(Error::TooManyConnections);
        }
        let span = client_span!(
            "spin_outbound_redis.open_connection",
            "db.system" = "redis",
            "open"
        );
        let conn = self.pools.open(&address).instrument(span).await?;
        let conn = self
            .connections
            .push(conn)
            .map_err(|_| Error::TooManyConnections)?;
        self.open += 1;
        Ok(conn)
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
        // Spin maps a client-side type error to `type-error`; anything else is `other`.
        self.redis(&conn)?
            .query_with(redis::cmd("SADD").arg(key).arg(values), |e| {
                if e.kind() == redis::ErrorKind::TypeError {
                    Error::TypeError
                } else {
                    other(e)
                }
            })
            .await
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

    /// Removes the connection, freeing its slot of the instance's table (as Spin's does).
    async fn drop(&mut self, conn: Resource<RedisConnection>) -> wasmtime::Result<()> {
        self.connections.delete(conn)?;
        self.open = self.open.saturating_sub(1);
        Ok(())
    }
}

/// A reply as the interface's `redis-result`s, flattened as Spin flattens it (the one flattening
/// the host and the native adapter share: [`seckill_redis_reply::flatten`]).
fn flatten(value: Value) -> Result<Vec<RedisResult>, Error> {
    let replies = seckill_redis_reply::flatten(value).map_err(Error::Other)?;
    Ok(replies
        .into_iter()
        .map(|reply| match reply {
            Reply::Nil => RedisResult::Nil,
            Reply::Int(v) => RedisResult::Int64(v),
            Reply::Bytes(b) => RedisResult::Binary(b),
            Reply::Status(s) => RedisResult::Status(s),
        })
        .collect())
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

/// Behaviour against a real `redis-server` (and a listener that never answers).
#[cfg(test)]
mod server_tests {
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::time::Duration;

    use seckill_testkit::RedisServer;

    use super::*;
    use crate::factors::allowed_hosts::AllowedHosts;

    /// The Redis state of an instance whose component may reach any loopback Redis, using
    /// `redis`.
    fn ctx(redis: RedisPools) -> InstanceState {
        let component = ComponentConfig {
            id: "test".into(),
            allowed_hosts: AllowedHosts::parse(["redis://127.0.0.1:*"]).unwrap(),
            ..ComponentConfig::default()
        };
        InstanceState::prepare(PrepareContext {
            app_state: &Arc::new(redis),
            component: &Arc::new(component),
            meter: &InstanceMeter::detached(),
        })
    }

    /// Another handle to the same table entry, for calls that take the handle by value.
    fn again(conn: &Resource<RedisConnection>) -> Resource<RedisConnection> {
        Resource::new_borrow(conn.rep())
    }

    /// A first connection to an address that never answers does not hold up a first connection
    /// to a healthy one.
    #[tokio::test]
    async fn a_dead_address_does_not_delay_other_addresses() {
        let server = RedisServer::start().expect("redis-server");
        // Accepts TCP (the kernel completes the handshake) but never replies.
        let dead = TcpListener::bind("127.0.0.1:0").unwrap();
        let dead_url = format!("redis://{}", dead.local_addr().unwrap());
        let pools = Arc::new(RedisPools::new(ConnectionMode::Pooled, TlsTrust::default()));
        let stuck = tokio::spawn({
            let pools = pools.clone();
            async move { pools.open(&dead_url).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !stuck.is_finished(),
            "the dead address should still be connecting"
        );
        let healthy = tokio::time::timeout(Duration::from_secs(1), pools.open(&server.url())).await;
        assert!(
            matches!(healthy, Ok(Ok(_))),
            "the healthy address waited for the dead one"
        );
        stuck.abort();
    }

    /// Dropping a connection frees its slot: an instance may open and drop any number of
    /// connections, as in Spin, where `drop` removes the entry from its table.
    #[tokio::test]
    async fn dropping_a_connection_frees_its_slot() {
        let server = RedisServer::start().expect("redis-server");
        let mut ctx = ctx(RedisPools::new(ConnectionMode::Pooled, TlsTrust::default()));
        let before = ctx.open;
        let conn = HostConnection::open(&mut ctx, server.url()).await.unwrap();
        assert_eq!(ctx.open, before + 1);
        HostConnection::drop(&mut ctx, conn).await.unwrap();
        assert_eq!(ctx.open, before);
        for _ in 0..=MAX_CONNECTIONS_PER_INSTANCE {
            let conn = HostConnection::open(&mut ctx, server.url()).await.unwrap();
            HostConnection::drop(&mut ctx, conn).await.unwrap();
        }
        assert_eq!(ctx.open, before);
    }

    /// A reply larger than the cap is `other("reply too large ...")`, whatever the command, and
    /// the connection stays usable.
    #[tokio::test]
    async fn replies_above_the_cap_are_an_error() {
        let server = RedisServer::start().expect("redis-server");
        for mode in [ConnectionMode::Pooled, ConnectionMode::SpinFaithful] {
            let mut ctx =
                ctx(RedisPools::new(mode, TlsTrust::default()).with_max_reply_bytes(1024));
            let conn = HostConnection::open(&mut ctx, server.url()).await.unwrap();
            let small = vec![b's'; 100];
            ctx.set(again(&conn), "small".into(), small.clone())
                .await
                .unwrap();
            ctx.set(again(&conn), "big".into(), vec![b'b'; 2048])
                .await
                .unwrap();
            let too_large = |result: Result<_, Error>| match result {
                Err(Error::Other(message)) => message.contains("reply too large"),
                _ => false,
            };
            assert!(too_large(
                ctx.get(again(&conn), "big".into()).await.map(|_| ())
            ));
            let get_big = vec![RedisParameter::Binary(b"big".to_vec())];
            assert!(too_large(
                ctx.execute(again(&conn), "GET".into(), get_big)
                    .await
                    .map(|_| ())
            ));
            // Many small values add up.
            let mget = vec![RedisParameter::Binary(b"small".to_vec()); 20];
            assert!(too_large(
                ctx.execute(again(&conn), "MGET".into(), mget)
                    .await
                    .map(|_| ())
            ));
            assert_eq!(
                ctx.get(again(&conn), "small".into()).await.unwrap(),
                Some(small)
            );
            HostConnection::drop(&mut ctx, conn).await.unwrap();
        }
    }
}
