//! Scheduled drain: order intents from the Redis streams into Postgres ([`orders::drain`]).
//! The same work is reachable as `POST /admin/jobs/drain` (`functions/jobs`).

use seckill_shared::{clock, config, http, orders};

/// The exported component.
struct Drain;

impl seckill_cron::Guest for Drain {
    fn handle_cron_event(_: seckill_cron::Metadata) -> Result<(), seckill_cron::Error> {
        let run = || {
            orders::drain(
                &http::redis_nodes()?,
                &config::postgres()?,
                &config::drain_options(),
                clock::now_ms(),
            )
        };
        run()
            .map(drop)
            .map_err(|e| seckill_cron::Error::Other(e.to_string()))
    }
}

seckill_cron::export!(Drain with_types_in seckill_cron::bindings);
