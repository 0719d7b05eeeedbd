//! `POST /api/events/{event_id}/buy` with `{"purchase_token": "..."}`: the purchase. One
//! EVALSHA at the buyer's home shard does everything (see `crates/domain/lua/buy.lua`; when that shard
//! is empty, the tail of [`sale::buy`], three, at most [`sale::MAX_BUY_ROUND_TRIPS`]); 202
//! means the unit is yours and the order is queued for Postgres.

use seckill_domain::clock;
use seckill_domain::sale::{self, Accepted};
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
    /// From precheck; used up by this call.
    purchase_token: String,
}

/// Parse, apply ([`sale::buy`]), render 202.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    http::respond(202, buy(&req))
}

fn buy(req: &Request) -> Result<Accepted, ApiError> {
    require_method(req, Method::Post)?;
    let user = buyer(req)?;
    let event = event_id(req)?;
    let body: Body = json_body(req)?;
    let shards = http::shards_hint(req)?;
    let bought = sale::buy(
        &store::nodes()?,
        &event,
        shards,
        &user,
        &body.purchase_token,
        clock::now_ms(),
    )?;
    Ok(bought.accepted)
}
