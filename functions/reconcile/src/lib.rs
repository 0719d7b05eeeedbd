//! Scheduled reconcile: every event's books across Redis and Postgres ([`orders::reconcile`]),
//! repairing what is safe and logging any drift. Also `POST /admin/jobs/reconcile`.

use seckill_shared::{config, http, orders};

/// The exported component.
struct Reconcile;

impl seckill_cron::Guest for Reconcile {
    fn handle_cron_event(_: seckill_cron::Metadata) -> Result<(), seckill_cron::Error> {
        let run = || -> Result<(), seckill_shared::ApiError> {
            let (nodes, db) = (http::redis_nodes()?, config::postgres()?);
            for event in orders::all_events(&nodes)? {
                let books = orders::reconcile(nodes.for_event(&event)?, &db, &event, true)?;
                if books.drift != 0
                    || books.dead_letters != 0
                    || books.ledger_drift.is_some_and(|d| d != 0)
                {
                    eprintln!(
                        "reconcile {}: {}",
                        event.as_str(),
                        serde_json::to_string(&books).unwrap_or_default()
                    );
                }
            }
            Ok(())
        };
        run().map_err(|e| seckill_cron::Error::Other(e.to_string()))
    }
}

seckill_cron::export!(Reconcile with_types_in seckill_cron::bindings);
