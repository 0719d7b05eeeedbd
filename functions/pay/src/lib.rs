//! `POST /api/events/{event_id}/orders/{order_id}/pay`: the buyer's payment lands. A
//! compare-and-set from `pending_payment` before the deadline; an expired order gets 409 and
//! nothing is sold twice ([`orders::pay`]).

use seckill_domain::clock;
use seckill_domain::ids::OrderId;
use seckill_domain::orders::{self, Paid};
use seckill_spin_edge::config;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, buyer, event_id, path_param, require_method};
use seckill_spin_edge::store;
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Parse, apply, render.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    http::respond(200, pay(&req))
}

fn pay(req: &Request) -> Result<Paid, ApiError> {
    require_method(req, Method::Post)?;
    let user = buyer(req)?;
    let event = event_id(req)?;
    let order = OrderId::parse(path_param(req, "order_id")?)?;
    Ok(orders::pay(
        &store::nodes()?,
        &config::postgres()?,
        &event,
        &user,
        &order,
        clock::now_ms(),
    )?)
}
