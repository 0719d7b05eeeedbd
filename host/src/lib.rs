//! seckill-host: runs seckill's Spin components on wasmtime, the way Spin 3.6 does.
//!
//! Made of factors, as Spin is (`crates/factors`, `crates/factor-*`). Each interface the guests
//! import is one module with its bindings and a [`factor::Factor`]: its app-wide state, its
//! per-instance `InstanceState` and its linking over a projection from the store's data
//! ([`redis`], [`postgres`], [`variables`]); [`wasi`] and [`outbound_http`] (`wasi:http`) share
//! the store's resource table. [`state`] composes them: `Ctx`, a store's data, and `Services`,
//! the factors' app-wide states.
//!
//! Loading ([`app`]): [`manifest`] parses `spin.toml`, [`expressions`] resolves its variables and
//! templates, [`runtime`] resolves ([`component`]), compiles and pre-instantiates the components,
//! then [`http_trigger`] (with [`routes`]) and [`cron_trigger`] each check and build their own
//! triggers, which they then run. [`allowed_hosts`] and [`tls`] are what the outbound factors
//! check and trust. [`serve`] serves the HTTP trigger (connection limits, timeouts, graceful
//! shutdown, lingering close) and [`metrics`] counts what it serves. [`spin_costs`] counts, per
//! component, what real Spin would pay per request for the work this host does once at startup
//! ([`App::spin_costs`]).

pub mod allowed_hosts;
pub mod app;
pub mod bench;
pub mod classes;
pub mod component;
pub mod cron_trigger;
pub mod expressions;
pub mod factor;
pub mod http_trigger;
pub mod manifest;
pub mod metrics;
pub mod outbound_http;
pub mod overload;
pub mod postgres;
pub mod redis;
pub mod routes;
pub mod runtime;
pub mod serve;
pub mod spin_costs;
pub mod state;
pub mod tls;
pub mod variables;
pub mod wasi;

pub use app::{App, Options};
pub use factor::ConnectionMode;
pub use spin_costs::{SpinCostTotals, SpinCosts};
