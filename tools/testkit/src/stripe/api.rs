//! The HTTP front: `/v1/…` answered as Stripe's API, `/c/pay/…` as its hosted page.
//!
//! An API request goes through what Stripe documents, in its order:
//! 1. authentication (<https://docs.stripe.com/api/authentication>, <https://docs.stripe.com/keys>):
//!    `Authorization: Bearer <key>` (or the key as Basic user name, as `curl -u` sends it);
//!    no key or an unknown one → 401; a restricted key (`rk_test_…`) without the
//!    resource's permission → 403 (write implies read);
//! 2. `Stripe-Version` (<https://docs.stripe.com/api/versioning>): recorded, echoed, a malformed
//!    one → 400; objects are rendered in the sandbox's configured version;
//! 3. the rate limiters (<https://docs.stripe.com/rate-limits>) → 429 `rate_limit` with
//!    `Stripe-Rate-Limited-Reason`, or a `lock_timeout` 429 with `Stripe-Should-Retry: true`;
//!    they run before the idempotency layer, so a 429 is never stored for a key
//!    (<https://docs.stripe.com/error-low-level#content-errors>);
//! 4. the parameters (form-encoded, [`super::form`]) against the documented ones
//!    ([`super::schema`]) → 400, also not stored for a key;
//! 5. idempotency (<https://docs.stripe.com/api/idempotent_requests>): for a `POST` with an
//!    `Idempotency-Key` (at most 255 characters) the first answer, status and body, is kept
//!    24 hours and replayed to the same request with `Idempotent-Replayed: true`; the same key
//!    on another endpoint or with other parameters → 400 `idempotency_error`; keys on `GET`
//!    have no effect;
//! 6. the endpoint itself; a 500 `api_error` a test injected is stored like any answer
//!    ("Retries with the same key return the saved response, including 500 errors").
//!
//! Every response carries `Request-Id` (<https://docs.stripe.com/api/request_ids>).

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::config::{ACCOUNT_ID, IDEMPOTENCY_TTL_S, Permission};
use super::error::ApiError;
use super::form;
use super::ids::{new_id, wall_s};
use super::sandbox::Inner;
use super::schema::{self, Field};
use super::state::Call;
use super::state::{Origin, Session, SessionStatus, State, Stored, Unpayable, metadata_of};
use super::{dashboard, hosted};

type Resp = Response<Full<Bytes>>;

/// Serves `listener` until the task is aborted.
pub(crate) async fn serve(inner: Arc<Inner>, listener: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let conn_inner = inner.clone();
        let task = tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let inner = conn_inner.clone();
                async move { handle(inner, req).await }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        inner.track(task.abort_handle());
    }
}

/// A response the sandbox was told to lose: the connection closes unanswered.
#[derive(Debug)]
struct Lost;

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("response lost on purpose by the Stripe sandbox")
    }
}

impl std::error::Error for Lost {}

async fn handle(inner: Arc<Inner>, req: Request<hyper::body::Incoming>) -> Result<Resp, Lost> {
    let path = req.uri().path().to_owned();
    if let Some(id) = path.strip_prefix("/c/pay/") {
        let id = id.to_owned();
        return Ok(hosted_page(&inner, req, &id).await);
    }
    if path.starts_with("/v1/") {
        return api(inner, req).await;
    }
    if path.starts_with(dashboard::PATH) {
        let post = req.method() == hyper::Method::POST;
        let _ = req.into_body().collect().await;
        return Ok(dashboard::handle(&inner, post, &path));
    }
    Ok(hosted::page(404, "en", "<h1>Not found</h1>"))
}

// ---- the hosted page -------------------------------------------------------------------------

async fn hosted_page(inner: &Arc<Inner>, req: Request<hyper::body::Incoming>, id: &str) -> Resp {
    let post = req.method() == hyper::Method::POST;
    let accept = req
        .headers()
        .get("accept-language")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // The form's fields are read by nobody: the amount is the session's.
    let _ = req.into_body().collect().await;
    let now = inner.clock.now();
    let resp = {
        let mut state = inner.state.lock().expect("sandbox state");
        state.tick(now, &inner.base_url);
        let Some(session) = state.sessions.get(id).cloned() else {
            let w = hosted::words(None, accept.as_deref());
            return hosted::page(404, w.lang, &format!("<h1>{}</h1>", w.missing));
        };
        let w = hosted::words(session.locale.as_deref(), accept.as_deref());
        if post {
            match state.complete_session(id, now, &inner.base_url) {
                Ok(_) | Err(Unpayable::AlreadyComplete(_)) => {
                    hosted::redirect(&hosted::success_location(&session))
                }
                Err(Unpayable::Expired) => {
                    hosted::page(410, w.lang, &format!("<h1 id=expired>{}</h1>", w.expired))
                }
                Err(Unpayable::NoSuchSession) => {
                    hosted::page(404, w.lang, &format!("<h1>{}</h1>", w.missing))
                }
            }
        } else {
            let (status, body) = hosted::checkout(&session, w);
            hosted::page(status, w.lang, &body)
        }
    };
    inner.flush();
    resp
}

// ---- the API ---------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Route {
    CreateSession,
    RetrieveSession(String),
    ExpireSession(String),
    RetrieveIntent(String),
    CreateRefund,
    RetrieveRefund(String),
    ListEvents,
    RetrieveEvent(String),
}

fn route(method: &hyper::Method, path: &str) -> Option<Route> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let get = method == hyper::Method::GET;
    let post = method == hyper::Method::POST;
    let id = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    match segs.as_slice() {
        ["v1", "checkout", "sessions"] if post => Some(Route::CreateSession),
        ["v1", "checkout", "sessions", s] if get => id(s).map(Route::RetrieveSession),
        ["v1", "checkout", "sessions", s, "expire"] if post => id(s).map(Route::ExpireSession),
        ["v1", "payment_intents", s] if get => id(s).map(Route::RetrieveIntent),
        ["v1", "refunds"] if post => Some(Route::CreateRefund),
        ["v1", "refunds", s] if get => id(s).map(Route::RetrieveRefund),
        ["v1", "events"] if get => Some(Route::ListEvents),
        ["v1", "events", s] if get => id(s).map(Route::RetrieveEvent),
        _ => None,
    }
}

impl Route {
    fn fields(&self) -> &'static [Field] {
        match self {
            Route::CreateSession => schema::CREATE_SESSION,
            Route::ExpireSession(_) => schema::EXPIRE_SESSION,
            Route::CreateRefund => schema::CREATE_REFUND,
            Route::ListEvents => schema::LIST_EVENTS,
            Route::RetrieveSession(_)
            | Route::RetrieveIntent(_)
            | Route::RetrieveRefund(_)
            | Route::RetrieveEvent(_) => schema::RETRIEVE,
        }
    }

    /// The permission a restricted key needs, and its name in Stripe's 403.
    fn permission(&self) -> (Permission, &'static str) {
        match self {
            Route::CreateSession | Route::ExpireSession(_) => (
                Permission::CheckoutSessionsWrite,
                "rak_checkout_session_write",
            ),
            Route::RetrieveSession(_) => (
                Permission::CheckoutSessionsRead,
                "rak_checkout_session_read",
            ),
            Route::RetrieveIntent(_) => (Permission::PaymentIntentsRead, "rak_payment_intent_read"),
            Route::CreateRefund => (Permission::RefundsWrite, "rak_refund_write"),
            Route::RetrieveRefund(_) => (Permission::RefundsRead, "rak_refund_read"),
            Route::ListEvents | Route::RetrieveEvent(_) => {
                (Permission::EventsRead, "rak_event_read")
            }
        }
    }
}

/// `sk_test_abc…wxyz` → `sk_test_*********wxyz`, as Stripe quotes keys.
fn mask(key: &str) -> String {
    let prefix_len = key
        .match_indices('_')
        .nth(1)
        .map_or(0, |(i, _)| i + 1)
        .min(key.len());
    let tail = key.len().saturating_sub(4).max(prefix_len);
    format!(
        "{}{}{}",
        &key[..prefix_len],
        "*".repeat(tail - prefix_len),
        &key[tail..]
    )
}

fn api_key(header: Option<&str>) -> Option<String> {
    let h = header?.trim();
    if let Some(k) = h.strip_prefix("Bearer ") {
        return Some(k.trim().to_owned());
    }
    let b64 = h.strip_prefix("Basic ")?;
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    let s = String::from_utf8(raw).ok()?;
    Some(s.split(':').next().unwrap_or("").to_owned())
}

fn valid_version(v: &str) -> bool {
    let (date, name) = v.split_once('.').unwrap_or((v, "a"));
    let b = date.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        && !name.is_empty()
        && name.bytes().all(|c| c.is_ascii_lowercase())
}

/// What one API request produced.
struct Answer {
    status: u16,
    body: String,
    headers: Vec<(&'static str, String)>,
    replayed: bool,
    lose: bool,
}

impl Answer {
    fn error(e: &ApiError) -> Self {
        let mut headers = Vec::new();
        if let Some(retry) = e.should_retry {
            headers.push(("stripe-should-retry", retry.to_string()));
        }
        if let Some(reason) = e.rate_limited_reason {
            headers.push(("stripe-rate-limited-reason", reason.to_owned()));
        }
        Answer {
            status: e.status,
            body: e.body().to_string(),
            headers,
            replayed: false,
            lose: false,
        }
    }

    fn ok(body: &Value) -> Self {
        Answer {
            status: 200,
            body: body.to_string(),
            headers: Vec::new(),
            replayed: false,
            lose: false,
        }
    }
}

/// The parts of a request the pipeline reads.
struct Incoming {
    method: hyper::Method,
    path: String,
    authorization: Option<String>,
    version: Option<String>,
    idempotency_key: Option<String>,
    form_body: bool,
    query: String,
    body: Bytes,
    request_id: String,
}

async fn api(inner: Arc<Inner>, req: Request<hyper::body::Incoming>) -> Result<Resp, Lost> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let mut incoming = Incoming {
        method: req.method().clone(),
        path: req.uri().path().to_owned(),
        authorization: header("authorization"),
        version: header("stripe-version"),
        idempotency_key: header("idempotency-key"),
        form_body: header("content-type").is_none_or(|c| {
            c.trim()
                .to_ascii_lowercase()
                .starts_with("application/x-www-form-urlencoded")
        }),
        query: req.uri().query().unwrap_or("").to_owned(),
        body: Bytes::new(),
        request_id: new_id("req_", 14),
    };
    incoming.body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let now = inner.clock.now();
    let (answer, version) = {
        let mut state = inner.state.lock().expect("sandbox state");
        state.tick(now, &inner.base_url);
        let (answer, params, key) = process(&inner, &mut state, &incoming, now);
        let version = incoming
            .version
            .clone()
            .filter(|v| valid_version(v))
            .unwrap_or_else(|| inner.api_version.clone());
        state.calls.push(Call {
            at: now,
            method: incoming.method.to_string(),
            path: incoming.path.clone(),
            params,
            idempotency_key: incoming.idempotency_key.clone(),
            stripe_version: incoming.version.clone(),
            api_key: key,
            status: answer.status,
            replayed: answer.replayed,
            request_id: incoming.request_id.clone(),
        });
        (answer, version)
    };
    inner.flush();
    if answer.lose {
        return Err(Lost);
    }
    let mut resp = Response::builder()
        .status(answer.status)
        .header("content-type", "application/json")
        .header("request-id", &incoming.request_id)
        .header("stripe-version", version)
        .header("cache-control", "no-cache, no-store");
    if let Some(k) = &incoming.idempotency_key {
        resp = resp.header("idempotency-key", k);
    }
    for (name, value) in &answer.headers {
        resp = resp.header(*name, value);
    }
    Ok(resp
        .body(Full::new(Bytes::from(answer.body)))
        .expect("a valid response"))
}

/// The pipeline; returns the answer, the parameters as received (for the call log) and the
/// key used.
fn process(
    inner: &Inner,
    state: &mut State,
    incoming: &Incoming,
    now: i64,
) -> (Answer, Value, Option<String>) {
    let get = incoming.method == hyper::Method::GET;
    let raw = if get {
        form::parse(incoming.query.as_bytes())
    } else {
        form::parse(&incoming.body)
    };
    let raw_json = raw.as_ref().map_or(Value::Null, form::to_json);
    let key = api_key(incoming.authorization.as_deref());
    let fail = |e: ApiError| (Answer::error(&e), raw_json.clone(), key.clone());

    // 1. Authentication.
    let Some(k) = key.as_deref().filter(|k| !k.is_empty()) else {
        return fail(ApiError::unauthorized(
            "You did not provide an API key. You need to provide your API key in the \
             Authorization header, using Bearer auth (e.g. 'Authorization: Bearer \
             YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details, \
             or we can help at https://support.stripe.com/.",
        ));
    };
    let Some(account_key) = inner.keys.iter().find(|x| x.key == k) else {
        return fail(ApiError::unauthorized(format!(
            "Invalid API Key provided: {}",
            mask(k)
        )));
    };
    let Some(route) = route(&incoming.method, &incoming.path) else {
        return fail(
            ApiError::invalid(format!(
                "Unrecognized request URL ({}: {}). Please see https://stripe.com/docs or we \
                 can help at https://support.stripe.com/. (The seckill Stripe sandbox plays \
                 only the endpoints its module documents.)",
                incoming.method, incoming.path
            ))
            .with_status(404),
        );
    };
    let (needed, rak) = route.permission();
    if let Some(perms) = &account_key.permissions
        && !perms.iter().any(|p| p.grants(needed))
    {
        return fail(ApiError::forbidden(format!(
            "The provided key '{}' does not have the required permissions for this endpoint \
             on account '{}'. Having the '{rak}' permission would allow this request to \
             continue.",
            mask(k),
            ACCOUNT_ID
        )));
    }

    // 2. Versioning.
    if let Some(v) = &incoming.version
        && !valid_version(v)
    {
        return fail(ApiError::invalid(format!(
            "Invalid Stripe API version: {v}"
        )));
    }

    // 3. Rate limiters (before idempotency: nothing stored).
    if let Some(e) = rate_limited(state) {
        return fail(e);
    }

    // 4. Parameters.
    if !get && !incoming.form_body && !incoming.body.is_empty() {
        return fail(ApiError::invalid(
            "Invalid request: the Stripe API takes application/x-www-form-urlencoded \
             parameters (https://docs.stripe.com/api).",
        ));
    }
    let raw = match raw {
        Ok(r) => r,
        Err(form::Clash(name)) => {
            return fail(ApiError::invalid("Invalid hash").with_param(name));
        }
    };
    let params = match schema::check(&raw, route.fields()) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };

    // 5. Idempotency.
    let idem = if get {
        None
    } else {
        incoming.idempotency_key.clone()
    };
    let endpoint = format!("{} {}", incoming.method, incoming.path);
    if let Some(ik) = &idem {
        if ik.len() > 255 {
            return fail(
                ApiError::invalid(
                    "Invalid idempotency key: idempotency keys can be no longer than 255 \
                     characters.",
                )
                .with_param("Idempotency-Key"),
            );
        }
        state
            .idempotency
            .retain(|_, s| now - s.stored_at < IDEMPOTENCY_TTL_S);
        if let Some(stored) = state.idempotency.get(ik) {
            if stored.endpoint != endpoint {
                let first = stored.endpoint.split_once(' ').map_or("", |(_, p)| p);
                return fail(ApiError::idempotency(format!(
                    "Keys for idempotent requests can only be used for the same endpoint they \
                     were first used for ('{first}' vs '{}'). Try using a key other than \
                     '{ik}' if you meant to execute a different request.",
                    incoming.path
                )));
            }
            if stored.params != raw_json {
                return fail(ApiError::idempotency(format!(
                    "Keys for idempotent requests can only be used with the same parameters \
                     they were first used with. Try using a key other than '{ik}' if you meant \
                     to execute a different request."
                )));
            }
            let answer = Answer {
                status: stored.status,
                body: stored.body.clone(),
                headers: vec![
                    ("idempotent-replayed", "true".to_owned()),
                    ("original-request", stored.request_id.clone()),
                ],
                replayed: true,
                lose: false,
            };
            return (answer, raw_json, key);
        }
    }

    // 6. The endpoint.
    let origin = Origin {
        request_id: Some(incoming.request_id.clone()),
        idempotency_key: idem.clone(),
    };
    let mut answer = if state.faults.server_error_next > 0 {
        state.faults.server_error_next -= 1;
        Answer::error(&ApiError::server())
    } else {
        match execute(inner, state, &route, &params, &origin, now) {
            Ok(v) => Answer::ok(&v),
            Err(e) => Answer::error(&e),
        }
    };
    if let Some(ik) = idem {
        state.idempotency.insert(
            ik,
            Stored {
                endpoint,
                params: raw_json.clone(),
                status: answer.status,
                body: answer.body.clone(),
                request_id: incoming.request_id.clone(),
                stored_at: now,
            },
        );
    }
    if state.faults.lose_next > 0 {
        state.faults.lose_next -= 1;
        answer.lose = true;
    }
    (answer, raw_json, key)
}

fn rate_limited(state: &mut State) -> Option<ApiError> {
    let f = &mut state.faults;
    if f.lock_timeout_next > 0 {
        f.lock_timeout_next -= 1;
        return Some(ApiError::lock_timeout());
    }
    if f.rate_limit_next > 0 {
        f.rate_limit_next -= 1;
        return Some(ApiError::rate_limited("global-rate"));
    }
    if let Some(share) = f.rate_limit_share {
        // Deterministic: of every run of requests, `share` of them, evenly spread.
        f.share_seen += 1;
        let n = f.share_seen as f64;
        if (n * share).floor() > ((n - 1.0) * share).floor() {
            return Some(ApiError::rate_limited("global-rate"));
        }
    }
    if let Some(budget) = f.per_second {
        let second = wall_s();
        if f.window.0 != second {
            f.window = (second, 0);
        }
        f.window.1 += 1;
        if f.window.1 > budget {
            return Some(ApiError::rate_limited("global-rate"));
        }
    }
    None
}

fn expands(params: &Value, allowed: &[&str]) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::new();
    for (i, e) in params["expand"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let e = e.as_str().unwrap_or_default();
        if !allowed.contains(&e) {
            return Err(
                ApiError::invalid(format!("This property cannot be expanded ({e})."))
                    .with_param(format!("expand[{i}]")),
            );
        }
        out.push(e.to_owned());
    }
    Ok(out)
}

fn execute(
    inner: &Inner,
    state: &mut State,
    route: &Route,
    params: &Value,
    origin: &Origin,
    now: i64,
) -> Result<Value, ApiError> {
    let base = inner.base_url.as_str();
    match route {
        Route::CreateSession => create_session(state, params, now, base),
        Route::RetrieveSession(id) => {
            let expand = expands(params, &["payment_intent", "line_items"])?;
            let s = state
                .sessions
                .get(id)
                .ok_or_else(|| ApiError::no_such("checkout.session", id, "id", 404))?;
            Ok(state.session_json(s, base, &expand))
        }
        Route::ExpireSession(id) => {
            let expand = expands(params, &["payment_intent", "line_items"])?;
            let i = state
                .sessions
                .pos(id)
                .ok_or_else(|| ApiError::no_such("checkout.session", id, "id", 404))?;
            let status = state.sessions.rows[i].status;
            if status != SessionStatus::Open {
                return Err(ApiError::invalid(format!(
                    "Only Checkout Sessions with a status in [\"open\"] can be expired. This \
                     Checkout Session has a status of `{}`.",
                    status.as_str()
                )));
            }
            state.sessions.rows[i].status = SessionStatus::Expired;
            let obj = state.session_json(&state.sessions.rows[i], base, &[]);
            state.emit("checkout.session.expired", obj, None, origin, now);
            Ok(state.session_json(&state.sessions.rows[i], base, &expand))
        }
        Route::RetrieveIntent(id) => {
            let expand = expands(params, &["latest_charge"])?;
            let p = state
                .intents
                .get(id)
                .ok_or_else(|| ApiError::no_such("payment_intent", id, "intent", 404))?;
            Ok(state.intent_json(p, &expand))
        }
        Route::CreateRefund => {
            expands(params, &[])?;
            state.create_refund(params, origin, now)
        }
        Route::RetrieveRefund(id) => {
            expands(params, &[])?;
            let r = state
                .refunds
                .get(id)
                .ok_or_else(|| ApiError::no_such("refund", id, "id", 404))?;
            Ok(state.refund_json(r))
        }
        Route::ListEvents => {
            expands(params, &[])?;
            state.list_events(params, now)
        }
        Route::RetrieveEvent(id) => {
            expands(params, &[])?;
            match state.events.get(id) {
                Some(e) if e.created >= now - super::state::EVENT_RETENTION_S => {
                    Ok(state.event_json(e))
                }
                _ => Err(ApiError::no_such("event", id, "id", 404)),
            }
        }
    }
}

/// `POST /v1/checkout/sessions` (<https://docs.stripe.com/api/checkout/sessions/create>) at
/// 2024-06-20, `payment` mode, `hosted` UI.
fn create_session(
    state: &mut State,
    p: &Value,
    now: i64,
    base_url: &str,
) -> Result<Value, ApiError> {
    if p["mode"] != "payment" {
        return Err(ApiError::invalid(format!(
            "The seckill Stripe sandbox plays Checkout in `payment` mode only, not `{}`.",
            p["mode"].as_str().unwrap_or("")
        ))
        .with_param("mode"));
    }
    if p["ui_mode"] == "embedded" {
        return Err(ApiError::unmodelled("ui_mode"));
    }
    // "The URL to which Stripe should send customers when payment or setup is complete. This
    // parameter is not allowed if ui_mode is `embedded`": required for the hosted page.
    let Some(success_url) = p["success_url"].as_str() else {
        return Err(ApiError::missing("success_url"));
    };
    let items = p["line_items"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        return Err(ApiError::missing("line_items"));
    }
    let expand = expands(p, &["payment_intent", "line_items"])?;
    let mut line_items = Vec::new();
    let mut currency: Option<String> = None;
    let mut total: i64 = 0;
    for (i, item) in items.iter().enumerate() {
        let at = |name: &str| format!("line_items[{i}][{name}]");
        if let Some(price) = item["price"].as_str() {
            if !item["price_data"].is_null() {
                return Err(ApiError::invalid(
                    "You may only specify one of these parameters: price, price_data.",
                )
                .with_param(at("price")));
            }
            return Err(ApiError::no_such("price", price, &at("price"), 400));
        }
        let pd = &item["price_data"];
        if !pd.is_object() {
            return Err(ApiError::missing(&at("price_data")));
        }
        let pd_at = |name: &str| format!("line_items[{i}][price_data][{name}]");
        if !pd["recurring"].is_null() {
            return Err(ApiError::invalid(
                "You specified `payment` mode but passed a recurring price. Either switch to \
                 `subscription` mode or use only one-time prices.",
            )
            .with_param(pd_at("recurring")));
        }
        if let Some(product) = pd["product"].as_str() {
            if !pd["product_data"].is_null() {
                return Err(ApiError::invalid(
                    "You may only specify one of these parameters: product, product_data.",
                )
                .with_param(pd_at("product")));
            }
            return Err(ApiError::no_such(
                "product",
                product,
                &pd_at("product"),
                400,
            ));
        }
        let Some(name) = pd["product_data"]["name"].as_str() else {
            return Err(ApiError::missing(&pd_at("product_data")));
        };
        let Some(unit_amount) = pd["unit_amount"].as_i64() else {
            return Err(ApiError::missing(&pd_at("unit_amount")));
        };
        let Some(quantity) = item["quantity"].as_i64() else {
            return Err(ApiError::missing(&at("quantity")));
        };
        let cur = pd["currency"].as_str().unwrap_or_default().to_owned();
        match &currency {
            Some(c) if *c != cur => {
                return Err(ApiError::invalid(format!(
                    "All line items must have the same currency: line_items[0] is in {c}, \
                     line_items[{i}] in {cur}."
                ))
                .with_param(pd_at("currency")));
            }
            _ => currency = Some(cur.clone()),
        }
        total = unit_amount
            .checked_mul(quantity)
            .and_then(|a| total.checked_add(a))
            .unwrap_or(i64::MAX);
        line_items.push(super::state::LineItem {
            id: new_id("li_", 24),
            price_id: new_id("price_", 24),
            product_id: new_id("prod_", 14),
            name: name.to_owned(),
            description: pd["product_data"]["description"]
                .as_str()
                .map(str::to_owned),
            unit_amount,
            quantity,
            currency: cur,
        });
    }
    let currency = currency.expect("at least one line item");
    if let Some(c) = p["currency"].as_str()
        && c != currency
    {
        return Err(ApiError::invalid(format!(
            "`currency` ({c}) must match the line items' currency ({currency})."
        ))
        .with_param("currency"));
    }
    // Stripe's ceiling: eight digits in the currency's minor unit.
    if total > 99_999_999 {
        return Err(ApiError::invalid(format!(
            "Amount must be no more than {}",
            super::state::format_amount(99_999_999, &currency, false)
        ))
        .with_code("amount_too_large")
        .with_param("line_items"));
    }
    // "It can be anywhere from 30 minutes to 24 hours after Checkout Session creation. By
    // default, this value is 24 hours from creation."
    let expires_at = match p["expires_at"].as_i64() {
        None => now + 24 * 3600,
        Some(t) if t - now < 30 * 60 => {
            return Err(ApiError::invalid(
                "The `expires_at` timestamp must be at least 30 minutes from Checkout Session \
                 creation.",
            )
            .with_param("expires_at"));
        }
        Some(t) if t - now > 24 * 3600 => {
            return Err(ApiError::invalid(
                "The `expires_at` timestamp must be less than 24 hours from Checkout Session \
                 creation.",
            )
            .with_param("expires_at"));
        }
        Some(t) => t,
    };
    let pid = &p["payment_intent_data"];
    let id = new_id("cs_test_", 58);
    let session = Session {
        id: id.clone(),
        created: now,
        expires_at,
        status: SessionStatus::Open,
        paid: false,
        currency,
        amount_total: total,
        line_items,
        success_url: success_url.to_owned(),
        cancel_url: p["cancel_url"].as_str().map(str::to_owned),
        client_reference_id: p["client_reference_id"].as_str().map(str::to_owned),
        customer_email: p["customer_email"].as_str().map(str::to_owned),
        locale: p["locale"].as_str().map(str::to_owned),
        metadata: metadata_of(p),
        pi_metadata: metadata_of(pid),
        pi_description: pid["description"].as_str().map(str::to_owned),
        receipt_email: pid["receipt_email"].as_str().map(str::to_owned),
        payment_method_types: p["payment_method_types"]
            .as_array()
            .filter(|a| !a.is_empty())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_else(|| vec!["card".to_owned()]),
        submit_type: p["submit_type"].as_str().map(str::to_owned),
        payment_intent: None,
    };
    let json = state.session_json(&session, base_url, &expand);
    state.sessions.insert(id, session);
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_keys_as_stripe_quotes_them() {
        assert_eq!(mask("sk_test_abcdefgh1234"), "sk_test_********1234");
        assert_eq!(mask("rk_test_ab"), "rk_test_ab");
    }

    #[test]
    fn versions() {
        assert!(valid_version("2024-06-20"));
        assert!(valid_version("2024-10-28.acacia"));
        assert!(!valid_version("latest"));
        assert!(!valid_version("2024-6-20"));
    }

    #[test]
    fn routes() {
        let get = hyper::Method::GET;
        let post = hyper::Method::POST;
        assert_eq!(
            route(&post, "/v1/checkout/sessions/cs_1/expire"),
            Some(Route::ExpireSession("cs_1".into()))
        );
        assert_eq!(route(&get, "/v1/refunds"), None);
        assert_eq!(route(&get, "/v1/events"), Some(Route::ListEvents));
    }
}
