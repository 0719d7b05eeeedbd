//! seckill-host: runs seckill's Spin components on wasmtime, the way Spin 3.6 does.
//!
//! The host is split by interface, like wasmtime's own crates: [`manifest`] and [`app`] load and
//! check `spin.toml`; [`http_trigger`] and [`cron_trigger`] run components; [`redis`],
//! [`postgres`], [`variables`] and [`outbound_http`] implement what the guests import; [`tls`]
//! is the trust behind `rediss://` and Postgres TLS.

pub mod allowed_hosts;
pub mod app;
pub mod bench;
pub mod bindings;
pub mod cron_trigger;
pub mod http_trigger;
pub mod manifest;
pub mod outbound_http;
pub mod postgres;
pub mod redis;
pub mod routes;
pub mod state;
pub mod tls;
pub mod variables;

pub use app::{App, Options};
pub use state::ConnectionMode;
