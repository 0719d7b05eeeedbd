//! `POST /api/events/{event_id}/orders/{order_id}/pay`: the buyer starts paying. Records the
//! payment (amount, currency, deadline) and answers what to hand the payment provider; never
//! marks anything paid: the provider's signed webhook does ([`orders::start_payment`],
//! `functions/payment-webhook`).

use seckill_domain::clock;
use seckill_domain::ids::OrderId;
use seckill_domain::orders::{self, Payment};
use seckill_spin_edge::config::{self, Settings};
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, buyer, event_id, path_param, require_method};
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

fn pay(req: &Request) -> Result<Payment, ApiError> {
    require_method(req, Method::Post)?;
    let user = buyer(req)?;
    let event = event_id(req)?;
    let order = OrderId::parse(path_param(req, "order_id")?)?;
    let settings = Settings::read()?;
    Ok(orders::start_payment(
        &config::postgres()?,
        &event,
        &user,
        &order,
        settings.payment_checkout_url.as_deref(),
        clock::now_ms(),
    )?)
}
