//! `POST /api/events/{event_id}/precheck` with `{"admission_token": "..."}`: checks admission,
//! the sale window, deny lists, one-per-user and the user's rate limit, and returns a one-time
//! purchase token for buy.

use seckill_domain::clock;
use seckill_domain::sale::{self, PurchaseToken};
use seckill_spin_edge::config;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, buyer, event_id, json_body, require_method};
use seckill_spin_edge::store;
use serde::Deserialize;
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// The request body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    /// From issue-token.
    admission_token: String,
}

/// Parse, apply ([`sale::precheck`]), render.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    http::respond(200, precheck(&req))
}

fn precheck(req: &Request) -> Result<PurchaseToken, ApiError> {
    require_method(req, Method::Post)?;
    let user = buyer(req)?;
    let event = event_id(req)?;
    let body: Body = json_body(req)?;
    let secret = config::get(config::ADMISSION_SECRET)?;
    let settings = config::Settings::read()?;
    Ok(sale::precheck(
        &store::nodes()?,
        &sale::PrecheckRequest {
            event: &event,
            shards: http::shards_hint(req)?,
            user: &user,
            client: http::client_ip(req, &settings),
            admission_token: &body.admission_token,
        },
        secret.as_bytes(),
        clock::now_ms(),
    )?)
}
