//! seckill-host: runs seckill's Spin components on wasmtime, the way Spin 3.6 does.
//!
//! Layered as Spin's crates are, each layer using only those below it: [`manifest`] parses
//! `spin.toml` and resolves its variables and templates (Spin's `spin-manifest`,
//! `spin-expressions`); [`factors`] are the host interfaces the guests import, one module each
//! with its bindings and a [`factors::Factor`] (Spin's `crates/factor-*`), with what they read of
//! a component, check and trust, and the meter of what real Spin would pay per request
//! ([`factors::spin_costs`]); [`runtime`] compiles and pre-instantiates the components, composes
//! a store's data from the factors and admits requests to the instance slots by class
//! ([`runtime::overload`]); [`trigger`] runs the HTTP and cron triggers and serves HTTP as a
//! production runtime; [`app`] loads an app through all of them. [`telemetry`] traces requests
//! and their outbound calls across the layers, as Spin's `crates/telemetry` does.

pub mod app;
pub mod bench;
pub mod factors;
pub mod manifest;
pub mod runtime;
pub mod telemetry;
pub mod trigger;

pub use app::{App, Options};
pub use factors::ConnectionMode;
pub use factors::spin_costs::{SpinCostTotals, SpinCosts};
