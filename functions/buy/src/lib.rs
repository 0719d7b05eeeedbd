//! `POST /api/events/{event_id}/buy` with `{"purchase_token": "..."}`: the purchase. One
//! EVALSHA at the buyer's home shard does everything (see `shared/lua/buy.lua`; when that shard
//! is empty, the tail of [`sale::buy`], three, at most [`sale::MAX_BUY_ROUND_TRIPS`]); 202
//! means the unit is yours and the order is queued for Postgres.

use seckill_domain::clock;
use seckill_domain::event::EventId;
use seckill_domain::nodes::Nodes;
use seckill_domain::sale::{self, Accepted, Emptied};
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, buyer, event_id, json_body, require_method};
use seckill_spin_edge::store::{self, SpinStore};
use serde::Deserialize;
use spin_sdk::http::{IncomingRequest, Method, Request, ResponseOutparam};
use spin_sdk::http_component;

/// The request body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    /// From precheck; used up by this call.
    purchase_token: String,
}

/// Parse, apply ([`sale::buy`]), render 202; then, if this buy took a shard's last unit, tell
/// the other shards ([`sale::tell_emptied`]), after the buyer has their answer.
#[http_component]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    let mut emptied = None;
    let response = http::serve(req, |req| match buy(&req) {
        Ok((accepted, told)) => {
            emptied = told;
            http::respond(202, Ok(accepted))
        }
        Err(e) => http::error(&e),
    })
    .await;
    http::send(out, response).await;
    if let Some((nodes, event, emptied)) = emptied {
        sale::tell_emptied(&nodes, &event, emptied);
    }
}

/// The buy, and what the buyer's answer leaves to do: the shard it emptied, if any.
type Told = Option<(Nodes<SpinStore>, EventId, Emptied)>;

fn buy(req: &Request) -> Result<(Accepted, Told), ApiError> {
    require_method(req, Method::Post)?;
    let user = buyer(req)?;
    let event = event_id(req)?;
    let body: Body = json_body(req)?;
    let shards = http::shards_hint(req)?;
    let nodes = store::nodes()?;
    let bought = sale::buy(
        &nodes,
        &event,
        shards,
        &user,
        &body.purchase_token,
        clock::now_ms(),
    )?;
    let told = bought.emptied.map(|emptied| (nodes, event, emptied));
    Ok((bought.accepted, told))
}
