//! The HTTP trigger, as Spin's `crates/trigger-http/src/{lib,server,headers,wasi}.rs` (v3.6.3)
//! build it and serve a request: `[[trigger.http]]` checked and the router built at load, then
//! the runtime's own well-known routes, Spin's router, Spin's request headers, the request body
//! read whole under a deadline, a fresh instance of the matched component, and empty-bodied 404s
//! and 500s. The conformance table in `host/README.md` lists each behaviour with the Spin file it
//! comes from.

use std::borrow::Cow;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use futures::FutureExt;
use http::uri::Authority;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty, Full, LengthLimitError, Limited, combinators::UnsyncBoxBody};
use hyper::body::Body;
use tracing::Instrument;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;

use crate::manifest::{ManifestError, ManifestFile};
use crate::runtime::Runtime;
use crate::runtime::overload::{Class, Permit, Refused};
use crate::runtime::state::Ctx;
use crate::telemetry;
use crate::trigger::classes::{RequestClasses, ToolTable};
use crate::trigger::routes::{self, RouteMatch, Router, WELL_KNOWN_PREFIX};

/// The body of every response this server sends.
pub type ResponseBody = UnsyncBoxBody<Bytes, wasmtime_wasi_http::Error>;

/// An error that makes the server drop the connection without a response, as Spin's
/// `instrumented_service_fn` does when `handle` fails outside a component (e.g. no `Host`).
pub type ConnectionError = std::io::Error;

/// The default request body limit: the largest body the app takes (its functions refuse more
/// than 16 KiB, `seckill_spin_edge::http::MAX_BODY_BYTES`; a test holds the two equal), so the
/// host buffers no more for a request than a guest would accept.
pub const DEFAULT_MAX_REQUEST_BODY: u64 = 16 << 10;

/// How long a request body may take to arrive whole, from its head, by default: a buyer's 16 KiB
/// takes a fraction of a second on any link a browser uses; the deadline only bounds how long a
/// slow client holds a connection and its buffered bytes (never an instance: see [`handle`]).
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The body of a shed request's answer.
pub const SHED_MESSAGE: &str = "the server is at capacity; try again";

/// Marks a response the host gave because no instance slot came free in time (for the metrics).
#[derive(Debug, Clone, Copy)]
pub struct Shed;

/// When a request reached the host: its connection's accept for the first request on it, its
/// head's first byte for the next ones. Put in the request's extensions by [`crate::trigger::serve`];
/// without it, the time [`handle`] starts.
#[derive(Debug, Clone, Copy)]
pub struct Arrived(pub tokio::time::Instant);

/// How long a guest's request waited for its instance slot, put in its response's extensions
/// by [`handle`] (for [`server_timing`]).
#[derive(Debug, Clone, Copy)]
pub struct Queued(pub Duration);

/// The route a response answered, put in its extensions by [`handle`] (for the metrics): the
/// route as written in the manifest (`/api/events/:event_id/buy`), never the raw path, so a
/// label set stays as small as the manifest.
#[derive(Debug, Clone)]
pub struct MatchedRoute(pub Cow<'static, str>);

/// An app's HTTP trigger: its routes, each component's handler, and what the runtime answers
/// itself.
pub struct HttpTrigger {
    runtime: Arc<Runtime>,
    router: Router,
    /// By component: its `wasi:http/incoming-handler`, if it exports one.
    handlers: Vec<Option<ProxyPre<Ctx>>>,
    /// `[application] name` and `version`, for `/.well-known/spin/info`.
    name: String,
    version: Option<String>,
    /// What the trigger allows a request before it waits for an instance.
    limits: RequestLimits,
    /// Each route's request class.
    classes: RequestClasses,
    /// Routes that take larger bodies than [`RequestLimits::max_request_body`], by route.
    body_limits: HashMap<String, u64>,
}

/// What the HTTP trigger allows a request before it runs.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// Request bodies larger than this never reach a guest (`413`).
    pub max_request_body: u64,
    /// A request body must arrive whole within this of its head (`408`).
    pub body_timeout: Duration,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_request_body: DEFAULT_MAX_REQUEST_BODY,
            body_timeout: DEFAULT_BODY_TIMEOUT,
        }
    }
}

impl HttpTrigger {
    /// Checks every `[[trigger.http]]` of `file` (its component exists and exports the handler,
    /// its route is valid) and builds the router, logging what Spin logs (Spin: `HttpTrigger::new`
    /// in `lib.rs`, `HttpServer::new` in `server.rs`).
    pub(crate) fn build(
        file: &ManifestFile,
        runtime: Arc<Runtime>,
        limits: RequestLimits,
    ) -> Result<HttpTrigger, ManifestError> {
        let tool = ToolTable::of(file)?;
        let body_limits = tool.body_limits(file)?;
        let classes = RequestClasses::of_tool(file, tool)?;
        let handlers: Vec<_> = (0..runtime.len())
            .map(|c| ProxyPre::new(runtime.pre(c).clone()).ok())
            .collect();
        let mut routes = Vec::new();
        for trigger in &file.manifest.trigger.http {
            let c = runtime.component_at(file, &trigger.component)?;
            if handlers[c].is_none() {
                return Err(file.error_at(
                    &trigger.component,
                    "component does not export wasi:http/incoming-handler",
                ));
            }
            routes::check(trigger.route.get_ref()).map_err(|e| file.error_at(&trigger.route, e))?;
            routes.push((trigger.route.get_ref().as_str(), c));
        }
        let (router, duplicates) = Router::build(routes).map_err(|e| ManifestError {
            path: file.path.clone(),
            line: 0,
            message: e,
        })?;
        // Spin's warnings (`crates/trigger-http/src/server.rs`), not errors.
        for d in &duplicates {
            tracing::error!(
                "route {} of component `{}` duplicates that of `{}` and will never be used",
                d.route,
                runtime.id(d.replaced),
                runtime.id(d.effective)
            );
        }
        if router.contains_reserved_route() {
            tracing::error!(
                "Routes under {} are handled by the Spin runtime and will never be reached",
                WELL_KNOWN_PREFIX
            );
        }
        let application = &file.manifest.application;
        Ok(HttpTrigger {
            runtime,
            router,
            handlers,
            name: application.name.clone(),
            version: application.version.clone(),
            limits,
            classes,
            body_limits,
        })
    }

    /// Component `c`'s `wasi:http/incoming-handler`, if it exports one.
    pub(crate) fn handler(&self, c: usize) -> Option<&ProxyPre<Ctx>> {
        self.handlers[c].as_ref()
    }

    /// The runtime its components run on.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }
}

/// A request body as [`handle`] takes it (hyper's `Incoming`, in a test anything alike).
pub trait RequestBody: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static {}

impl<B: Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static> RequestBody for B {}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Answers one request: well-known routes, routing, the body, then the matched component once
/// its class gets an instance slot ([`crate::runtime::overload`]). The response's extensions name the
/// route that answered it ([`MatchedRoute`]) and the request's class ([`Class`]), for the metrics.
///
/// The body is read whole, under [`RequestLimits::body_timeout`] from now, before the request
/// waits for an instance: a client that sends its body slowly holds a connection, never an
/// instance, so slow bodies cannot take the instances the sale runs on.
///
/// Everything up to the slot runs where the caller runs (the front, [`crate::trigger::serve`]); the
/// guest runs on `guests`, in a task of its own, as Spin runs a `wasi:http@0.2` guest
/// (`crates/trigger-http/src/wasi.rs`): a client that goes away does not cancel it.
pub async fn handle(
    trigger: &HttpTrigger,
    req: Request<impl RequestBody>,
    client: SocketAddr,
    guests: &tokio::runtime::Handle,
) -> Result<Response<ResponseBody>, ConnectionError> {
    let span = telemetry::request_span(&req, client);
    let method = req.method().clone();
    let resp = route_and_run(trigger, req, client, guests)
        .instrument(span.clone())
        .await?;
    if let Some(MatchedRoute(route)) = resp.extensions().get::<MatchedRoute>() {
        telemetry::name_request(&span, &method, route, resp.status().as_u16());
    }
    Ok(resp)
}

/// [`handle`], within the request's span.
async fn route_and_run(
    trigger: &HttpTrigger,
    mut req: Request<impl RequestBody>,
    client: SocketAddr,
    guests: &tokio::runtime::Handle,
) -> Result<Response<ResponseBody>, ConnectionError> {
    let headed = tokio::time::Instant::now();
    let arrived = req.extensions().get::<Arrived>().map_or(headed, |a| a.0);
    strip_forbidden_headers(&mut req);
    let path = req.uri().path();
    if let Some(well_known) = path.strip_prefix(WELL_KNOWN_PREFIX) {
        return Ok(match well_known {
            "health" => routed(
                full(StatusCode::OK, Bytes::from_static(b"OK"), None),
                Cow::Borrowed("/.well-known/spin/health"),
            ),
            "info" => routed(app_info(trigger), Cow::Borrowed("/.well-known/spin/info")),
            _ => empty(StatusCode::NOT_FOUND),
        });
    }
    let Some(matched) = trigger.router.route(path) else {
        return Ok(empty(StatusCode::NOT_FOUND));
    };
    set_req_uri(&mut req).map_err(|e| ConnectionError::other(format!("{e:#}")))?;
    let class = trigger
        .classes
        .route(&matched.raw_route)
        .expect("every route has its class (checked at load)")
        .of(req.method());
    let limits = &RequestLimits {
        max_request_body: trigger
            .body_limits
            .get(&matched.raw_route)
            .copied()
            .unwrap_or(trigger.limits.max_request_body),
        ..trigger.limits
    };
    let (parts, body) = req.into_parts();
    let body = match read_body(body, declared_length(&parts.headers), limits).await {
        Ok(body) => body,
        Err(refused) => {
            return Ok(classed(
                routed(refused.answer(limits), Cow::Owned(matched.raw_route)),
                class,
            ));
        }
    };
    let mut req = Request::from_parts(parts, body);
    let component = trigger.runtime.id(matched.component);
    let result = async {
        set_spin_headers(&mut req, &matched, client)?;
        let slot = match trigger.runtime.slots().admit(class).await {
            Ok(slot) => slot,
            Err(refused) => return Ok(shed(refused, arrived, headed)),
        };
        let queued = Queued(slot.waited());
        let pre = trigger
            .handler(matched.component)
            .expect("routes only point at HTTP components")
            .clone();
        let call = run(trigger.runtime.clone(), matched.component, pre, slot, req);
        let mut resp = guests.spawn(call.in_current_span()).await??;
        resp.extensions_mut().insert(queued);
        anyhow::Ok(resp)
    };
    let resp = match result.await {
        Ok(resp) => resp,
        Err(e) => {
            tracing::error!(component = %component, "Error processing request: {e:?}");
            empty(StatusCode::INTERNAL_SERVER_ERROR)
        }
    };
    Ok(classed(routed(resp, Cow::Owned(matched.raw_route)), class))
}

/// `resp`, naming the class of the request it answered.
fn classed(mut resp: Response<ResponseBody>, class: Class) -> Response<ResponseBody> {
    resp.extensions_mut().insert(class);
    resp
}

/// `resp`, naming the manifest route that answered it.
fn routed(mut resp: Response<ResponseBody>, route: Cow<'static, str>) -> Response<ResponseBody> {
    resp.extensions_mut().insert(MatchedRoute(route));
    resp
}

/// A guest's `handle` call, boxed so that it can outlive the response head.
type GuestCall = Pin<Box<dyn Future<Output = wasmtime::Result<()>> + Send>>;

/// Runs a guest call to completion after its response head: polling it in place until the head
/// saves a spawn on the common path; only a call still writing its body is spawned.
struct RunToCompletion(Option<GuestCall>);

impl Drop for RunToCompletion {
    fn drop(&mut self) {
        if let Some(call) = self.0.take() {
            tokio::spawn(async move {
                if let Err(e) = call.await {
                    tracing::error!("Component error after response started: {e:?}");
                }
            });
        }
    }
}

/// Why a request body was not handed to a guest.
#[derive(Debug)]
enum BodyRefusal {
    /// Declared or sent beyond [`RequestLimits::max_request_body`].
    TooLarge,
    /// Not whole within [`RequestLimits::body_timeout`].
    TooSlow,
    /// Not valid HTTP framing (a bad chunk), or the connection failed mid-body.
    Unreadable(BoxError),
}

impl BodyRefusal {
    /// The host's answer. Either way the rest of the body is unread, so the connection closes
    /// (lingering, so that a client still sending reads the answer: `crate::trigger::serve`).
    fn answer(&self, limits: &RequestLimits) -> Response<ResponseBody> {
        let (status, reason) = match self {
            BodyRefusal::TooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "request bodies are limited to {} bytes",
                    limits.max_request_body
                ),
            ),
            BodyRefusal::TooSlow => (
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {:?}",
                    limits.body_timeout
                ),
            ),
            BodyRefusal::Unreadable(e) => (
                StatusCode::BAD_REQUEST,
                format!("the request body could not be read: {e}"),
            ),
        };
        let mut resp = refusal(status, reason);
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        resp
    }
}

/// The request's `Content-Length`, if it declares a valid one.
fn declared_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// The whole body, at most `max_request_body` bytes, within `body_timeout`. A declared length
/// over the limit is refused before a byte is read. A guest reads the buffered body through the
/// same `wasi:http` incoming-body stream Spin gives it the client's (Spin hands hyper's body to
/// `new_incoming_request`: `instrumented_service_fn` in `crates/trigger-http/src/server.rs`,
/// `crates/trigger-http/src/wasi.rs`): the same bytes, then the end of the stream; only a
/// body that never comes whole, which Spin's guest would see as a stream error, reaches no guest.
async fn read_body(
    body: impl RequestBody,
    declared: Option<u64>,
    limits: &RequestLimits,
) -> Result<Full<Bytes>, BodyRefusal> {
    if declared.is_some_and(|n| n > limits.max_request_body) {
        return Err(BodyRefusal::TooLarge);
    }
    if body.is_end_stream() {
        return Ok(Full::new(Bytes::new()));
    }
    let limit = usize::try_from(limits.max_request_body).unwrap_or(usize::MAX);
    let whole = Limited::new(body, limit).collect();
    match tokio::time::timeout(limits.body_timeout, whole).await {
        Err(_) => Err(BodyRefusal::TooSlow),
        Ok(Ok(collected)) => Ok(Full::new(collected.to_bytes())),
        Ok(Err(e)) if e.is::<LengthLimitError>() => Err(BodyRefusal::TooLarge),
        Ok(Err(e)) => Err(BodyRefusal::Unreadable(e)),
    }
}

/// Runs component `c` (whose handler is `pre`) on `req` in the instance `slot` holds.
async fn run(
    runtime: Arc<Runtime>,
    c: usize,
    pre: ProxyPre<Ctx>,
    slot: Permit,
    req: Request<Full<Bytes>>,
) -> Result<Response<ResponseBody>> {
    let mut store = runtime.store(c);
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let req = req.map(|body| body.map_err(|never| -> wasmtime_wasi_http::Error { match never {} }));
    let req = store
        .data_mut()
        .wasi_http()
        .new_incoming_request(Scheme::Http, req)?;
    let out = store.data_mut().wasi_http().new_response_outparam(tx)?;
    let started = tokio::time::Instant::now();
    let proxy = pre.instantiate_async(&mut store).await?;
    let mut guest = RunToCompletion(Some(Box::pin(async move {
        let result = proxy
            .wasi_http_incoming_handler()
            .call_handle(&mut store, req, out)
            .await;
        let took = started
            .elapsed()
            .saturating_sub(store.data().outbound_http_waited());
        // Whatever the guest left behind (pooled connections mid-transaction among them) is
        // released only with the store; the pool slot goes with it.
        drop(store);
        slot.served(took);
        result
    })));
    let call = guest.0.as_mut().expect("just set");
    let head = tokio::select! {
        biased;
        head = &mut rx => head,
        result = call => {
            guest.0 = None;
            match rx.await {
                Err(_) => match result {
                    // The sender was dropped without a response: the guest trapped or returned.
                    Err(trap) => bail!("guest invocation failed: {trap:?}"),
                    Ok(()) => bail!("guest failed to produce a response prior to returning"),
                },
                head => head,
            }
        }
    };
    // The guest may still be writing the body after the head: usually it has finished by now;
    // if not, dropping `guest` moves it to a task of its own.
    if let Some(call) = guest.0.as_mut()
        && call.now_or_never().is_some()
    {
        guest.0 = None;
    }
    drop(guest);
    match head {
        Ok(Ok(resp)) => Ok(resp),
        Ok(Err(code)) => bail!("guest failed to produce a response: {code:?}"),
        Err(_) => bail!("guest dropped the response"),
    }
}

/// The answer to a request the queue control refused an instance slot: `503` with
/// `Retry-After` (by its class and how long the overload has lasted), the request never run
/// (so retrying it is safe). `Server-Timing` says where its time at the host went: `host`, from
/// its arrival (the connection's accept, or the head's first byte on a kept-alive connection)
/// to this answer, of which `head` until its head was read whole (the client sending it, the
/// front reading it) and `queue` in the slot queue. Real Spin queues nothing: its pool holds
/// `SPIN_MAX_INSTANCE_COUNT` (1,000) instances (`crates/core/src/lib.rs`), and a request that
/// finds it full fails to instantiate and gets `internal_error(None, …)`, an empty-bodied
/// `500` (`respond_wasm_component` in `crates/trigger-http/src/server.rs`). We answer `503`,
/// the status that says "overloaded, come back", and when.
fn shed(
    refused: Refused,
    arrived: tokio::time::Instant,
    headed: tokio::time::Instant,
) -> Response<ResponseBody> {
    let mut resp = refusal(StatusCode::SERVICE_UNAVAILABLE, SHED_MESSAGE.to_owned());
    let headers = resp.headers_mut();
    headers.insert(
        header::RETRY_AFTER,
        HeaderValue::from(refused.retry_after_s),
    );
    let timing = timing_value(&[
        ("head", headed - arrived),
        ("queue", refused.waited),
        ("host", arrived.elapsed()),
    ]);
    headers.insert(SERVER_TIMING, timing);
    resp.extensions_mut().insert(Shed);
    resp
}

/// The host's timing header: on its shed answers always, on every answer with
/// `--server-timing` ([`server_timing`]).
const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// A `Server-Timing` value: each metric as `name;dur=<ms>`, to a tenth of a millisecond (the
/// bench reads them back: `seckill-bench`'s `load::ServerTiming`).
fn timing_value(metrics: &[(&str, Duration)]) -> HeaderValue {
    let value = metrics
        .iter()
        .map(|(name, d)| format!("{name};dur={:.1}", d.as_secs_f64() * 1e3))
        .collect::<Vec<_>>()
        .join(", ");
    HeaderValue::from_str(&value).expect("metric names and numbers are visible ASCII")
}

/// Says on `resp` where its time at the host went, unless it says so already (a shed answer):
/// `queue` waiting for an instance slot and `host` from its arrival (as on a shed answer: the
/// connection's accept for its first request, else the head's first byte) to the answer's head;
/// on a connection's first request also `accept`, the part of `host` before the first byte came
/// (a client that connected early, a pool's spare connection, or a client slow to write).
pub fn server_timing(
    resp: &mut Response<ResponseBody>,
    arrived: tokio::time::Instant,
    accept: Option<Duration>,
) {
    if resp.headers().contains_key(SERVER_TIMING) {
        return;
    }
    let queued = resp
        .extensions()
        .get::<Queued>()
        .map_or(Duration::ZERO, |q| q.0);
    let mut metrics = vec![("queue", queued), ("host", arrived.elapsed())];
    metrics.extend(accept.map(|d| ("accept", d)));
    resp.headers_mut()
        .insert(SERVER_TIMING, timing_value(&metrics));
}

/// What the host answers itself, before or instead of a guest: the status and a one-line reason
/// in plain text, as Spin answers what it refuses (`internal_error(Some(body), …)` and
/// `not_found` in `crates/trigger-http/src/server.rs`, v3.6.3). The app's error shape is the
/// app's: a client tells the host's answers by their status.
fn refusal(status: StatusCode, reason: String) -> Response<ResponseBody> {
    no_store(full(
        status,
        Bytes::from(reason),
        Some("text/plain; charset=utf-8"),
    ))
}

/// The host's own answers are never cached (a CDN in front would otherwise keep a shed `503`
/// or a `404` for everyone): `Cache-Control: no-store`, which Spin does not send.
fn no_store(mut resp: Response<ResponseBody>) -> Response<ResponseBody> {
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    resp
}

/// Spin's `strip_forbidden_headers`: a `Host` naming a service-chaining host is removed.
fn strip_forbidden_headers<B>(req: &mut Request<B>) {
    let chaining = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| {
            let host = h.rsplit_once(':').map_or(h, |(host, _)| host);
            host.ends_with(".spin.internal")
        });
    if chaining {
        req.headers_mut().remove(header::HOST);
    }
}

/// Spin's `set_req_uri`: the URI gets the scheme and the authority of the `Host` header (or
/// its own); none, an unparsable one, or two that differ fail the request.
fn set_req_uri<B>(req: &mut Request<B>) -> Result<()> {
    let header_authority = req
        .headers()
        .get(header::HOST)
        .map(|h| -> Result<Authority> {
            let host = h.to_str().context("'Host' header is not valid UTF-8")?;
            host.parse()
                .context("'Host' header contains an invalid authority")
        })
        .transpose()?;
    let mut parts = req.uri().clone().into_parts();
    let authority = match (header_authority, parts.authority.take()) {
        (None, None) => bail!("no 'Host' header present in request"),
        (Some(a), None) | (None, Some(a)) => a,
        (Some(a1), Some(a2)) if a1 == a2 => a1,
        _ => bail!("authority in 'Host' header does not match authority in URI"),
    };
    parts.scheme = Some(http::uri::Scheme::HTTP);
    parts.authority = Some(authority);
    if parts.path_and_query.is_none() {
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
    }
    *req.uri_mut() = http::Uri::from_parts(parts)?;
    Ok(())
}

/// Spin's request headers (`headers.rs`: `compute_default_headers`, `prepare_request_headers`
/// and `wasi.rs`: `prepare_request`): the client's headers first, then Spin's appended in
/// Spin's order, so a guest that keeps the last value of a name (spin-sdk's `Request`) sees
/// Spin's. Names are `SPIN_*` with `_` → `-`, lower-cased: `:event_id` arrives as
/// `spin-path-match-event-id`. Built straight into the header map: this runs on every request.
fn set_spin_headers<B>(req: &mut Request<B>, m: &RouteMatch, client: SocketAddr) -> Result<()> {
    // Spin reads every header value as UTF-8 and fails the request otherwise.
    for value in req.headers().values() {
        std::str::from_utf8(value.as_bytes())?;
    }
    let host = req.headers().get(header::HOST).map_or("localhost", |h| {
        std::str::from_utf8(h.as_bytes()).unwrap_or_default()
    });
    let path_and_query = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let full_url = format!("http://{host}{path_and_query}");
    let client = client.to_string();
    let fixed = [
        ("spin-path-info", m.trailing_wildcard.as_str()),
        ("spin-full-url", full_url.as_str()),
        ("spin-matched-route", m.based_route.as_str()),
        ("spin-base-path", "/"),
        ("spin-raw-component-route", m.raw_route.as_str()),
        ("spin-component-route", m.raw_route_or_prefix()),
        ("spin-client-addr", client.as_str()),
    ];
    let mut appended = Vec::with_capacity(fixed.len() + m.captures.len());
    for (name, value) in fixed {
        if let Ok(value) = HeaderValue::from_str(value) {
            appended.push((HeaderName::from_static(name), value));
        }
    }
    for (name, value) in &m.captures {
        let name = format!("spin-path-match-{}", name.replace('_', "-")).to_ascii_lowercase();
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::from_str(value)) {
            appended.push((name, value));
        }
    }
    let headers = req.headers_mut();
    for (name, value) in appended {
        headers.append(name, value);
    }
    Ok(())
}

/// `GET /.well-known/spin/info`: Spin's `AppInfo` (`crates/http/src/app_info.rs`), pretty JSON.
fn app_info(trigger: &HttpTrigger) -> Response<ResponseBody> {
    let mut info = serde_json::Map::new();
    info.insert("name".into(), trigger.name.clone().into());
    if let Some(version) = &trigger.version {
        info.insert("version".into(), version.clone().into());
    }
    let body = serde_json::to_vec_pretty(&info).expect("a map of strings serializes");
    full(StatusCode::OK, Bytes::from(body), Some("application/json"))
}

fn full(
    status: StatusCode,
    body: Bytes,
    content_type: Option<&'static str>,
) -> Response<ResponseBody> {
    let mut resp = Response::new(
        Full::new(body)
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = status;
    if let Some(ct) = content_type {
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    resp
}

/// Spin's 404 and 500: a status and no body (and [`no_store`]).
fn empty(status: StatusCode) -> Response<ResponseBody> {
    let mut resp = Response::new(
        Empty::new()
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *resp.status_mut() = status;
    no_store(resp)
}
