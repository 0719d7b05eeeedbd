//! The HTTP edge every function shares: reading identity, ids and bodies from a Spin request,
//! and rendering results and [`ApiError`]s the same way everywhere.

use serde::Serialize;
use serde::de::DeserializeOwned;
use spin_sdk::http::{
    IncomingRequest, Method, OutgoingResponse, Request, Response, ResponseOutparam,
};

use seckill_domain::error::ErrorCode;
use seckill_domain::event::EventId;
use seckill_domain::{auth, clock};

use crate::config;
use crate::error::ApiError;

/// Bodies larger than this are refused with 413 before parsing.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Runs a function on its request, read with the body bounded by [`MAX_BODY_BYTES`]: a larger
/// body is refused (413) as soon as it passes the limit, never held whole in memory (Spin sets
/// no limit of its own). Every HTTP function starts here.
pub async fn serve(req: IncomingRequest, f: impl FnOnce(Request) -> Response) -> Response {
    match read_request(req).await {
        Ok(req) => f(req),
        Err(e) => error(&e),
    }
}

/// Sends `response` and finishes its body: the client has the whole answer, while the guest
/// may go on working. Spin runs a guest to its end after the response
/// (`crates/trigger-http/src/wasi.rs` spawns the handler in a task of its own), so work done
/// after this costs the client nothing.
pub async fn send(out: ResponseOutparam, mut response: Response) {
    let body = std::mem::take(response.body_mut());
    match OutgoingResponse::try_from(response) {
        Ok(head) => {
            if let Err(e) = out.set_with_body(head, body).await {
                eprintln!("sending the response: {e}");
            }
        }
        Err(e) => eprintln!("building the response: {e}"),
    }
}

/// The request with its whole body, at most [`MAX_BODY_BYTES`] of it.
async fn read_request(req: IncomingRequest) -> Result<Request, ApiError> {
    use futures::StreamExt;
    let mut builder = Request::builder();
    builder
        .method(req.method())
        .uri(req.uri())
        .headers(req.headers());
    let mut body = Vec::new();
    let mut chunks = req.into_body_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::new(
                ErrorCode::UnreadableBody,
                format!("the body could not be read: {e}"),
            )
        })?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(body_too_large());
        }
        body.extend(chunk);
    }
    Ok(builder.body(body).build())
}

fn body_too_large() -> ApiError {
    ApiError::new(
        ErrorCode::BodyTooLarge,
        format!("bodies are limited to {MAX_BODY_BYTES} bytes"),
    )
}

/// A JSON response with `status`.
pub fn json<T: Serialize>(status: u16, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .header("cache-control", "no-store")
            .body(bytes)
            .build(),
        Err(e) => error(&ApiError::internal(e)),
    }
}

/// The JSON rendering of an error, with the header its status calls for (`Retry-After`,
/// `Allow`, and `WWW-Authenticate: Bearer` on every 401, as RFC 6750 asks).
pub fn error(e: &ApiError) -> Response {
    // An error's detail (a dependency's own words) is logged here, never sent to the client.
    if let Some(detail) = &e.detail {
        eprintln!("{} {}: {detail}", e.status, e.code);
    }
    let mut resp = Response::builder();
    resp.status(e.status)
        .header("content-type", "application/json")
        .header("cache-control", "no-store");
    if let Some((name, value)) = &e.header {
        resp.header(*name, value.as_str());
    }
    if e.status == 401 {
        resp.header("www-authenticate", "Bearer");
    }
    resp.body(e.to_json()).build()
}

/// A report as a JSON value (for functions that pick the shape per route).
pub fn to_value<T: Serialize>(v: &T) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(v).map_err(ApiError::internal)
}

/// Renders the outcome of a function: `Ok` as JSON with `status`, `Err` as its error.
pub fn respond<T: Serialize>(status: u16, result: Result<T, ApiError>) -> Response {
    match result {
        Ok(body) => json(status, &body),
        Err(e) => error(&e),
    }
}

/// Refuses any method but `allowed`.
pub fn require_method(req: &Request, allowed: Method) -> Result<(), ApiError> {
    if *req.method() == allowed {
        Ok(())
    } else {
        Err(ApiError::method_not_allowed(&allowed.to_string()))
    }
}

/// A `:name` segment of the route. Spin passes it as `spin-path-match-<name>` with every `_`
/// turned into `-` (`crates/trigger-http/src/headers.rs`): `:event_id` is
/// `spin-path-match-event-id`.
pub fn path_param<'a>(req: &'a Request, name: &str) -> Result<&'a str, ApiError> {
    req.header(&format!("spin-path-match-{}", name.replace('_', "-")))
        .and_then(|v| v.as_str())
        .ok_or_else(|| ApiError::not_found(format!("route has no :{name}")))
}

/// The `:event_id` of the route, validated.
pub fn event_id(req: &Request) -> Result<EventId, ApiError> {
    Ok(EventId::parse(path_param(req, "event_id")?)?)
}

/// The first `name=` pair of the query.
pub fn query_param<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.query()
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// `?shards=`: the caller's count of the event's shards (the storefront has it from the event's
/// page), which finds the buyer's home shard without a read. Absent, the default count of a new
/// event; stale or wrong, the shard it reached names the true count and the request goes home
/// (one more round trip, same answer). 1–256, else `400 bad_query`.
pub fn shards_hint(req: &Request) -> Result<u32, ApiError> {
    let Some(raw) = query_param(req, "shards") else {
        return Ok(seckill_domain::event::DEFAULT_SHARDS);
    };
    match raw.parse::<u32>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err(ApiError::new(
            ErrorCode::BadQuery,
            "shards must be a whole number from 1 to 256",
        )),
    }
}

/// The bearer token of the `Authorization` header (the scheme name is case-insensitive).
pub fn bearer(req: &Request) -> Option<&str> {
    let value = req.header("authorization")?.as_str()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The buyer: whoever the shop's signed JWT says (`sub`).
pub fn buyer(req: &Request) -> Result<String, ApiError> {
    let token = bearer(req)
        .ok_or_else(|| ApiError::new(ErrorCode::Unauthorized, "bearer token required"))?;
    let secret = config::get(config::JWT_SECRET)?;
    Ok(auth::verify_jwt(token, secret.as_bytes(), clock::now_ms() / 1000)?.sub)
}

/// The operator whose secret is the bearer token, whatever their role: enough to read. A
/// malformed `operators` variable is a configuration error (500).
pub fn operator(req: &Request) -> Result<auth::Operator, ApiError> {
    let operators = auth::Operators::parse(&config::get(config::OPERATORS)?)?;
    Ok(operators.authenticate(bearer(req))?)
}

/// The operator behind the bearer token, allowed to write: a viewer is `403 forbidden`.
pub fn writer(req: &Request) -> Result<auth::Operator, ApiError> {
    let who = operator(req)?;
    who.may_write()?;
    Ok(who)
}

/// The client's IP address (Spin's `spin-client-addr`, without the port).
pub fn client_addr(req: &Request) -> String {
    let addr = req
        .header("spin-client-addr")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    match addr.rsplit_once(':') {
        Some((ip, port)) if port.bytes().all(|b| b.is_ascii_digit()) => {
            ip.trim_start_matches('[').trim_end_matches(']').to_owned()
        }
        _ => addr.to_owned(),
    }
}

/// Parses a JSON body: 400 `malformed_json` when not the expected shape ([`serve`] already
/// refused a body over [`MAX_BODY_BYTES`]).
pub fn json_body<T: DeserializeOwned>(req: &Request) -> Result<T, ApiError> {
    serde_json::from_slice(req.body())
        .map_err(|e| ApiError::new(ErrorCode::MalformedJson, e.to_string()))
}
