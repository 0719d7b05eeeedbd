//! Scheduled timeout release: unpaid orders past their deadline expire and their units go back
//! to their shards, exactly once ([`orders::release_expired`]). Also `POST /admin/jobs/timeout-release`.

use seckill_domain::{clock, orders};
use seckill_spin_edge::config;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::store;

/// The exported component.
struct TimeoutRelease;

impl seckill_cron_bindings::Guest for TimeoutRelease {
    fn handle_cron_event(
        _: seckill_cron_bindings::Metadata,
    ) -> Result<(), seckill_cron_bindings::Error> {
        let run = || -> Result<_, ApiError> {
            Ok(orders::release_expired(
                &store::nodes()?,
                &config::postgres()?,
                clock::now_ms(),
                config::Settings::read()?.release_batch,
            )?)
        };
        run()
            .map(drop)
            .map_err(|e| seckill_cron_bindings::Error::Other(e.reason()))
    }
}

seckill_cron_bindings::export!(TimeoutRelease with_types_in seckill_cron_bindings::bindings);
