//! `POST /api/events/{event_id}/orders/{order_id}/pay`: the buyer starts paying. Records the
//! payment (amount, currency, deadline), opens its checkout session at the provider with the
//! order's own amount, and answers the session's page; never marks anything paid: the
//! provider's signed webhook does ([`orders::start_payment`], `functions/payment-webhook`).
//! `?locale=` (the storefront's language, `en` or `zh-CN`) is the language of the provider's
//! page; without it the provider follows the buyer's browser.

use seckill_domain::checkout::CheckoutLocale;
use seckill_domain::clock;
use seckill_domain::ids::OrderId;
use seckill_domain::orders::{self, Checkout, PayRequest, Payment};
use seckill_spin_edge::config;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, buyer, event_id, path_param, query_param, require_method};
use seckill_spin_edge::payments::ProviderClient;
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
    let locale = query_param(req, "locale")
        .map(CheckoutLocale::parse)
        .transpose()?
        .unwrap_or_default();
    let pay = PayRequest {
        event: &event,
        user: &user,
        order_id: &order,
        now_ms: clock::now_ms(),
    };
    let provider = ProviderClient::configured()?;
    // The buyer comes back to the storefront of the event, which polls the order.
    let shop = format!("{}/shop/{}", http::origin(req), event.as_str());
    let (success_url, cancel_url) = (format!("{shop}?checkout=done"), shop.clone());
    let checkout = provider.as_ref().map(|api| Checkout {
        api,
        success_url: &success_url,
        cancel_url: &cancel_url,
        locale,
    });
    Ok(orders::start_payment(
        &config::postgres()?,
        pay,
        checkout.as_ref(),
    )?)
}
