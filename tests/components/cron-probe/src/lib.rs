//! A cron handler for the host's tests: each run increments `cron-probe:runs` and records the
//! timestamp it was given, so a test can see that the schedule fired and with what metadata.

use spin_sdk::{redis, variables};

/// The exported component.
struct CronProbe;

impl seckill_cron_bindings::Guest for CronProbe {
    fn handle_cron_event(
        metadata: seckill_cron_bindings::Metadata,
    ) -> Result<(), seckill_cron_bindings::Error> {
        let fail = |e: String| seckill_cron_bindings::Error::Other(e);
        let url = variables::get("redis_url").map_err(|e| fail(e.to_string()))?;
        let conn = redis::Connection::open(&url).map_err(|e| fail(e.to_string()))?;
        conn.incr("cron-probe:runs")
            .map_err(|e| fail(e.to_string()))?;
        conn.set(
            "cron-probe:last-timestamp",
            &metadata.timestamp.to_string().into_bytes(),
        )
        .map_err(|e| fail(e.to_string()))?;
        Ok(())
    }
}

seckill_cron_bindings::export!(CronProbe with_types_in seckill_cron_bindings::bindings);
