//! Scheduled order events delivery: every event after each endpoint's cursor is sent to it,
//! signed, in order, with retries and disabling on failure
//! ([`seckill_spin_edge::order_events::deliver_for`], one run). The one component allowed to
//! reach any `https` host: the endpoints are registered at run time.

use seckill_spin_edge::order_events;

/// A run's budget: the next one starts a second later, and an endpoint's claim outlasts it.
const BUDGET_MS: u64 = 30_000;

/// The exported component.
struct DeliverEvents;

impl seckill_cron_bindings::Guest for DeliverEvents {
    fn handle_cron_event(
        _: seckill_cron_bindings::Metadata,
    ) -> Result<(), seckill_cron_bindings::Error> {
        let report = order_events::deliver_for(BUDGET_MS)
            .map_err(|e| seckill_cron_bindings::Error::Other(e.reason()))?;
        if report.failed > 0 || report.disabled > 0 {
            eprintln!(
                "order events: {} delivered, {} failed, {} endpoints disabled",
                report.delivered, report.failed, report.disabled
            );
        }
        Ok(())
    }
}

seckill_cron_bindings::export!(DeliverEvents with_types_in seckill_cron_bindings::bindings);
