//! The Spin variables the functions read, in one place.

use crate::ApiError;

/// Redis URL (`redis://host:port` or `rediss://user:pass@host:port`).
pub const REDIS_URL: &str = "redis_url";
/// Postgres connection string.
pub const PG_URL: &str = "pg_url";
/// HS256 key of the shop's login tokens.
pub const JWT_SECRET: &str = "jwt_secret";
/// HMAC key of admission tokens.
pub const ADMISSION_SECRET: &str = "admission_secret";
/// The operators' bearer secret.
pub const ADMIN_TOKEN: &str = "admin_token";

/// Reads a Spin variable; a missing one is a configuration error, reported as 500.
pub fn get(name: &str) -> Result<String, ApiError> {
    spin_sdk::variables::get(name).map_err(|e| ApiError::internal(format!("variable {name}: {e}")))
}
