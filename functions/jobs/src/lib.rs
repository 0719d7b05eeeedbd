//! The scheduled work over HTTP, for platforms without a cron trigger (Akamai Functions'
//! `spin aka crons`, Kubernetes CronJobs): behind the operators' bearer secret, or `?key=` with
//! the `job_key` secret for a scheduler that can send neither a header nor a body (Akamai's
//! calls a path and query with GET). The jobs are idempotent, so GET runs them as POST does.
//!
//! | route | does |
//! |---|---|
//! | `POST /admin/jobs/drain` | [`orders::drain`] |
//! | `POST /admin/jobs/timeout-release` | [`orders::release_expired`] |
//! | `POST /admin/jobs/reconcile?event=<id>` | [`orders::reconcile`] with repair, one event or all |
//!
//! `drain` and `timeout-release` take `?for_ms=N` (at most [`MAX_FOR_MS`]): the job runs again
//! and again for N ms ([`orders::repeat_for`]), so a scheduler that fires once a minute (a
//! Kubernetes CronJob) or every 5 minutes (`spin aka cron`) still keeps orders flowing.

use std::time::Duration;

use seckill_domain::event::EventId;
use seckill_domain::{auth, clock, orders};
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::operator;
use seckill_spin_edge::{config, http};
use serde_json::Value;
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Authenticate, run the job, render its report.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    http::respond(200, run(&req))
}

/// The longest `for_ms` a job route accepts: a minute, the finest period of a Kubernetes
/// CronJob, and well under the request time any platform allows a function.
pub const MAX_FOR_MS: u64 = 60_000;
/// Pause after a drain that found nothing: a new order waits at most this long for the next.
const DRAIN_PAUSE: Duration = Duration::from_millis(200);
/// Pause after a release run that found nothing: deadlines are judged to the second.
const RELEASE_PAUSE: Duration = Duration::from_millis(1_000);

/// The first `name=` pair of the query.
fn query_param<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.query()
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// `?for_ms=`: how long to keep running the job (0, the default: once).
fn budget(req: &Request) -> Result<Duration, ApiError> {
    let Some(raw) = query_param(req, "for_ms") else {
        return Ok(Duration::ZERO);
    };
    match raw.parse::<u64>() {
        Ok(ms) if ms <= MAX_FOR_MS => Ok(Duration::from_millis(ms)),
        _ => Err(ApiError::bad_request(
            "bad_query",
            format!("for_ms must be a whole number of milliseconds from 0 to {MAX_FOR_MS}"),
        )),
    }
}

/// An operator (bearer admin token), or a scheduler holding the job key (`?key=`; only when
/// `job_key` is set).
fn authorize(req: &Request) -> Result<(), ApiError> {
    match query_param(req, "key") {
        Some(key) => Ok(auth::check_job_key(
            key,
            &config::get_or("job_key", String::new()),
        )?),
        None => operator(req),
    }
}

fn run(req: &Request) -> Result<Value, ApiError> {
    authorize(req)?;
    if !matches!(req.method(), Method::Post | Method::Get) {
        return Err(ApiError::method_not_allowed("GET, POST"));
    }
    let job = http::path_param(req, "job")?;
    if !["drain", "timeout-release", "reconcile"].contains(&job) {
        return Err(ApiError::not_found(format!("no job `{job}`")));
    }
    let budget = if job == "reconcile" {
        Duration::ZERO
    } else {
        budget(req)?
    };
    let (nodes, db) = (http::redis_nodes()?, config::postgres()?);
    match job {
        "drain" => {
            let opts = config::drain_options();
            http::to_value(&orders::repeat_for(budget, DRAIN_PAUSE, |until| {
                let opts = orders::DrainOptions {
                    until: Some(until).filter(|_| !budget.is_zero()),
                    ..opts.clone()
                };
                orders::drain(&nodes, &db, &opts, clock::now_ms())
            })?)
        }
        "timeout-release" => http::to_value(&orders::repeat_for(budget, RELEASE_PAUSE, |_| {
            orders::release_expired(&nodes, &db, clock::now_ms(), config::release_batch())
        })?),
        "reconcile" => {
            let event = query_param(req, "event");
            let events = event
                .map(|id| EventId::parse(id).map(|e| vec![e]))
                .transpose()?;
            http::to_value(&orders::reconcile_all(&nodes, &db, events, true)?)
        }
        other => Err(ApiError::not_found(format!("no job `{other}`"))),
    }
}
