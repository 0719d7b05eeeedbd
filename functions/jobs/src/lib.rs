//! The scheduled work over HTTP, for platforms without a cron trigger (Akamai Functions'
//! `spin aka crons`, Kubernetes CronJobs): behind the operators' bearer secret.
//!
//! | route | does |
//! |---|---|
//! | `POST /admin/jobs/drain` | [`orders::drain`] |
//! | `POST /admin/jobs/timeout-release` | [`orders::release_expired`] |
//! | `POST /admin/jobs/reconcile?event=<id>` | [`orders::reconcile`] with repair, one event or all |

use seckill_shared::event::EventId;
use seckill_shared::{clock, orders};
use seckill_spin::error::ApiError;
use seckill_spin::http::{operator, require_method};
use seckill_spin::{config, http};
use serde_json::Value;
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Authenticate, run the job, render its report.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin::http::serve(req, answer).await
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
            config::release_batch(),
        )?),
        "reconcile" => {
            let event = req
                .query()
                .split('&')
                .find_map(|kv| kv.strip_prefix("event="));
            let events = event
                .map(|id| EventId::parse(id).map(|e| vec![e]))
                .transpose()?;
            http::to_value(&orders::reconcile_all(&nodes, &db, events, true)?)
        }
        other => Err(ApiError::not_found(format!("no job `{other}`"))),
    }
}
