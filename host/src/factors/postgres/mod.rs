//! The outbound Postgres factor: `spin:postgres/postgres@4.0.0`, reproducing Spin 3.6's
//! `spin-factor-outbound-pg`: one connection pool per connection string, parameters bound with
//! the exact Rust type of their WIT variant (so Postgres's own type checks apply, e.g. `int32`
//! against a `bigint` column fails), and results mapped column by column the way Spin maps them,
//! quirks included (see `types`).
//!
//! Split as Spin splits its factor (`crates/factor-outbound-pg/src/`): `client` (pools and
//! connections), `host` (the per-instance state, the WIT interface and `add_to_linker`), `types`
//! and `range` (value conversions), `errors` (Spin's error variants), `bindings` (the WIT's).
//!
//! # TLS
//!
//! Every `sslmode` but `disable` connects over TLS and verifies the chain and host name,
//! `require` included, trusting the system's roots plus `--tls-ca` (`client`, as Spin's
//! `create_connection_pool`).

// The WIT `error` carries a whole server error report; boxing it would not match the bindings.
#![allow(clippy::result_large_err)]

mod bindings;
mod client;
mod errors;
mod host;
mod range;
mod types;

pub use client::{PgConnection, PgPools, TransactionState};
pub use host::{InstanceState, RuntimeConfig};
