//! The order events' delivery: every event after each endpoint's cursor is sent to it, signed,
//! in order, with retries and disabling on failure
//! ([`seckill_spin_edge::order_events::deliver_for`]). The one component allowed to reach any
//! `https` host, the endpoints being registered at run time; so it is both the cron trigger's
//! (every second, one run) and the jobs route's for this job (`/admin/jobs/deliver-events`,
//! an exact route that the `jobs` component's `/admin/jobs/:job` gives way to, for platforms
//! without a cron trigger: `?for_ms=N` runs it again and again for N ms).

use std::time::Duration;

use seckill_domain::jobs::Job;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::jobs::{self, JobRun};
use seckill_spin_edge::postgres::SpinPg;
use seckill_spin_edge::{config, http, order_events};
use serde_json::Value;
use spin_sdk::http::{IncomingRequest, Request, Response};
use spin_sdk::http_component;

/// The exported cron handler.
struct DeliverEvents;

impl seckill_cron_bindings::Guest for DeliverEvents {
    fn handle_cron_event(
        _: seckill_cron_bindings::Metadata,
    ) -> Result<(), seckill_cron_bindings::Error> {
        let run = || order_events::deliver_for(&config::postgres()?, Duration::ZERO);
        let done = run().map_err(|e| seckill_cron_bindings::Error::Other(e.reason()))?;
        let report = &done.report;
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

/// The jobs route for this job: authenticated, run, audited as every job is.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    jobs::answer(req, Some(Job::DeliverEvents), run)
}

/// Delivers for the run's budget; the Postgres connection is left in `db` for the audit.
fn run(run: &JobRun, db: &mut Option<SpinPg>) -> Result<Value, ApiError> {
    let db = &*db.insert(config::postgres()?);
    http::to_value(&order_events::deliver_for(db, run.budget)?)
}
