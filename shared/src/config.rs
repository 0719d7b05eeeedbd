//! The Spin variables the functions read, in one place.

use crate::ApiError;

/// Redis URL (`redis://host:port` or `rediss://user:pass@host:port`): `redis_url`.
pub const REDIS_URL: &str = "redis_url";
/// Postgres connection string: `pg_url`.
pub const PG_URL: &str = "pg_url";

/// Reads a Spin variable; a missing one is a configuration error, reported as 500.
pub fn get(name: &str) -> Result<String, ApiError> {
    spin_sdk::variables::get(name).map_err(|e| ApiError::internal(format!("variable {name}: {e}")))
}
