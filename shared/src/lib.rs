//! What every seckill function shares. A function crate parses its request, calls one operation
//! from here, and renders the result with [`http`]; nothing below is copied per function.

pub mod clock;
pub mod config;
pub mod error;
pub mod health;
pub mod http;

pub use error::ApiError;
