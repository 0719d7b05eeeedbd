//! `GET /api/events/{event_id}/orders/me`: the buyer's result, from Redis only (never Postgres),
//! cheap enough for everyone in the queue to poll every 1–3 s.

use seckill_shared::sale::{self, PollResult};
use seckill_spin::error::ApiError;
use seckill_spin::http::{self, buyer, event_id, require_method};
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Parse, apply ([`sale::poll`]), render.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    http::respond(200, poll(&req))
}

fn poll(req: &Request) -> Result<PollResult, ApiError> {
    require_method(req, Method::Get)?;
    let user = buyer(req)?;
    let event = event_id(req)?;
    Ok(sale::poll(&http::redis_for(&event)?, &event, &user)?)
}
