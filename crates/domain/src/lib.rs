//! The domain of seckill: what a flash sale is, with no Spin and no HTTP in it. Each function
//! crate parses its request (with `seckill-spin-edge`), calls one operation from here, and renders
//! the result; nothing below is copied per function.
//!
//! - [`sale`]: issue-token, precheck, buy, poll; [`admin`]: what operators do; [`orders`]: the
//!   drain into Postgres, payment, timeout release, reconciliation.
//! - [`keys`]: the Redis key schema; [`nodes`]: which Redis node holds an event;
//!   [`scripts`]: every Lua script, typed.
//! - The two ports the domain runs against: [`store::Store`] (Redis scripts) and [`sql::Sql`]
//!   (the orders database).
//! - [`auth`]: buyer JWTs, admission tokens, the admin secret; [`event`]: event configuration.

pub mod admin;
pub mod auth;
pub mod clock;
pub mod error;
pub mod event;
pub mod ids;
pub mod keys;
pub mod nodes;
pub mod orders;
pub mod sale;
pub mod scripts;
pub mod sql;
pub mod store;

pub use error::Error;
