//! The faces people use, served from assets embedded in this component (no CDN, no fonts):
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/` | the landing page: the live and upcoming sales, the console (HTML) |
//! | GET | `/shop`, `/shop/{event_id}` | the storefront (HTML, `no-cache` with an `ETag`) |
//! | GET | `/console` | the operator console (HTML; the admin token stays in the browser) |
//! | GET | `/shop/assets/{name}.{hash}.{ext}` | CSS and JS, named by content hash: `immutable` |
//! | GET | `/shop/events` | the live and upcoming sales, their public fields only (JSON; cacheable for seconds, with an `ETag`) |
//! | GET | `/shop/events/{event_id}` | what a buyer may know of an event (JSON, one script run; cacheable for a second, with an `ETag`) |
//! | POST | `/shop/demo-login` | a 30-minute buyer JWT for any name, only when the `settings` variable says `demo_login=true` |
//! | GET | `/shop/demo-login` | whether the demo login is on |
//!
//! Every page and asset is gzipped at build time and sent so when the client accepts gzip.

use seckill_domain::auth::{self, Claims};
use seckill_domain::error::ErrorCode;
use seckill_domain::event::EventId;
use seckill_domain::{clock, registry, sale};
use seckill_spin_edge::config;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, json_body};
use seckill_spin_edge::store;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use spin_sdk::http::{IncomingRequest, Method, Request, Response};
use spin_sdk::http_component;

/// An embedded file and how to serve it.
pub struct Asset {
    /// Its path (hashed assets only; pages are routed by name).
    pub path: &'static str,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// A strong `ETag` (the content hash, quoted).
    pub etag: &'static str,
    /// Whether its name changes with its content (so it may be cached forever).
    pub immutable: bool,
    /// The bytes.
    pub raw: &'static [u8],
    /// The bytes, gzipped.
    pub gzip: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// Lifetime of a demo login's token.
const DEMO_TOKEN_S: u64 = 30 * 60;

/// Only what the pages load may run or connect: our own origin, nothing else (the worker that
/// solves the admission's proof of work included).
const CSP: &str = "default-src 'none'; script-src 'self'; worker-src 'self'; style-src 'self'; \
                   img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// Route, serve.
#[http_component]
async fn handle(req: IncomingRequest) -> Response {
    http::serve(req, answer).await
}

/// The request, its body read within the limit.
fn answer(req: Request) -> Response {
    let path = req.path().trim_end_matches('/').to_owned();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let result = match segments.as_slice() {
        [] => get(&req, &INDEX),
        ["shop", "demo-login"] => return http::respond(200, demo_login(&req)),
        ["shop", "events"] => event_list(&req),
        ["shop", "events", id] => event_info(&req, id),
        ["shop", "assets", _] => match ASSETS.iter().find(|a| a.path == path) {
            Some(asset) => get(&req, asset),
            None => Err(ApiError::not_found(format!("no asset {path}"))),
        },
        ["shop"] | ["shop", _] => get(&req, &SHOP),
        ["console"] => get(&req, &CONSOLE),
        _ => Err(ApiError::not_found(format!("no page {path}"))),
    };
    result.unwrap_or_else(|e| http::error(&e))
}

/// A GET (or HEAD) of an embedded file: `304` when the client holds it, gzipped when it takes
/// gzip.
fn get(req: &Request, asset: &Asset) -> Result<Response, ApiError> {
    let head = is_head(req)?;
    let header = |name: &str| header(req, name);
    let cache = if asset.immutable {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let mut resp = Response::builder();
    resp.header("cache-control", cache)
        .header("etag", asset.etag)
        .header("vary", "accept-encoding")
        .header("x-content-type-options", "nosniff");
    if !asset.immutable {
        resp.header("content-security-policy", CSP)
            .header("referrer-policy", "no-referrer");
    }
    if holds(req, asset.etag) {
        return Ok(resp.status(304).body(Vec::new()).build());
    }
    resp.status(200).header("content-type", asset.content_type);
    let body = if accepts_gzip(header("accept-encoding")) {
        resp.header("content-encoding", "gzip");
        asset.gzip
    } else {
        asset.raw
    };
    Ok(resp
        .body(if head { Vec::new() } else { body.to_vec() })
        .build())
}

/// Whether the request is a `HEAD` (answered without a body) rather than a `GET`; any other
/// method is refused.
fn is_head(req: &Request) -> Result<bool, ApiError> {
    match req.method() {
        Method::Get => Ok(false),
        Method::Head => Ok(true),
        _ => Err(ApiError::method_not_allowed("GET, HEAD")),
    }
}

/// A request header's value, or "".
fn header<'a>(req: &'a Request, name: &str) -> &'a str {
    req.header(name).and_then(|v| v.as_str()).unwrap_or("")
}

/// Whether the client's `If-None-Match` names `etag` (or is `*`): it holds the current body,
/// so the answer is a `304`. RFC 9110 §13.1.2 compares weakly: a `W/` prefix still matches.
fn holds(req: &Request, etag: &str) -> bool {
    header(req, "if-none-match").split(',').any(|tag| {
        let tag = tag.trim();
        tag == "*" || tag.trim_start_matches("W/") == etag
    })
}

/// Whether an `Accept-Encoding` value takes gzip (`gzip;q=0` refuses it).
fn accepts_gzip(accept: &str) -> bool {
    accept.split(',').any(|coding| {
        let mut parts = coding.split(';').map(str::trim);
        let named = parts.next().is_some_and(|c| c.eq_ignore_ascii_case("gzip"));
        let q = |p: &str| p.replace(' ', "").strip_prefix("q=")?.parse::<f32>().ok();
        named && !parts.any(|p| q(p) == Some(0.0))
    })
}

/// The demo login's body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DemoLogin {
    /// Any user name (a buyer id: printable ASCII, no spaces, 1–128 bytes).
    user: String,
}

/// `POST /shop/demo-login`: a buyer JWT for any name, so a person can try a sale locally. Off
/// (`404 demo_login_off`) unless the `settings` variable says `demo_login=true`: anyone could be anyone.
/// `GET` tells the storefront whether to offer it.
fn demo_login(req: &Request) -> Result<Value, ApiError> {
    let enabled = config::Settings::read()?.demo_login;
    match req.method() {
        Method::Get => return Ok(json!({ "enabled": enabled })),
        Method::Post => {}
        _ => return Err(ApiError::method_not_allowed("GET, POST")),
    }
    if !enabled {
        return Err(ApiError::new(
            ErrorCode::DemoLoginOff,
            "the demo login is off (the settings variable does not say demo_login=true)",
        ));
    }
    let DemoLogin { user } = json_body(req)?;
    if auth::check_user_id(&user).is_err() {
        return Err(ApiError::new(
            ErrorCode::BadUserId,
            "a user name is 1-128 printable ASCII characters without spaces",
        ));
    }
    let exp = clock::now_ms() / 1000 + DEMO_TOKEN_S;
    let claims = Claims {
        sub: user.clone(),
        exp: Some(exp),
        nbf: None,
    };
    let token = auth::sign_jwt(&claims, config::get(config::JWT_SECRET)?.as_bytes());
    Ok(json!({ "token": token, "user": user, "expires_at_ms": exp * 1000 }))
}

/// How long a shared cache (the CDN) or the browser may reuse an event's info without asking,
/// and how much longer it may serve it stale while it asks. Every buyer refreshing once a second
/// then costs the origin about one revalidation per cache per second, and a buyer sees units
/// left at most about three seconds late; the countdown and the opening run on `/api/time`
/// and the event's own times, which move only when an operator moves them.
const EVENT_INFO_CACHE: &str = "public, max-age=1, stale-while-revalidate=2";

/// `GET /shop/events/{event_id}` (and `HEAD`): the public part of an event's state, for the
/// storefront's countdown, its price, its admission gate and its "left" figure. One cheap
/// read-only script run (`event_info.lua`). Cacheable for a second ([`EVENT_INFO_CACHE`]), with
/// a strong `ETag` (a hash of the exact body), so a cache revalidates with `If-None-Match` and
/// hears `304` with no body while nothing changed. Errors stay `no-store`
/// ([`http::error`]): a 503 must not outlive the failure, and a 404 not the event's creation.
fn event_info(req: &Request, id: &str) -> Result<Response, ApiError> {
    let head = is_head(req)?;
    let event = EventId::parse(id)?;
    let info = sale::event_info(&store::nodes()?, &event)?;
    // Plain strings, numbers and flags: serialising cannot fail.
    let mut body = json!(info);
    body["event_id"] = json!(event.as_str());
    let bytes = serde_json::to_vec(&body).map_err(ApiError::internal)?;
    let etag = strong_etag(&bytes);
    let mut resp = Response::builder();
    resp.header("cache-control", EVENT_INFO_CACHE)
        .header("etag", etag.as_str());
    if holds(req, &etag) {
        return Ok(resp.status(304).body(Vec::new()).build());
    }
    resp.status(200).header("content-type", "application/json");
    Ok(resp.body(if head { Vec::new() } else { bytes }).build())
}

/// How long a cache may reuse the list of sales, and serve it stale while it asks again: each
/// miss reads every registered event, so it is kept longer than one event's info; a sale that
/// opens shows as live on the landing page at most this late (its storefront follows the
/// server's clock, not this list).
const EVENT_LIST_CACHE: &str = "public, max-age=5, stale-while-revalidate=10";

/// The most sales the list names (live ones first, then the soonest to open).
const MAX_LISTED: usize = 100;

/// A sale as the landing page lists it: only what its storefront shows anyone
/// (`GET /shop/events/{event_id}`), never the operators' view (archive flags, counters,
/// switches, limits).
#[derive(Serialize)]
struct PublicEvent {
    event_id: String,
    state: SaleState,
    sku: String,
    start_ms: u64,
    end_ms: u64,
    unit_amount: u64,
    currency: String,
    sold_out: bool,
}

/// Where a listed sale stands on this function's clock; live ones are listed first.
#[derive(Serialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
enum SaleState {
    /// Started, not ended.
    Live,
    /// Not started.
    Upcoming,
}

/// `GET /shop/events` (and `HEAD`): the sales a person can go to now or soon, for the landing
/// page ([`registry::open_sales`]: not archived, not ended), live ones first (by end), then
/// upcoming ones (by start), at most [`MAX_LISTED`]. One read-only script per Redis node (its
/// registry) and one per event (`event_info.lua`, as the storefront reads it). Cacheable for
/// seconds ([`EVENT_LIST_CACHE`]) with a strong `ETag`; errors `no-store`.
fn event_list(req: &Request) -> Result<Response, ApiError> {
    let head = is_head(req)?;
    let now = clock::now_ms();
    let mut events: Vec<PublicEvent> = registry::open_sales(&store::nodes()?, now)?
        .into_iter()
        .map(|(event, info)| PublicEvent {
            event_id: event.as_str().to_owned(),
            state: match info.start_ms <= now {
                true => SaleState::Live,
                false => SaleState::Upcoming,
            },
            sku: info.sku,
            start_ms: info.start_ms,
            end_ms: info.end_ms,
            unit_amount: info.unit_amount,
            currency: info.currency,
            sold_out: info.sold_out,
        })
        .collect();
    events.sort_by_key(|e| {
        let when = match e.state {
            SaleState::Live => e.end_ms,
            SaleState::Upcoming => e.start_ms,
        };
        (e.state, when, e.event_id.clone())
    });
    events.truncate(MAX_LISTED);
    let bytes = serde_json::to_vec(&json!({ "events": events })).map_err(ApiError::internal)?;
    let etag = strong_etag(&bytes);
    let mut resp = Response::builder();
    resp.header("cache-control", EVENT_LIST_CACHE)
        .header("etag", etag.as_str());
    if holds(req, &etag) {
        return Ok(resp.status(304).body(Vec::new()).build());
    }
    resp.status(200).header("content-type", "application/json");
    Ok(resp.body(if head { Vec::new() } else { bytes }).build())
}

/// A strong `ETag` of `body`: the first 128 bits of its SHA-256, quoted.
fn strong_etag(body: &[u8]) -> String {
    use sha2::Digest as _;
    let hex: String = sha2::Sha256::digest(body)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("\"{hex}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_taken_unless_refused() {
        assert!(accepts_gzip("gzip, deflate, br"));
        assert!(accepts_gzip("br;q=1.0, GZIP;q=0.5"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("gzip; q=0.0, br"));
        assert!(!accepts_gzip("identity"));
        assert!(!accepts_gzip(""));
    }

    #[test]
    fn pages_name_their_assets_by_hash() {
        let page = |asset: &Asset| std::str::from_utf8(asset.raw).unwrap().to_owned();
        // Each page and the files it loads (by the name `web/` gives them).
        let pages = [
            (
                page(&INDEX),
                &["style", "i18n-en", "i18n-zh-CN", "common", "index"][..],
            ),
            (
                page(&SHOP),
                &[
                    "style",
                    "i18n-en",
                    "i18n-zh-CN",
                    "common",
                    "shop",
                    "pow-worker",
                ][..],
            ),
            (
                page(&CONSOLE),
                &[
                    "style",
                    "i18n-en",
                    "i18n-zh-CN",
                    "common",
                    "console",
                    "conditions",
                ][..],
            ),
        ];
        for asset in ASSETS {
            let file = asset.path.trim_start_matches("/shop/assets/");
            let stem = file.split('.').next().unwrap();
            let mut named = false;
            for (html, loads) in &pages {
                assert_eq!(
                    html.contains(asset.path),
                    loads.contains(&stem),
                    "{stem} in a page that loads {loads:?}"
                );
                named |= loads.contains(&stem);
            }
            assert!(named, "no page loads {}", asset.path);
        }
        assert!(
            ASSETS
                .iter()
                .all(|a| a.immutable && a.gzip.len() < a.raw.len())
        );
    }

    /// The catalogues (`web/i18n/{language}.json`) by language, from their served names.
    fn catalogues() -> Vec<(&'static str, serde_json::Map<String, Value>)> {
        ASSETS
            .iter()
            .filter_map(|a| {
                let name = a.path.strip_prefix("/shop/assets/i18n-")?;
                let language = name.strip_suffix(".json")?.rsplit_once('.')?.0;
                let Ok(Value::Object(strings)) = serde_json::from_slice(a.raw) else {
                    panic!("{}: not a JSON object", a.path);
                };
                Some((language, strings))
            })
            .collect()
    }

    /// The `{name}` placeholders of a catalogue entry (every plural form's).
    fn placeholders(entry: &Value) -> std::collections::BTreeSet<String> {
        let forms: Vec<&str> = match entry {
            Value::String(s) => vec![s],
            Value::Object(forms) => forms.values().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        forms
            .iter()
            .flat_map(|s| s.split('{').skip(1))
            .filter_map(|rest| Some(rest.split_once('}')?.0.to_owned()))
            .collect()
    }

    /// The catalogue keys a text names: a quoted `namespace.name` (`t('shop.buy')`,
    /// `data-i18n="shop.buy"`).
    fn keys_named(text: &str) -> Vec<String> {
        const NAMESPACES: &[&str] = &[
            "lang.",
            "common.",
            "index.",
            "shop.",
            "console.",
            "conditions.",
            "error.",
        ];
        let mut keys = Vec::new();
        for (at, quote) in text.match_indices(['\'', '"']) {
            let rest = &text[at + 1..];
            if !NAMESPACES.iter().any(|ns| rest.starts_with(ns)) {
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .unwrap_or(rest.len());
            if rest[end..].starts_with(quote) {
                keys.push(rest[..end].to_owned());
            }
        }
        keys
    }

    /// Every string the pages show is in each language's catalogue, under the same keys with
    /// the same placeholders; every key a page or script names is in them, and every key in
    /// them is named by one, or is the message of an error code: one for each code the API
    /// answers ([`ErrorCode::ALL`]) and the pages' own (`network`: no answer; `worker_failed`:
    /// the proof of work could not run). Each language opens the provider's checkout in it.
    #[test]
    fn every_language_has_every_string_the_pages_use_and_every_error_codes_message() {
        let catalogues = catalogues();
        let languages: Vec<&str> = catalogues.iter().map(|(l, _)| *l).collect();
        assert_eq!(languages, ["en", "zh-CN"]);
        let (_, english) = &catalogues[0];
        for (language, strings) in &catalogues {
            for key in english.keys() {
                assert!(strings.contains_key(key), "{language} lacks {key}");
            }
            for (key, entry) in strings {
                let theirs = english.get(key);
                assert!(theirs.is_some(), "{key} is in {language} only");
                assert_eq!(
                    placeholders(entry),
                    placeholders(theirs.unwrap()),
                    "{language} {key}: placeholders"
                );
                let plural_ok = entry.as_object().is_none_or(|forms| {
                    forms.contains_key("other") && forms.values().all(Value::is_string)
                });
                assert!(entry.is_string() || entry.is_object(), "{language} {key}");
                assert!(plural_ok, "{language} {key}: plural forms need `other`");
            }
            let page = |asset: &Asset| std::str::from_utf8(asset.raw).unwrap().to_owned();
            for html in [page(&INDEX), page(&SHOP), page(&CONSOLE)] {
                let meta = format!("<meta name=\"catalogue\" lang=\"{language}\"");
                assert!(html.contains(&meta), "a page does not name {language}");
            }
            assert!(
                seckill_domain::checkout::CheckoutLocale::parse(language).is_ok(),
                "the pay route does not take {language}"
            );
        }
        let mut named = std::collections::BTreeSet::new();
        let texts = ASSETS
            .iter()
            .filter(|a| a.content_type.starts_with("text/javascript"))
            .chain([&INDEX, &SHOP, &CONSOLE]);
        for asset in texts {
            for key in keys_named(std::str::from_utf8(asset.raw).unwrap()) {
                assert!(english.contains_key(&key), "{key} is in no catalogue");
                named.insert(key);
            }
        }
        let codes: Vec<String> = ErrorCode::ALL
            .iter()
            .map(|c| c.as_str())
            .chain(["network", "worker_failed"])
            .map(|code| format!("error.{code}"))
            .collect();
        for code in &codes {
            assert!(english.contains_key(code), "no message for {code}");
        }
        for key in english.keys() {
            assert!(
                named.contains(key) || codes.contains(key),
                "{key} is used by no page"
            );
        }
    }
}
