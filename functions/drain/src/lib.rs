//! Scheduled drain: order intents from the Redis streams into Postgres ([`orders::drain`]).
//! The same work is reachable as `POST /admin/jobs/drain` (`functions/jobs`).

use seckill_domain::{clock, orders};
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
            Ok(orders::drain(
                &store::nodes()?,
                &config::postgres()?,
                &config::Settings::read()?.drain_options(),
                clock::now_ms(),
            )?)
        };
        run()
            .map(drop)
            .map_err(|e| seckill_cron_bindings::Error::Other(e.reason()))
    }
}

seckill_cron_bindings::export!(Drain with_types_in seckill_cron_bindings::bindings);
