//! The admission gate, before the sale:
//!
//! - `POST /api/events/{event_id}/admission/challenge`: a proof-of-work challenge at the
//!   event's difficulty now ([`sale::admission_challenge`]).
//! - `POST /api/events/{event_id}/admission` with the solved challenge: an admission token
//!   (first come, up to multiplier × stock), or a lottery registration ([`sale::issue_token`]).
//!   Asking again returns the same token.

use seckill_domain::sale::{self, Admission, Solution};
use seckill_domain::{clock, net};
use seckill_spin_edge::config;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, buyer, event_id, require_method};
use seckill_spin_edge::store;
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// Parse (identity, event, solution), apply, render (200 admitted or a challenge, 202
/// registered).
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    seckill_spin_edge::http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    let challenge = req
        .path()
        .trim_end_matches('/')
        .ends_with("/admission/challenge");
    if challenge {
        return http::respond(200, issue_challenge(&req));
    }
    match issue(&req) {
        Ok(a @ Admission::Admitted { .. }) => http::json(200, &a),
        Ok(a @ Admission::Registered) => http::json(202, &a),
        Err(e) => http::error(&e),
    }
}

fn issue_challenge(req: &Request) -> Result<seckill_domain::pow::Challenge, ApiError> {
    require_method(req, Method::Post)?;
    let user = buyer(req)?;
    let event = event_id(req)?;
    let secret = config::get(config::ADMISSION_SECRET)?;
    Ok(sale::admission_challenge(
        &store::nodes()?,
        &event,
        http::shards_hint(req)?,
        &user,
        secret.as_bytes(),
        clock::now_ms(),
    )?)
}

fn issue(req: &Request) -> Result<Admission, ApiError> {
    require_method(req, Method::Post)?;
    let user = buyer(req)?;
    let event = event_id(req)?;
    // No body (or `{}`): no proof of work, which only an event of difficulty 0 admits.
    let solution: Option<Solution> =
        if req.body().iter().all(u8::is_ascii_whitespace) || req.body() == b"{}" {
            None
        } else {
            Some(http::json_body(req)?)
        };
    let secret = config::get(config::ADMISSION_SECRET)?;
    let settings = config::Settings::read()?;
    let client = http::client_ip(req, &settings)
        .map(|ip| net::bucket_key(ip, settings.admission_ipv6_prefix));
    Ok(sale::issue_token(
        &store::nodes()?,
        &sale::AdmissionRequest {
            event: &event,
            shards: http::shards_hint(req)?,
            user: &user,
            client: client.as_deref(),
            solution: solution.as_ref(),
        },
        secret.as_bytes(),
        clock::now_ms(),
    )?)
}
