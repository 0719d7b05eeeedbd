//! The scheduled work over HTTP, for platforms without a cron trigger (Akamai Functions'
//! `spin aka crons`, Kubernetes CronJobs), behind a scheduler's or an operator's credential
//! ([`seckill_spin_edge::jobs`]: who may run a job, its parameters, its audit). Every run a
//! person starts is in the audit, and a scheduler credential's first run; the others are
//! counted in the host's metrics.
//!
//! | route | does |
//! |---|---|
//! | `POST /admin/jobs/drain` | [`jobs::drain_for`] |
//! | `POST /admin/jobs/timeout-release` | [`payments::release_for`] |
//! | `POST /admin/jobs/reconcile?event=<id>` | [`orders::reconcile`] with repair, one event or all |
//! | `POST /admin/jobs/deliver-events` | not here: the `deliver-events` component's own route |
//!
//! `drain` and `timeout-release` take `?for_ms=N` (at most [`MAX_FOR_MS`]): the job runs again
//! and again for N ms ([`jobs`]), so a scheduler that fires once a minute (a
//! Kubernetes CronJob) or every 5 minutes (`spin aka cron`) still keeps orders flowing.

use std::time::Duration;

use seckill_domain::event::EventId;
use seckill_domain::jobs::{self, Job, MAX_FOR_MS};
use seckill_domain::nodes::Nodes;
use seckill_domain::orders;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::jobs::{JobRun, served_elsewhere};
use seckill_spin_edge::postgres::SpinPg;
use seckill_spin_edge::store::{self, SpinStore};
use seckill_spin_edge::{config, http, payments};
use serde_json::Value;
use spin_sdk::http::{IncomingRequest, Request, Response};
use spin_sdk::http_component;

/// Authenticate, run the job, render its report.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// The request, its body read within the limit: authenticated, run, audited
/// ([`seckill_spin_edge::jobs::answer`]).
fn answer(req: Request) -> Response {
    seckill_spin_edge::jobs::answer(req, None, run)
}

/// Runs the job; the Postgres connection it opened is left in `db` for the audit.
fn run(run: &JobRun, db: &mut Option<SpinPg>) -> Result<Value, ApiError> {
    let JobRun { job, budget, event } = run.clone();
    if job == Job::DeliverEvents {
        return Err(served_elsewhere(job));
    }
    let nodes = store::nodes()?;
    let db = &*db.insert(config::postgres()?);
    match job {
        // The drain's own fenced lease per shard is its one run at a time: a run that traps
        // holds only its shards, for `drain_lease_ms`, not every shard for the job's lease.
        Job::Drain => run_once(job, budget, event, &nodes, db),
        _ => {
            let budget_ms = u64::try_from(budget.as_millis()).unwrap_or(MAX_FOR_MS);
            jobs::run_one_at_a_time(&nodes, job, budget_ms, || {
                run_once(job, budget, event, &nodes, db)
            })
        }
    }
}

/// Runs `job` for `budget` (`event`: reconcile's one event).
fn run_once(
    job: Job,
    budget: Duration,
    event: Option<EventId>,
    nodes: &Nodes<SpinStore>,
    db: &SpinPg,
) -> Result<Value, ApiError> {
    match job {
        Job::Drain => {
            let opts = config::Settings::read()?.drain_options();
            http::to_value(&jobs::drain_for(nodes, db, &opts, budget)?)
        }
        Job::TimeoutRelease => {
            let settings = config::Settings::read()?;
            http::to_value(&payments::release_for(nodes, db, &settings, budget)?)
        }
        Job::Reconcile => {
            let events = event.map(|e| vec![e]);
            http::to_value(&orders::reconcile_all(nodes, db, events, true)?)
        }
        Job::DeliverEvents => Err(served_elsewhere(job)),
    }
}
