//! seckill-host: runs seckill's Spin components on wasmtime, the way Spin 3.6 does.
//!
//! Three layers, as Spin's crates are: [`app`] loads an app in Spin's order ([`app::manifest`]
//! parses `spin.toml`, [`app::expressions`] resolves its variables and templates,
//! [`app::runtime`] resolves, compiles and pre-instantiates the components, [`app::state`]
//! composes a store's data from the factors); [`factors`] are the host interfaces the guests
//! import, one module each with its bindings and a [`factors::Factor`] (Spin's
//! `crates/factor-*`), with what the outbound ones check and trust
//! ([`factors::allowed_hosts`], [`factors::tls`]); [`trigger`] runs the HTTP and cron triggers
//! and serves HTTP as a production runtime. [`spin_costs`] counts, per component, what real Spin
//! would pay per request for the work this host does once at startup ([`App::spin_costs`]).

pub mod app;
pub mod bench;
pub mod factors;
pub mod spin_costs;
pub mod trigger;

pub use app::{App, Options};
pub use factors::ConnectionMode;
pub use spin_costs::{SpinCostTotals, SpinCosts};
