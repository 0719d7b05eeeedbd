//! The function's clock: for `/api/time`, token expiry and order ids. The sale window, rate
//! limits and order timestamps are judged inside the scripts by Redis's `TIME`, the one clock
//! every function instance shares; hosts and Redis are expected to run NTP.

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
