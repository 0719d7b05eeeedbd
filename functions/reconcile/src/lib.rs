//! Scheduled reconciliation: checks every event's books across Redis and Postgres and repairs
//! what is safe ([`orders::reconcile_all`]); logs the books that need an operator. Also
//! `POST /admin/jobs/reconcile`.

use seckill_domain::orders;
use seckill_spin_edge::config;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::store;

/// The exported component.
struct Reconcile;

impl seckill_cron_bindings::Guest for Reconcile {
    fn handle_cron_event(
        _: seckill_cron_bindings::Metadata,
    ) -> Result<(), seckill_cron_bindings::Error> {
        let run = || -> Result<(), ApiError> {
            let (nodes, db) = (store::nodes()?, config::postgres()?);
            let books = orders::reconcile_all(&nodes, &db, None, true)?;
            if books.needs_an_operator() {
                eprintln!(
                    "reconcile: {}",
                    serde_json::to_string(&books).unwrap_or_default()
                );
            }
            Ok(())
        };
        run().map_err(|e| seckill_cron_bindings::Error::Other(e.reason()))
    }
}

seckill_cron_bindings::export!(Reconcile with_types_in seckill_cron_bindings::bindings);
