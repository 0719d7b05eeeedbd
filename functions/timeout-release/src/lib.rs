//! Scheduled timeout release: unpaid orders past their deadline expire and their units go back
//! to their shards, exactly once ([`orders::release_expired`]). Also `POST /admin/jobs/timeout-release`.

use seckill_shared::{clock, orders};
use seckill_spin::error::ApiError;
use seckill_spin::{config, http};

/// The exported component.
struct TimeoutRelease;

impl seckill_cron::Guest for TimeoutRelease {
    fn handle_cron_event(_: seckill_cron::Metadata) -> Result<(), seckill_cron::Error> {
        let run = || -> Result<_, ApiError> {
            Ok(orders::release_expired(
                &http::redis_nodes()?,
                &config::postgres()?,
                clock::now_ms(),
                config::release_batch(),
            )?)
        };
        run()
            .map(drop)
            .map_err(|e| seckill_cron::Error::Other(e.reason()))
    }
}

seckill_cron::export!(TimeoutRelease with_types_in seckill_cron::bindings);
