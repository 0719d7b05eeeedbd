//! The HTTP edge every function shares: reading identity, ids and bodies from a Spin request,
//! and rendering results and [`ApiError`]s the same way everywhere.

use std::net::{IpAddr, SocketAddr};

use serde::Serialize;
use serde::de::DeserializeOwned;
use spin_sdk::http::{
    IncomingRequest, Method, OutgoingResponse, Request, Response, ResponseOutparam,
};

use seckill_domain::error::ErrorCode;
use seckill_domain::event::{DEFAULT_SHARDS, EventId, SHARD_COUNTS};
use seckill_domain::{auth, clock, net};

use crate::config::{self, Settings};
use crate::error::ApiError;

/// Bodies larger than this are refused with 413 before parsing.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// The payment provider's events can be larger than a buyer's request (Stripe's carry the whole
/// object and its metadata): the webhook takes up to this, so that no event the provider
/// signed is ever refused for its size (the manifest's `request_body_limits` says the same to
/// the host).
pub const PROVIDER_EVENT_MAX_BYTES: usize = 256 * 1024;

/// Runs a function on its request, read with the body bounded by [`MAX_BODY_BYTES`]: a larger
/// body is refused (413) as soon as it passes the limit, never held whole in memory (Spin sets
/// no limit of its own). Every HTTP function starts here.
pub async fn serve(req: IncomingRequest, f: impl FnOnce(Request) -> Response) -> Response {
    serve_up_to(MAX_BODY_BYTES, req, f).await
}

/// [`serve`], with bodies up to `max_bytes`.
pub async fn serve_up_to(
    max_bytes: usize,
    req: IncomingRequest,
    f: impl FnOnce(Request) -> Response,
) -> Response {
    let path = req.path_with_query().unwrap_or_default();
    if let Err(e) = canonical_path(&path) {
        return error(&e);
    }
    match read_request(req, max_bytes).await {
        Ok(req) => f(req),
        Err(e) => error(&e),
    }
}

/// Refuses a path that is not in its one canonical spelling: a repeated `/`, a `.` or `..`
/// segment, an encoded `/`, `\` or `.`. The router forgives some of these (`//admin` reaches
/// the admin routes), while a rule in front (a load balancer's path match, a CDN's) reads the
/// path as written: one spelling keeps both agreeing.
pub fn canonical_path(path_and_query: &str) -> Result<(), ApiError> {
    let path = path_and_query.split('?').next().unwrap_or("");
    let segments: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    let last = segments.len().saturating_sub(1);
    let lower = path.to_ascii_lowercase();
    let odd = !path.starts_with('/')
        || segments.iter().enumerate().any(|(i, s)| {
            (s.is_empty() && i != last) || *s == "." || *s == ".." || s.contains('\\')
        })
        || ["%2f", "%5c", "%2e"].iter().any(|enc| lower.contains(enc));
    match odd {
        false => Ok(()),
        true => Err(ApiError::not_found(format!(
            "no route {path:?}: a path is written with single slashes and no dot or encoded \
             separator segments"
        ))),
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

/// The request with its whole body, at most `max_bytes` of it.
async fn read_request(req: IncomingRequest, max_bytes: usize) -> Result<Request, ApiError> {
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
        if body.len() + chunk.len() > max_bytes {
            return Err(body_too_large(max_bytes));
        }
        body.extend(chunk);
    }
    Ok(builder.body(body).build())
}

fn body_too_large(max_bytes: usize) -> ApiError {
    ApiError::new(
        ErrorCode::BodyTooLarge,
        format!("bodies are limited to {max_bytes} bytes"),
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

/// The origin the client reached us at (`scheme://host[:port]`), for links back to us: the
/// `Host` Spin's full URL names, `https` when a proxy in front says it terminated TLS
/// (`X-Forwarded-Proto`; a client that lies about it only breaks its own link).
pub fn origin(req: &Request) -> String {
    let full = req
        .header("spin-full-url")
        .and_then(|v| v.as_str())
        .unwrap_or("http://localhost/");
    let (scheme, rest) = full.split_once("://").unwrap_or(("http", full));
    let authority = rest.split('/').next().unwrap_or("localhost");
    let forwarded = req
        .header("x-forwarded-proto")
        .and_then(|v| v.as_str())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    let scheme = if forwarded { "https" } else { scheme };
    format!("{scheme}://{authority}")
}

/// The first `name=` pair of the query.
pub fn query_param<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.query()
        .split('&')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
}

/// `?limit=`: how many records a list gives, 1 to `max` (`default` when absent), else
/// `400 bad_query`.
pub fn limit_param(req: &Request, default: u32, max: u32) -> Result<u32, ApiError> {
    let Some(raw) = query_param(req, "limit") else {
        return Ok(default);
    };
    raw.parse()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::BadQuery,
                format!("limit must be a whole number from 1 to {max}"),
            )
        })
}

/// `?shards=`: the caller's count of the event's shards (the storefront has it from the event's
/// page), which finds the buyer's home shard without a read. Absent, the default count of a new
/// event; stale or wrong, the shard it reached names the true count and the request goes home
/// (one more round trip, same answer). Within [`SHARD_COUNTS`], else `400 bad_query`.
pub fn shards_hint(req: &Request) -> Result<u32, ApiError> {
    let Some(raw) = query_param(req, "shards") else {
        return Ok(DEFAULT_SHARDS);
    };
    match raw.parse::<u32>() {
        Ok(n) if SHARD_COUNTS.contains(&n) => Ok(n),
        _ => Err(ApiError::new(
            ErrorCode::BadQuery,
            format!(
                "shards must be a whole number from {} to {}",
                SHARD_COUNTS.start(),
                SHARD_COUNTS.end()
            ),
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

/// The person (a viewer or an operator) whose secret is the bearer token: enough to read; a
/// scheduler's secret is `403 forbidden`. A malformed `operators` variable is a configuration
/// error (500).
pub fn operator(req: &Request) -> Result<auth::Operator, ApiError> {
    let who = credential(req)?;
    who.may_read()?;
    Ok(who)
}

/// Whoever the bearer secret names, a scheduler included (the job routes take schedulers).
pub fn credential(req: &Request) -> Result<auth::Operator, ApiError> {
    let operators = auth::Operators::parse(&config::get(config::OPERATORS)?)?;
    Ok(operators.authenticate(bearer(req))?)
}

/// The client's address, canonical ([`seckill_domain::net`]); `None` when Spin gave no peer.
///
/// The peer Spin reports (`spin-client-addr`) is the client unless it is one of
/// [`Settings::trusted_proxies`]. Each proxy appends the address it was reached from to
/// `X-Forwarded-For`, so from a trusted peer the client is the right-most entry that is not a
/// trusted proxy: entries left of it were written by whoever it was and prove nothing. An
/// untrusted peer's header is ignored, and an entry that is not an address ends the walk at the
/// trusted proxy that wrote it. Of repeated header lines Spin's `Request` keeps the last, the
/// nearest proxy's.
pub fn client_ip(req: &Request, settings: &Settings) -> Option<IpAddr> {
    let trusted = |ip: IpAddr| settings.trusted_proxies.iter().any(|r| r.contains(ip));
    let mut client = ip_of(req.header("spin-client-addr")?.as_str()?)?;
    let forwarded = req.header("x-forwarded-for").and_then(|v| v.as_str());
    for entry in forwarded.unwrap_or_default().rsplit(',') {
        if !trusted(client) {
            break;
        }
        match ip_of(entry.trim()) {
            Some(ip) => client = ip,
            None => break,
        }
    }
    Some(client)
}

/// An address, with or without a port (`1.2.3.4`, `1.2.3.4:80`, `[2001:db8::1]:443`).
fn ip_of(text: &str) -> Option<IpAddr> {
    let ip = text
        .parse()
        .or_else(|_| text.parse::<SocketAddr>().map(|a| a.ip()))
        .ok()?;
    Some(net::canonical(ip))
}

/// Parses a JSON body: 400 `malformed_json` when not the expected shape ([`serve`] already
/// refused a body over [`MAX_BODY_BYTES`]).
pub fn json_body<T: DeserializeOwned>(req: &Request) -> Result<T, ApiError> {
    serde_json::from_slice(req.body())
        .map_err(|e| ApiError::new(ErrorCode::MalformedJson, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_path_in_its_one_spelling_is_served() {
        for ok in [
            "/",
            "/admin/events/e1",
            "/admin/events/e1/",
            "/api/time?x=//y",
            "/shop/a.b",
        ] {
            assert!(canonical_path(ok).is_ok(), "{ok}");
        }
        for odd in [
            "//admin/events/e1",
            "/admin//events",
            "/admin/./events",
            "/admin/../admin/events",
            "/admin%2fevents",
            "/admin/%2E%2E/x",
            "/admin\\events",
            "admin",
        ] {
            let e = canonical_path(odd).unwrap_err();
            assert_eq!(e.status, 404, "{odd}");
        }
    }

    /// A request from `peer` with `forwarded` as its `X-Forwarded-For`.
    fn from(peer: Option<&str>, forwarded: Option<&str>) -> Request {
        let mut b = Request::builder();
        b.method(Method::Post).uri("/api/events/e1/precheck");
        if let Some(peer) = peer {
            b.header("spin-client-addr", peer);
        }
        if let Some(forwarded) = forwarded {
            b.header("X-Forwarded-For", forwarded);
        }
        b.build()
    }

    fn client(settings: &Settings, peer: Option<&str>, forwarded: Option<&str>) -> Option<String> {
        client_ip(&from(peer, forwarded), settings).map(|ip| ip.to_string())
    }

    fn trusting(ranges: &str) -> Settings {
        Settings::parse(&format!("trusted_proxies={ranges}")).unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client_whatever_it_forwards() {
        let none = Settings::default();
        let seen = |peer, forwarded| client(&none, Some(peer), forwarded);
        assert_eq!(
            seen("203.0.113.7:51000", None).as_deref(),
            Some("203.0.113.7")
        );
        assert_eq!(
            seen("[2001:db8::7]:443", None).as_deref(),
            Some("2001:db8::7")
        );
        assert_eq!(seen("203.0.113.7", None).as_deref(), Some("203.0.113.7"));
        assert_eq!(
            seen("203.0.113.7:51000", Some("1.1.1.1, 10.0.0.1")).as_deref(),
            Some("203.0.113.7"),
            "a spoofed header changes nothing"
        );
        assert_eq!(
            client(&none, None, Some("1.1.1.1")),
            None,
            "no peer: unknown"
        );
        assert_eq!(client(&none, Some("not an address"), None), None);
    }

    #[test]
    fn an_untrusted_peer_is_the_client_even_with_proxies_configured() {
        let s = trusting("10.0.0.0/16");
        assert_eq!(
            client(&s, Some("198.51.100.4:40000"), Some("1.1.1.1, 10.0.0.9")).as_deref(),
            Some("198.51.100.4")
        );
    }

    #[test]
    fn behind_trusted_proxies_the_client_is_the_right_most_untrusted_entry() {
        let s = trusting("10.0.0.0/16 fd00::/8");
        let seen = |forwarded| client(&s, Some("10.0.3.3:8080"), forwarded);
        assert_eq!(seen(Some("198.51.100.4")).as_deref(), Some("198.51.100.4"));
        // The client put 1.1.1.1 in front: the proxies' own entries are right of it.
        assert_eq!(
            seen(Some("1.1.1.1, 198.51.100.4, 10.0.1.1,fd00::2")).as_deref(),
            Some("198.51.100.4")
        );
        assert_eq!(
            seen(Some("198.51.100.4:5555")).as_deref(),
            Some("198.51.100.4"),
            "an entry with a port"
        );
        assert_eq!(
            seen(Some("[2001:db8::9]:443")).as_deref(),
            Some("2001:db8::9")
        );
        assert_eq!(
            seen(Some("10.0.1.1, 10.0.2.2")).as_deref(),
            Some("10.0.1.1"),
            "all trusted: the farthest proxy"
        );
        assert_eq!(
            seen(None).as_deref(),
            Some("10.0.3.3"),
            "no header: the peer"
        );
        assert_eq!(seen(Some("")).as_deref(), Some("10.0.3.3"));
    }

    #[test]
    fn an_entry_that_is_not_an_address_ends_the_walk_at_the_proxy_that_wrote_it() {
        let s = trusting("10.0.0.0/16");
        let seen = |forwarded| client(&s, Some("10.0.3.3:8080"), Some(forwarded));
        assert_eq!(seen("198.51.100.4, unknown").as_deref(), Some("10.0.3.3"));
        assert_eq!(
            seen("198.51.100.4, unknown, 10.0.1.1").as_deref(),
            Some("10.0.1.1")
        );
        assert_eq!(seen("198.51.100.4,,").as_deref(), Some("10.0.3.3"));
        assert_eq!(seen("1.1.1.1, _hidden").as_deref(), Some("10.0.3.3"));
        assert_eq!(
            seen("garbage, 198.51.100.4").as_deref(),
            Some("198.51.100.4"),
            "left of the client nothing is read"
        );
    }

    #[test]
    fn ipv4_mapped_addresses_are_ipv4_on_both_sides() {
        let s = trusting("10.0.0.0/16");
        // A dual-stack listener reports an IPv4 proxy as IPv4-mapped IPv6.
        assert_eq!(
            client(
                &s,
                Some("[::ffff:10.0.3.3]:8080"),
                Some("::ffff:198.51.100.4")
            )
            .as_deref(),
            Some("198.51.100.4")
        );
        let mapped = trusting("::ffff:10.0.0.0/112");
        assert_eq!(
            client(&mapped, Some("10.0.3.3:8080"), Some("198.51.100.4")).as_deref(),
            Some("198.51.100.4")
        );
        assert_eq!(
            client(&Settings::default(), Some("[::ffff:203.0.113.7]:1"), None).as_deref(),
            Some("203.0.113.7")
        );
    }
}
