//! What every seckill function shares. A function crate parses its request, calls one operation
//! from here, and renders the result with [`http`]; nothing below is copied per function.
//!
//! - [`sale`]: issue-token, precheck, buy, poll; [`admin`]: what operators do.
//! - [`keys`]: the Redis key schema; [`nodes`]: which Redis node holds an event;
//!   [`scripts`]: every Lua script; [`store`]: running them.
//! - [`auth`]: buyer JWTs, admission tokens, the admin secret; [`event`]: event configuration.

pub mod admin;
pub mod auth;
pub mod clock;
pub mod error;
pub mod event;
pub mod ids;
pub mod keys;
pub mod nodes;
pub mod sale;
pub mod scripts;
pub mod store;

#[cfg(feature = "spin")]
pub mod config;
#[cfg(feature = "spin")]
pub mod health;
#[cfg(feature = "spin")]
pub mod http;
#[cfg(feature = "spin")]
pub mod orders;

pub use error::ApiError;
