//! The Spin edge of seckill: everything that knows Spin, so the domain (`seckill-domain`)
//! does not. A function parses its request here ([`http`]), calls one domain operation over
//! the adapters here ([`store::SpinStore`]: [`redis::SpinRedis`] or [`rest::RestStore`] by the
//! URL's scheme; [`postgres::SpinPg`]), and renders the outcome
//! here ([`error::ApiError`], with the one table from domain code to HTTP status); [`config`]
//! reads the Spin variables, [`health`] probes both dependencies.

pub mod config;
pub mod error;
pub mod health;
pub mod http;
pub mod jobs;
pub mod order_events;
pub mod outbound;
pub mod payments;
pub mod postgres;
pub mod redis;
pub mod rest;
pub mod store;
