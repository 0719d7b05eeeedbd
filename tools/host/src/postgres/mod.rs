//! The host side of `spin:postgres/postgres@4.0.0`, reproducing Spin 3.6's
//! `spin-factor-outbound-pg`: one connection pool per connection string, parameters bound with
//! the exact Rust type of their WIT variant (so Postgres's own type checks apply, e.g. `int32`
//! against a `bigint` column fails), and results mapped column by column the way Spin maps them,
//! quirks included (see `types`).
//!
//! Split as Spin splits its factor (`crates/factor-outbound-pg/src/`): `client` (pools and
//! connections), `host` (the WIT interface), `types` and `range` (value conversions), `errors`
//! (Spin's error variants).
//!
//! # TLS
//!
//! This host has no TLS stack: it is for local use with `sslmode=disable`. A connection string
//! that *requires* TLS (`sslmode=require`) fails to open with
//! `connection-failed("TLS not supported by this host")`; `sslmode=prefer` (tokio-postgres's
//! default) connects without TLS, as Spin does when the server does not offer it.

// The WIT `error` carries a whole server error report; boxing it would not match the bindings.
#![allow(clippy::result_large_err)]

mod client;
mod errors;
mod host;
mod range;
mod types;

pub use client::{PgConnection, PgPools, TransactionState};
