//! Health of Redis and Postgres, pinged through the Spin interfaces: 200 when both answer, 503
//! otherwise. `GET /api/health` is public and says only `ok` / `degraded` per dependency;
//! `GET /admin/health` (any operator's secret, a viewer's too) adds latencies and the errors.

use seckill_spin_edge::health;
use seckill_spin_edge::http::{error, json, operator, require_method};
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Serves both routes.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// Parse (GET; the admin route needs the secret), apply (probe both), render.
fn answer(req: Request) -> Response {
    let detailed = req.path().starts_with("/admin/");
    let checked = if detailed {
        operator(&req).and_then(|_| require_method(&req, Method::Get))
    } else {
        require_method(&req, Method::Get)
    };
    if let Err(e) = checked {
        return error(&e);
    }
    if detailed {
        let report = health::check();
        json(if report.ok { 200 } else { 503 }, &report)
    } else {
        let summary = health::summary();
        json(if summary.ok { 200 } else { 503 }, &summary)
    }
}
