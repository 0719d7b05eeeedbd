//! `GET /api/health`: 200 when Redis and Postgres both answer, 503 otherwise, with the detail.

use seckill_shared::health;
use seckill_shared::http::{error, json, require_method};
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Parse (only GET), apply (probe both dependencies), render.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_shared::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    if let Err(e) = require_method(&req, Method::Get) {
        return error(&e);
    }
    let report = health::check();
    json(if report.ok { 200 } else { 503 }, &report)
}
