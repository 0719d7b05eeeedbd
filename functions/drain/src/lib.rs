//! Scheduled drain: order intents from the Redis streams into Postgres ([`jobs::drain_for`],
//! one run).
//! The same work is reachable as `POST /admin/jobs/drain` (`functions/jobs`).

use std::time::Duration;

use seckill_domain::jobs;
use seckill_spin_edge::config;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::store;

/// The exported component.
struct Drain;

impl seckill_cron_bindings::Guest for Drain {
    fn handle_cron_event(
        _: seckill_cron_bindings::Metadata,
    ) -> Result<(), seckill_cron_bindings::Error> {
        let run = || -> Result<_, ApiError> {
            Ok(jobs::drain_for(
                &store::nodes()?,
                &config::postgres()?,
                &config::Settings::read()?.drain_options(),
                Duration::ZERO,
            )?)
        };
        run()
            .map(drop)
            .map_err(|e| seckill_cron_bindings::Error::Other(e.reason()))
    }
}

seckill_cron_bindings::export!(Drain with_types_in seckill_cron_bindings::bindings);
