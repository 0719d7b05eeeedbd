//! The jobs route's HTTP face (`/admin/jobs/:job`), shared by the `jobs` component and by
//! `deliver-events` (which serves its own job, being the one component allowed to reach any
//! `https` host): who may run a job — a scheduler's bearer secret (the `scheduler` role, which
//! runs the jobs and nothing else) or an operator's (a viewer's is `403 forbidden`: a job
//! writes), or `?key=` with the `job_key` secret for a scheduler that can send neither a header
//! nor a body (Akamai's calls a path and query with GET) — its query parameters, and its audit
//! record. The jobs are idempotent, so GET runs them as POST does.
//!
//! Every job checks both query parameters, whichever it uses: a malformed `for_ms` is
//! `400 bad_query` and a malformed `event` `400 bad_event_id` on any job (api/openapi.yaml gives
//! both one schema for the route), before any database is opened.

use std::time::Duration;

use seckill_domain::error::ErrorCode;
use seckill_domain::event::EventId;
use seckill_domain::jobs::{Job, MAX_FOR_MS};
use seckill_domain::{audit, auth, clock};
use serde_json::Value;
use spin_sdk::http::{Method, Request, Response};

use crate::error::ApiError;
use crate::postgres::SpinPg;
use crate::{config, http};

/// A job run, as its request asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRun {
    /// The job (`:job`).
    pub job: Job,
    /// `?for_ms=`: how long to keep running it (zero, the default: once).
    pub budget: Duration,
    /// `?event=`: reconcile's one event (none: every registered event).
    pub event: Option<EventId>,
}

/// Authenticates, parses the run of `job` (`None`: the one the route's `:job` names), has `run`
/// do it (leaving the Postgres connection it opened in its second argument, for the audit),
/// audits and renders it.
pub fn answer(
    req: Request,
    job: Option<Job>,
    run: impl FnOnce(&JobRun, &mut Option<SpinPg>) -> Result<Value, ApiError>,
) -> Response {
    let who = match authorize(&req) {
        Ok(who) => who,
        Err(e) => return http::error(&e),
    };
    let mut db = None;
    let ran = parse(&req, job).and_then(|job| run(&job, &mut db));
    audit_run(&req, &who, &ran, db);
    http::respond(200, ran)
}

/// The job `:job` names, for what another component serves: `404 not_found`, as for no job.
pub fn served_elsewhere(job: Job) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("{} is not run by this component", job.name()),
    )
}

/// The method, the job and both query parameters, in the order the document gives.
fn parse(req: &Request, job: Option<Job>) -> Result<JobRun, ApiError> {
    if !matches!(req.method(), Method::Post | Method::Get) {
        return Err(ApiError::method_not_allowed("GET, POST"));
    }
    let job = match job {
        Some(job) => job,
        None => Job::parse(http::path_param(req, "job")?)?,
    };
    Ok(JobRun {
        job,
        budget: budget(req)?,
        event: event(req)?,
    })
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
