//! The scheduled work over HTTP, for platforms without a cron trigger (Akamai Functions'
//! `spin aka crons`, Kubernetes CronJobs): behind a scheduler's bearer secret (the `scheduler`
//! role, which runs the jobs and nothing else) or an operator's (a viewer's is
//! `403 forbidden`: a job writes), or `?key=` with the `job_key` secret for a scheduler that can
//! send neither a header nor a body (Akamai's calls a path and query with GET). The jobs are
//! idempotent, so GET runs them as POST does. Every run a person starts is in the audit, and a
//! scheduler credential's first run; the others are counted in the host's metrics.
//!
//! | route | does |
//! |---|---|
//! | `POST /admin/jobs/drain` | [`jobs::drain_for`] |
//! | `POST /admin/jobs/timeout-release` | [`payments::release_for`] |
//! | `POST /admin/jobs/reconcile?event=<id>` | [`orders::reconcile`] with repair, one event or all |
//!
//! `drain` and `timeout-release` take `?for_ms=N` (at most [`MAX_FOR_MS`]): the job runs again
//! and again for N ms ([`jobs`]), so a scheduler that fires once a minute (a
//! Kubernetes CronJob) or every 5 minutes (`spin aka cron`) still keeps orders flowing.
//!
//! Every job checks both query parameters, whichever it uses: a malformed `for_ms` is
//! `400 bad_query` and a malformed `event` `400 bad_event_id` on any job (api/openapi.yaml gives
//! both one schema for the route), before any database is opened.

use std::time::Duration;

use seckill_domain::error::ErrorCode;
use seckill_domain::event::EventId;
use seckill_domain::jobs::{self, Job, MAX_FOR_MS};
use seckill_domain::nodes::Nodes;
use seckill_domain::{audit, auth, clock, orders};
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::postgres::SpinPg;
use seckill_spin_edge::store::{self, SpinStore};
use seckill_spin_edge::{config, http, payments};
use serde_json::Value;
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Authenticate, run the job, render its report.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// The request, its body read within the limit: who runs it, the run, its audit record.
fn answer(req: Request) -> Response {
    let who = match authorize(&req) {
        Ok(who) => who,
        Err(e) => return http::error(&e),
    };
    let mut db = None;
    let ran = run(&req, &mut db);
    audit_run(&req, &who, &ran, db);
    http::respond(200, ran)
}

/// Records the run as the audit keeps job runs ([`audit::record_job_run`]: every run a person
/// starts, a scheduler credential's first), on the run's own connection when it opened one. A
/// failure to record is logged, not the caller's: the job has run.
fn audit_run(
    req: &Request,
    who: &auth::Operator,
    ran: &Result<Value, ApiError>,
    db: Option<SpinPg>,
) {
    let (status, answer) = match ran {
        Ok(report) => (200, Some(report.clone())),
        Err(e) => (e.status, serde_json::from_str(&e.to_json()).ok()),
    };
    let entry = audit::Entry::job_run(
        who,
        (req.method().to_string().as_str(), req.path()),
        answer,
        status,
        clock::now_ms(),
    );
    let recorded = db
        .map_or_else(config::postgres, Ok)
        .map_err(|e| e.reason())
        .and_then(|db| audit::record_job_run(&db, &entry).map_err(|e| e.reason()));
    if let Err(e) = recorded {
        eprintln!(
            "jobs: the run of {} by {} was not audited: {e}",
            req.path(),
            who.name
        );
    }
}

/// `?for_ms=`: how long to keep running the job (0, the default: once).
fn budget(req: &Request) -> Result<Duration, ApiError> {
    let Some(raw) = http::query_param(req, "for_ms") else {
        return Ok(Duration::ZERO);
    };
    match raw.parse::<u64>() {
        Ok(ms) if ms <= MAX_FOR_MS => Ok(Duration::from_millis(ms)),
        _ => Err(ApiError::new(
            ErrorCode::BadQuery,
            format!("for_ms must be a whole number of milliseconds from 0 to {MAX_FOR_MS}"),
        )),
    }
}

/// `?event=`: the one event to reconcile (none: every registered event). A malformed id is
/// `400 bad_event_id`.
fn event(req: &Request) -> Result<Option<EventId>, ApiError> {
    Ok(http::query_param(req, "event")
        .map(EventId::parse)
        .transpose()?)
}

/// The name a run by the job key (`?key=`) is audited under, as a scheduler's.
const JOB_KEY_SCHEDULER: &str = "job_key";

/// An operator or a scheduler (bearer secret), or a scheduler holding the job key (`?key=`;
/// only when `job_key` is set); a viewer is `403 forbidden`.
fn authorize(req: &Request) -> Result<auth::Operator, ApiError> {
    match http::query_param(req, "key") {
        Some(key) => {
            auth::check_job_key(key, &config::get_or(config::JOB_KEY, String::new()))?;
            Ok(auth::Operator {
                name: JOB_KEY_SCHEDULER.to_owned(),
                role: auth::Role::Scheduler,
            })
        }
        None => {
            let who = http::credential(req)?;
            who.may_run_jobs()?;
            Ok(who)
        }
    }
}

/// Runs the job `req` names; the Postgres connection it opened is left in `db` for the audit.
fn run(req: &Request, db: &mut Option<SpinPg>) -> Result<Value, ApiError> {
    if !matches!(req.method(), Method::Post | Method::Get) {
        return Err(ApiError::method_not_allowed("GET, POST"));
    }
    let job = Job::parse(http::path_param(req, "job")?)?;
    // Every job checks both parameters (the document gives each its schema), so a malformed
    // one is refused whichever job it is sent to; each job uses only its own: `for_ms` the
    // drain and the release, `event` reconcile.
    let (budget, event) = (budget(req)?, event(req)?);
    let nodes = store::nodes()?;
    let db = &*db.insert(config::postgres()?);
    match job {
        // The drain's own fenced lease per shard is its one run at a time: a run that traps
        // holds only its shards, for `drain_lease_ms`, not every shard for the job's lease.
        Job::Drain => run_once(job, budget, event, &nodes, db),
        Job::TimeoutRelease | Job::Reconcile => {
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
    }
}
