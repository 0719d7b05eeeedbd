//! `GET /api/time`: the server's clock, so that every storefront counts down to the same instant
//! (the countdown must follow server time, never the client's clock, which anyone can change).

use seckill_domain::clock;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{require_method, respond};
use serde::Serialize;
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// The response body.
#[derive(Serialize)]
struct ServerTime {
    /// Milliseconds since the Unix epoch.
    now_ms: u64,
}

/// Parse (only GET is allowed), apply (read the clock), render.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    respond(200, server_time(&req))
}

fn server_time(req: &Request) -> Result<ServerTime, ApiError> {
    require_method(req, Method::Get)?;
    Ok(ServerTime {
        now_ms: clock::now_ms(),
    })
}
