//! The Spin variables the functions read, in one place.

use crate::error::ApiError;
use seckill_domain::orders::DrainOptions;

use crate::postgres::SpinPg;

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

/// Reads an optional Spin variable, falling back to `default` when it is not defined.
pub fn get_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    spin_sdk::variables::get(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The drain's tuning: `drain_batch`, `drain_max_batches`, `drain_lease_ms`,
/// `drain_reclaim_idle_ms`, `drain_max_deliveries`. In the tests' build only, it also arms the
/// drain's `fault_injection` point.
pub fn drain_options() -> DrainOptions {
    #[cfg(feature = "fault-injection")]
    if let Ok(point) = spin_sdk::variables::get("fault_injection") {
        seckill_domain::orders::fault::arm(&point);
    }
    DrainOptions {
        owner: format!("drainer-{}", seckill_domain::ids::random_hex(6)),
        batch: get_or("drain_batch", 500),
        max_batches: get_or("drain_max_batches", 200),
        lease_ms: get_or("drain_lease_ms", 30_000),
        reclaim_idle_ms: get_or("drain_reclaim_idle_ms", 30_000),
        max_deliveries: get_or("drain_max_deliveries", 5),
        until: None,
    }
}

/// How often one poll per event is elected to drain after answering (`poll_drain_ms`; 0, the
/// default of `spin.toml` whose cron drains every second, turns the poll-carried drain off).
pub fn poll_drain_ms() -> u64 {
    get_or("poll_drain_ms", 0)
}

/// Timeout release: expired orders handled per run, and units given back per event per run
/// (`release_batch`).
pub fn release_batch() -> i64 {
    get_or("release_batch", 1_000)
}

/// The orders database.
pub fn postgres() -> Result<SpinPg, ApiError> {
    Ok(SpinPg::open(&get(PG_URL)?).map_err(seckill_domain::Error::from)?)
}
