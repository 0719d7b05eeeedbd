//! The scheduled work over HTTP, for platforms without a cron trigger (Akamai Functions'
//! `spin aka crons`, Kubernetes CronJobs): behind the operators' bearer secret.
//!
//! | route | does |
//! |---|---|
//! | `POST /admin/jobs/drain` | [`orders::drain`] |
//! | `POST /admin/jobs/timeout-release` | [`orders::release_expired`] |
//! | `POST /admin/jobs/reconcile?event=<id>` | [`orders::reconcile`] with repair, one event or all |

use seckill_shared::event::EventId;
use seckill_shared::http::{operator, require_method};
use seckill_shared::{ApiError, clock, config, http, orders};
use serde_json::{Value, json};
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Authenticate, run the job, render its report.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_shared::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    http::respond(200, run(&req))
}

fn run(req: &Request) -> Result<Value, ApiError> {
    operator(req)?;
    require_method(req, Method::Post)?;
    let job = http::path_param(req, "job")?;
    if !["drain", "timeout-release", "reconcile"].contains(&job) {
        return Err(ApiError::not_found(format!("no job `{job}`")));
    }
    let (nodes, db) = (http::redis_nodes()?, config::postgres()?);
    match job {
        "drain" => http::to_value(&orders::drain(
            &nodes,
            &db,
            &config::drain_options(),
            clock::now_ms(),
        )?),
        "timeout-release" => http::to_value(&orders::release_expired(
            &nodes,
            &db,
            clock::now_ms(),
            1_000,
        )?),
        "reconcile" => {
            let event = req
                .query()
                .split('&')
                .find_map(|kv| kv.strip_prefix("event="));
            let events = match event {
                Some(id) => vec![EventId::parse(id)?],
                None => orders::all_events(&nodes)?,
            };
            let books = events
                .iter()
                .map(|e| orders::reconcile(nodes.for_event(e)?, &db, e, true))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(json!({ "events": books }))
        }
        other => Err(ApiError::not_found(format!("no job `{other}`"))),
    }
}
