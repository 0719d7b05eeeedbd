//! The domain of seckill: what a flash sale is, with no Spin and no HTTP in it. Each function
//! crate parses its request (with `seckill-spin-edge`), calls one operation from here, and renders
//! the result; nothing below is copied per function.
//!
//! - [`sale`]: issue-token, precheck, buy, poll; [`admin`]: what operators do; [`orders`]: the
//!   drain into Postgres, payment, timeout release, reconciliation.
//! - [`sharded`]: one event's stock shards over many Redis nodes, each shard a slot of its own.
//! - [`keys`]: the Redis key schema; [`nodes`]: which Redis node holds an event;
//!   [`registry`]: the events each node holds; [`scripts`]: every Lua script, typed, from the
//!   contracts declared in `crates/domain/lua/`.
//! - The two ports the domain runs against: [`store::Store`] (EVALSHA/EVAL) and [`sql::Sql`]
//!   (the orders database); in-memory fakes of both for the unit tests (`testing`).
//! - [`auth`]: buyer JWTs, admission tokens, the operators and their roles; [`audit`]: who
//!   changed what; [`event`]: event configuration; [`net`]: client addresses and CIDR ranges,
//!   canonical; [`pow`]: the admission's proof of work; [`provider`]: the payment provider's
//!   webhooks.

pub mod admin;
pub mod audit;
pub mod auth;
pub mod checkout;
pub mod clock;
pub mod error;
pub mod event;
pub mod global_limit;
pub mod ids;
pub mod jobs;
mod json_integer;
pub mod keys;
pub mod net;
pub mod nodes;
pub mod order_events;
pub mod orders;
pub mod pow;
pub mod provider;
pub mod registry;
pub mod sale;
pub mod scripts;
pub mod sharded;
pub mod sql;
pub mod store;
pub mod versions;

#[cfg(test)]
mod testing;

pub use error::Error;
