//! Scheduled timeout release: unpaid orders past their deadline expire and their units go back
//! to their shards, exactly once, after their checkout sessions are closed at the provider
//! ([`payments::release_for`], one run). Also `POST /admin/jobs/timeout-release`.

use std::time::Duration;

use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::store;
use seckill_spin_edge::{config, payments};

/// The exported component.
struct TimeoutRelease;

impl seckill_cron_bindings::Guest for TimeoutRelease {
    fn handle_cron_event(
        _: seckill_cron_bindings::Metadata,
    ) -> Result<(), seckill_cron_bindings::Error> {
        let run = || -> Result<_, ApiError> {
            Ok(payments::release_for(
                &store::nodes()?,
                &config::postgres()?,
                &config::Settings::read()?,
                Duration::ZERO,
            )?)
        };
        run()
            .map(drop)
            .map_err(|e| seckill_cron_bindings::Error::Other(e.reason()))
    }
}

seckill_cron_bindings::export!(TimeoutRelease with_types_in seckill_cron_bindings::bindings);
