//! `POST /api/events/{event_id}/admission`: before the sale, hands the buyer an admission token
//! (first come, up to multiplier × stock), or registers them for the lottery. Asking again
//! returns the same token.

use seckill_domain::sale::{self, Admission};
use seckill_spin_edge::config;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, buyer, event_id, require_method};
use seckill_spin_edge::store;
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Parse (identity, event), apply ([`sale::issue_token`]), render (200 admitted, 202 registered).
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    match issue(&req) {
        Ok(a @ Admission::Admitted { .. }) => http::json(200, &a),
        Ok(a @ Admission::Registered) => http::json(202, &a),
        Err(e) => http::error(&e),
    }
}

fn issue(req: &Request) -> Result<Admission, ApiError> {
    require_method(req, Method::Post)?;
    let user = buyer(req)?;
    let event = event_id(req)?;
    let secret = config::get(config::ADMISSION_SECRET)?;
    Ok(sale::issue_token(
        &store::nodes()?,
        &event,
        http::shards_hint(req)?,
        &user,
        secret.as_bytes(),
    )?)
}
