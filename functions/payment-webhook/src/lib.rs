//! `POST /api/payments/webhook`: the payment provider's confirmations, signed as Stripe signs
//! (`Stripe-Signature`, [`provider::verify`]) under one of the `payment_webhook_secrets`, in
//! bodies up to [`http::PROVIDER_EVENT_MAX_BYTES`]. A verified `payment_intent.succeeded` of the
//! deployment's `payment_mode` pays its order, once per provider event ([`orders::confirm`]);
//! every verified event is answered 200, whatever it says, so the provider stops redelivering
//! it, and anything unverified is a 400 that changes nothing.

use seckill_domain::orders::{self, Confirmation};
use seckill_domain::{clock, provider};
use seckill_spin_edge::config::{self, Settings};
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, require_method};
use seckill_spin_edge::store;
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Verify, parse, apply, render.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve_up_to(http::PROVIDER_EVENT_MAX_BYTES, req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    http::respond(200, confirm(&req))
}

fn confirm(req: &Request) -> Result<Confirmation, ApiError> {
    require_method(req, Method::Post)?;
    let now_ms = clock::now_ms();
    let signature = req
        .header(provider::SIGNATURE_HEADER)
        .and_then(|v| v.as_str())
        .unwrap_or("");
    let secrets = config::get(config::PAYMENT_WEBHOOK_SECRETS)?;
    provider::verify(
        signature,
        req.body(),
        &provider::secrets(&secrets)?,
        now_ms / 1000,
    )?;
    let notice = provider::parse(req.body());
    Ok(orders::confirm(
        &store::nodes()?,
        &config::postgres()?,
        &notice,
        Settings::read()?.payment_mode,
        now_ms,
    )?)
}
