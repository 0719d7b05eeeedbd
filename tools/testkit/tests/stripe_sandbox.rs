//! The Stripe sandbox, driven over HTTP as a client following Stripe's API reference would:
//! form-encoded bodies with bracket notation, `Authorization: Bearer`, `Idempotency-Key`,
//! `Stripe-Version`; webhooks checked with an HMAC computed here, not with the kit's signer.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper::Response;
use hyper_util::rt::TokioIo;
use seckill_testkit::stripe::{
    ApiKey, Permission, RESTRICTED_KEY, RefundBehaviour, RefundOutcome, RetryPolicy, SECRET_KEY,
    SandboxConfig, StripeSandbox, WebhookFilter,
};
use serde_json::Value;
use sha2::Sha256;

const VERSION: &str = "2024-06-20";

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client")
}

fn form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// An answer: status, headers, JSON body.
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

async fn send(req: reqwest::RequestBuilder) -> Answer {
    let resp = req.send().await.expect("the sandbox answers");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.json().await.unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
    }
}

/// `POST {path}` with `pairs` form-encoded, the secret key, the pinned version and
/// `idempotency_key` if any.
async fn post(
    stripe: &StripeSandbox,
    path: &str,
    pairs: &[(&str, &str)],
    idempotency_key: Option<&str>,
) -> Answer {
    let mut req = client()
        .post(format!("{}{path}", stripe.url()))
        .bearer_auth(SECRET_KEY)
        .header("stripe-version", VERSION)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(pairs));
    if let Some(k) = idempotency_key {
        req = req.header("idempotency-key", k);
    }
    send(req).await
}

async fn get(stripe: &StripeSandbox, path_and_query: &str) -> Answer {
    send(
        client()
            .get(format!("{}{path_and_query}", stripe.url()))
            .bearer_auth(SECRET_KEY)
            .header("stripe-version", VERSION),
    )
    .await
}

/// A payment-mode session for one phone (19.99 EUR) ×2 and a case (5.00 EUR).
fn session_params(payment_id: &str) -> Vec<(&'static str, String)> {
    vec![
        ("mode", "payment".into()),
        (
            "success_url",
            "https://shop.test/paid?session={CHECKOUT_SESSION_ID}".into(),
        ),
        ("cancel_url", "https://shop.test/cancelled".into()),
        ("line_items[0][price_data][currency]", "eur".into()),
        ("line_items[0][price_data][unit_amount]", "1999".into()),
        (
            "line_items[0][price_data][product_data][name]",
            "Phone".into(),
        ),
        ("line_items[0][quantity]", "2".into()),
        ("line_items[1][price_data][currency]", "eur".into()),
        ("line_items[1][price_data][unit_amount]", "500".into()),
        (
            "line_items[1][price_data][product_data][name]",
            "Case".into(),
        ),
        ("line_items[1][quantity]", "1".into()),
        ("client_reference_id", payment_id.into()),
        ("metadata[payment_id]", payment_id.into()),
        (
            "payment_intent_data[metadata][payment_id]",
            payment_id.into(),
        ),
        ("locale", "fr".into()),
        ("customer_email", "buyer@example.com".into()),
    ]
}

fn pairs<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

async fn create_session(stripe: &StripeSandbox, payment_id: &str) -> Value {
    let params = session_params(payment_id);
    let a = post(stripe, "/v1/checkout/sessions", &pairs(&params), None).await;
    assert_eq!(a.status, 200, "{}", a.body);
    a.body
}

fn error(a: &Answer) -> &Value {
    &a.body["error"]
}

// ---- Checkout Sessions ---------------------------------------------------------------------

#[tokio::test]
async fn stripe_creates_and_retrieves_a_checkout_session() {
    let stripe = StripeSandbox::start().await.unwrap();
    let s = create_session(&stripe, "pay_1").await;
    let id = s["id"].as_str().unwrap();
    assert!(id.starts_with("cs_test_"), "{id}");
    assert_eq!(s["object"], "checkout.session");
    assert_eq!(s["status"], "open");
    assert_eq!(s["payment_status"], "unpaid");
    assert_eq!(s["mode"], "payment");
    assert_eq!(s["amount_total"], 2 * 1999 + 500);
    assert_eq!(s["currency"], "eur");
    assert_eq!(s["payment_intent"], Value::Null);
    assert_eq!(s["livemode"], false);
    assert_eq!(s["metadata"]["payment_id"], "pay_1");
    assert_eq!(s["client_reference_id"], "pay_1");
    assert_eq!(s["locale"], "fr");
    assert_eq!(s["url"], format!("{}/c/pay/{id}", stripe.url()));
    let ttl = s["expires_at"].as_i64().unwrap() - s["created"].as_i64().unwrap();
    assert_eq!(ttl, 24 * 3600, "expires_at defaults to 24 h");
    assert!(
        s.get("line_items").is_none(),
        "line_items only when expanded"
    );

    let got = get(&stripe, &format!("/v1/checkout/sessions/{id}")).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body["id"], id);
    assert!(got.header("request-id").unwrap().starts_with("req_"));
    assert_eq!(got.header("stripe-version"), Some(VERSION));

    let expanded = get(
        &stripe,
        &format!("/v1/checkout/sessions/{id}?expand[]=line_items"),
    )
    .await;
    let items = &expanded.body["line_items"]["data"];
    assert_eq!(items.as_array().unwrap().len(), 2);
    assert_eq!(items[0]["description"], "Phone");
    assert_eq!(items[0]["amount_total"], 3998);

    let missing = get(&stripe, "/v1/checkout/sessions/cs_test_nope").await;
    assert_eq!(missing.status, 404);
    assert_eq!(error(&missing)["code"], "resource_missing");
    assert_eq!(
        error(&missing)["message"],
        "No such checkout.session: 'cs_test_nope'"
    );

    let calls = stripe.calls_to("POST", "/v1/checkout/sessions");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].stripe_version.as_deref(), Some(VERSION));
    assert_eq!(
        calls[0].params["payment_intent_data"]["metadata"]["payment_id"],
        "pay_1"
    );
}

#[tokio::test]
async fn stripe_refuses_what_stripe_refuses_in_a_session() {
    let stripe = StripeSandbox::start().await.unwrap();
    let good = session_params("pay_2");

    let case = |extra: &[(&'static str, &'static str)], drop: &[&str]| {
        let mut v: Vec<(&'static str, String)> = good
            .iter()
            .filter(|(k, _)| !drop.iter().any(|d| k.starts_with(d)))
            .cloned()
            .collect();
        v.extend(extra.iter().map(|(k, x)| (*k, x.to_string())));
        v
    };

    let unknown = case(&[("colour", "red")], &[]);
    let a = post(&stripe, "/v1/checkout/sessions", &pairs(&unknown), None).await;
    assert_eq!(a.status, 400);
    assert_eq!(error(&a)["type"], "invalid_request_error");
    assert_eq!(error(&a)["code"], "parameter_unknown");
    assert_eq!(error(&a)["param"], "colour");
    assert_eq!(error(&a)["message"], "Received unknown parameter: colour");

    let nested = case(&[("line_items[0][price_data][colour]", "red")], &[]);
    let a = post(&stripe, "/v1/checkout/sessions", &pairs(&nested), None).await;
    assert_eq!(error(&a)["param"], "line_items[0][price_data][colour]");

    let no_items = case(&[], &["line_items"]);
    let a = post(&stripe, "/v1/checkout/sessions", &pairs(&no_items), None).await;
    assert_eq!(a.status, 400);
    assert_eq!(error(&a)["code"], "parameter_missing");
    assert_eq!(error(&a)["param"], "line_items");

    let no_mode = case(&[], &["mode"]);
    let a = post(&stripe, "/v1/checkout/sessions", &pairs(&no_mode), None).await;
    assert_eq!(error(&a)["code"], "parameter_missing");
    assert_eq!(error(&a)["param"], "mode");

    let no_quantity = case(&[], &["line_items[1][quantity]"]);
    let a = post(&stripe, "/v1/checkout/sessions", &pairs(&no_quantity), None).await;
    assert_eq!(error(&a)["param"], "line_items[1][quantity]");

    let not_int = case(&[("line_items[0][price_data][unit_amount]", "19.99")], &[]);
    let a = post(&stripe, "/v1/checkout/sessions", &pairs(&not_int), None).await;
    assert_eq!(error(&a)["code"], "parameter_invalid_integer");
    assert_eq!(error(&a)["param"], "line_items[0][price_data][unit_amount]");

    let locale = case(&[("locale", "tlh")], &["locale"]);
    let a = post(&stripe, "/v1/checkout/sessions", &pairs(&locale), None).await;
    assert_eq!(error(&a)["param"], "locale");
    assert!(
        error(&a)["message"]
            .as_str()
            .unwrap()
            .starts_with("Invalid locale: must be one of auto, bg, cs")
    );

    let soon = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600)
        .to_string();
    let mut early = case(&[], &[]);
    early.push(("expires_at", soon));
    let a = post(&stripe, "/v1/checkout/sessions", &pairs(&early), None).await;
    assert_eq!(a.status, 400);
    assert_eq!(error(&a)["param"], "expires_at");

    let recurring = case(
        &[("line_items[0][price_data][recurring][interval]", "month")],
        &[],
    );
    let a = post(&stripe, "/v1/checkout/sessions", &pairs(&recurring), None).await;
    assert_eq!(a.status, 400);
    assert!(
        error(&a)["message"]
            .as_str()
            .unwrap()
            .starts_with("You specified `payment` mode but passed a recurring price.")
    );

    // Documented, not played: refused, never silently ignored.
    let tax = case(&[("automatic_tax[enabled]", "true")], &[]);
    let a = post(&stripe, "/v1/checkout/sessions", &pairs(&tax), None).await;
    assert_eq!(a.status, 400);
    assert_eq!(error(&a)["param"], "automatic_tax");
    assert_eq!(error(&a)["code"], Value::Null);

    // A JSON body is not how Stripe's API takes parameters.
    let a = send(
        client()
            .post(format!("{}/v1/checkout/sessions", stripe.url()))
            .bearer_auth(SECRET_KEY)
            .header("content-type", "application/json")
            .body(r#"{"mode":"payment"}"#),
    )
    .await;
    assert_eq!(a.status, 400);

    // Refused parameters are not stored under an idempotency key: fixed, the same key runs.
    let a = post(
        &stripe,
        "/v1/checkout/sessions",
        &pairs(&unknown),
        Some("key-400"),
    )
    .await;
    assert_eq!(a.status, 400);
    let a = post(
        &stripe,
        "/v1/checkout/sessions",
        &pairs(&good),
        Some("key-400"),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(stripe.sessions().len(), 1);
}

#[tokio::test]
async fn stripe_authenticates_like_stripe() {
    let stripe = StripeSandbox::start_with(SandboxConfig {
        keys: vec![
            ApiKey::secret(SECRET_KEY),
            ApiKey::restricted(RESTRICTED_KEY, &[Permission::CheckoutSessionsWrite]),
            ApiKey::restricted("rk_test_eventsonly0000000000", &[Permission::EventsRead]),
        ],
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let body = form(&pairs(&session_params("pay_3")));
    let attempt = |key: Option<&'static str>| {
        let mut req = client()
            .post(format!("{}/v1/checkout/sessions", stripe.url()))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.clone());
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        send(req)
    };

    let a = attempt(None).await;
    assert_eq!(a.status, 401);
    assert_eq!(error(&a)["type"], "invalid_request_error");
    assert!(
        error(&a)["message"]
            .as_str()
            .unwrap()
            .starts_with("You did not provide an API key")
    );

    let a = attempt(Some("sk_test_wrongwrongwrong1234")).await;
    assert_eq!(a.status, 401);
    assert_eq!(
        error(&a)["message"],
        "Invalid API Key provided: sk_test_***************1234"
    );

    let a = attempt(Some("rk_test_eventsonly0000000000")).await;
    assert_eq!(a.status, 403);
    assert!(
        error(&a)["message"]
            .as_str()
            .unwrap()
            .contains("Having the 'rak_checkout_session_write' permission")
    );

    // Write implies read.
    let a = attempt(Some(RESTRICTED_KEY)).await;
    assert_eq!(a.status, 200, "{}", a.body);
    let id = a.body["id"].as_str().unwrap();
    let a = send(
        client()
            .get(format!("{}/v1/checkout/sessions/{id}", stripe.url()))
            .bearer_auth(RESTRICTED_KEY),
    )
    .await;
    assert_eq!(a.status, 200);
    // …but nothing else.
    let a = send(
        client()
            .get(format!("{}/v1/events", stripe.url()))
            .bearer_auth(RESTRICTED_KEY),
    )
    .await;
    assert_eq!(a.status, 403);

    // Basic auth with the key as user name, as `curl -u sk_test_…:` sends it.
    let a = send(
        client()
            .get(format!("{}/v1/events", stripe.url()))
            .basic_auth(SECRET_KEY, Some("")),
    )
    .await;
    assert_eq!(a.status, 200);
    // No Stripe-Version: the account's version answers.
    assert_eq!(a.header("stripe-version"), Some(VERSION));

    let a = send(
        client()
            .get(format!("{}/v1/events", stripe.url()))
            .bearer_auth(SECRET_KEY)
            .header("stripe-version", "latest"),
    )
    .await;
    assert_eq!(a.status, 400);
}

// ---- idempotency, rate limits, injected failures -------------------------------------------

#[tokio::test]
async fn stripe_replays_an_idempotent_request_and_refuses_a_conflicting_one() {
    let stripe = StripeSandbox::start().await.unwrap();
    let params = session_params("pay_4");
    let first = post(
        &stripe,
        "/v1/checkout/sessions",
        &pairs(&params),
        Some("order-4"),
    )
    .await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("idempotent-replayed"), None);

    // Same key, same parameters (in another order): the first answer, replayed.
    let mut shuffled = params.clone();
    shuffled.reverse();
    let again = post(
        &stripe,
        "/v1/checkout/sessions",
        &pairs(&shuffled),
        Some("order-4"),
    )
    .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, first.body);
    assert_eq!(stripe.sessions().len(), 1);

    // Same key, other parameters.
    let mut other = params.clone();
    other.push(("metadata[extra]", "1".into()));
    let conflict = post(
        &stripe,
        "/v1/checkout/sessions",
        &pairs(&other),
        Some("order-4"),
    )
    .await;
    assert_eq!(conflict.status, 400);
    assert_eq!(error(&conflict)["type"], "idempotency_error");
    assert!(
        error(&conflict)["message"]
            .as_str()
            .unwrap()
            .starts_with("Keys for idempotent requests can only be used with the same parameters")
    );

    // Same key, another endpoint.
    let id = first.body["id"].as_str().unwrap();
    let elsewhere = post(
        &stripe,
        &format!("/v1/checkout/sessions/{id}/expire"),
        &[],
        Some("order-4"),
    )
    .await;
    assert_eq!(error(&elsewhere)["type"], "idempotency_error");

    // Kept 24 hours.
    stripe.advance_clock(Duration::from_secs(24 * 3600 + 1));
    let later = post(
        &stripe,
        "/v1/checkout/sessions",
        &pairs(&params),
        Some("order-4"),
    )
    .await;
    assert_eq!(later.status, 200);
    assert_eq!(later.header("idempotent-replayed"), None);
    assert_ne!(later.body["id"], first.body["id"]);
    assert_eq!(stripe.sessions().len(), 2);
}

#[tokio::test]
async fn stripe_rate_limits_on_demand() {
    let stripe = StripeSandbox::start().await.unwrap();
    let params = session_params("pay_5");
    stripe.rate_limit_next(2);
    for _ in 0..2 {
        let a = post(
            &stripe,
            "/v1/checkout/sessions",
            &pairs(&params),
            Some("rl-5"),
        )
        .await;
        assert_eq!(a.status, 429);
        assert_eq!(error(&a)["code"], "rate_limit");
        assert_eq!(error(&a)["type"], "invalid_request_error");
        assert_eq!(a.header("stripe-rate-limited-reason"), Some("global-rate"));
        assert_eq!(a.header("stripe-should-retry"), None);
    }
    // A 429 is not stored for the key: the retry runs.
    let a = post(
        &stripe,
        "/v1/checkout/sessions",
        &pairs(&params),
        Some("rl-5"),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("idempotent-replayed"), None);

    stripe.rate_limit_share(Some(0.5));
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(get(&stripe, "/v1/events").await.status);
    }
    stripe.rate_limit_share(None);
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        3,
        "{statuses:?}"
    );

    stripe.rate_limit_per_second(Some(2));
    let mut limited = 0;
    for _ in 0..5 {
        if get(&stripe, "/v1/events").await.status == 429 {
            limited += 1;
        }
    }
    stripe.rate_limit_per_second(None);
    assert!(
        limited >= 1,
        "a budget of 2/s refuses some of 5 quick requests"
    );

    stripe.lock_timeout_next(1);
    let a = get(&stripe, "/v1/events").await;
    assert_eq!(a.status, 429);
    assert_eq!(error(&a)["code"], "lock_timeout");
    assert_eq!(a.header("stripe-should-retry"), Some("true"));
    assert_eq!(get(&stripe, "/v1/events").await.status, 200);
}

#[tokio::test]
async fn stripe_lost_responses_and_server_errors_meet_the_idempotency_layer() {
    let stripe = StripeSandbox::start().await.unwrap();
    let params = session_params("pay_6");

    // The session is created, the answer lost: the retry with the key gets it.
    stripe.lose_next_responses(1);
    let lost = client()
        .post(format!("{}/v1/checkout/sessions", stripe.url()))
        .bearer_auth(SECRET_KEY)
        .header("idempotency-key", "lost-6")
        .body(form(&pairs(&params)))
        .send()
        .await;
    assert!(lost.is_err(), "the connection closes unanswered");
    assert_eq!(stripe.sessions().len(), 1);
    let retry = post(
        &stripe,
        "/v1/checkout/sessions",
        &pairs(&params),
        Some("lost-6"),
    )
    .await;
    assert_eq!(retry.status, 200);
    assert_eq!(retry.header("idempotent-replayed"), Some("true"));
    assert_eq!(stripe.sessions().len(), 1);

    // A 500 is kept for its key too.
    stripe.server_error_next(1);
    let a = post(
        &stripe,
        "/v1/checkout/sessions",
        &pairs(&params),
        Some("err-6"),
    )
    .await;
    assert_eq!(a.status, 500);
    assert_eq!(error(&a)["type"], "api_error");
    assert_eq!(a.header("stripe-should-retry"), Some("false"));
    let a = post(
        &stripe,
        "/v1/checkout/sessions",
        &pairs(&params),
        Some("err-6"),
    )
    .await;
    assert_eq!(a.status, 500);
    assert_eq!(a.header("idempotent-replayed"), Some("true"));
    let a = post(
        &stripe,
        "/v1/checkout/sessions",
        &pairs(&params),
        Some("err-6b"),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(stripe.sessions().len(), 2);
}

// ---- the hosted page -----------------------------------------------------------------------

#[tokio::test]
async fn stripe_hosted_page_charges_the_stored_amount() {
    let stripe = StripeSandbox::start().await.unwrap();
    let s = create_session(&stripe, "pay_7").await;
    let id = s["id"].as_str().unwrap().to_owned();
    let url = s["url"].as_str().unwrap().to_owned();

    let page = client().get(&url).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("44,98 EUR"),
        "the session's total, in French: {html}"
    );
    assert!(html.contains("Payer"), "{html}");
    assert!(html.contains("id=pay"));
    assert!(
        html.contains("href=\"https://shop.test/cancelled\">Retour"),
        "{html}"
    );

    // The form carries another amount: nobody reads it.
    let paid = client()
        .post(&url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("amount=1&currency=usd&payment_id=pay_7")
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 303);
    assert_eq!(
        paid.headers()["location"],
        format!("https://shop.test/paid?session={id}").as_str()
    );

    let intents = stripe.payment_intents();
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0].amount, 4498);
    assert_eq!(intents[0].currency, "eur");
    assert_eq!(intents[0].metadata["payment_id"], "pay_7");
    assert_eq!(intents[0].session.as_deref(), Some(id.as_str()));

    let s = get(
        &stripe,
        &format!("/v1/checkout/sessions/{id}?expand[]=payment_intent"),
    )
    .await
    .body;
    assert_eq!(s["status"], "complete");
    assert_eq!(s["payment_status"], "paid");
    assert_eq!(s["url"], Value::Null);
    let pi = &s["payment_intent"];
    assert_eq!(pi["id"], intents[0].id.as_str());
    assert_eq!(pi["status"], "succeeded");
    assert_eq!(pi["amount_received"], 4498);
    assert_eq!(pi["metadata"]["payment_id"], "pay_7");
    assert!(pi["latest_charge"].as_str().unwrap().starts_with("ch_"));

    let pi = get(&stripe, &format!("/v1/payment_intents/{}", intents[0].id)).await;
    assert_eq!(pi.status, 200);
    assert_eq!(pi.body["object"], "payment_intent");
    assert_eq!(pi.body["amount"], 4498);

    // Pressing Pay again charges nothing more.
    let again = client().post(&url).send().await.unwrap();
    assert_eq!(again.status(), 303);
    assert_eq!(stripe.payment_intents().len(), 1);
    assert!(stripe.pay(&id).is_err());

    let kinds: Vec<String> = stripe
        .events()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "payment_intent.created",
            "charge.succeeded",
            "payment_intent.succeeded",
            "checkout.session.completed"
        ]
    );
}

#[tokio::test]
async fn stripe_expired_session_cannot_be_paid() {
    let stripe = StripeSandbox::start().await.unwrap();
    let s = create_session(&stripe, "pay_8").await;
    let id = s["id"].as_str().unwrap().to_owned();
    let url = s["url"].as_str().unwrap().to_owned();

    let expired = post(
        &stripe,
        &format!("/v1/checkout/sessions/{id}/expire"),
        &[],
        None,
    )
    .await;
    assert_eq!(expired.status, 200);
    assert_eq!(expired.body["status"], "expired");
    assert_eq!(expired.body["url"], Value::Null);

    let page = client().get(&url).send().await.unwrap();
    assert_eq!(page.status(), 410);
    let paid = client().post(&url).send().await.unwrap();
    assert_eq!(paid.status(), 410);
    assert!(stripe.payment_intents().is_empty());
    assert!(stripe.pay(&id).is_err());

    let twice = post(
        &stripe,
        &format!("/v1/checkout/sessions/{id}/expire"),
        &[],
        None,
    )
    .await;
    assert_eq!(twice.status, 400);
    assert_eq!(
        error(&twice)["message"],
        "Only Checkout Sessions with a status in [\"open\"] can be expired. This Checkout \
         Session has a status of `expired`."
    );

    // A completed session cannot be expired either.
    let done = create_session(&stripe, "pay_8b").await;
    let done_id = done["id"].as_str().unwrap();
    stripe.pay(done_id).unwrap();
    let a = post(
        &stripe,
        &format!("/v1/checkout/sessions/{done_id}/expire"),
        &[],
        None,
    )
    .await;
    assert_eq!(a.status, 400);
    assert!(
        error(&a)["message"]
            .as_str()
            .unwrap()
            .contains("`complete`")
    );

    // Sessions expire by themselves at expires_at.
    let third = create_session(&stripe, "pay_8c").await;
    let third_id = third["id"].as_str().unwrap();
    stripe.advance_clock(Duration::from_secs(24 * 3600));
    assert_eq!(stripe.session(third_id).unwrap().status, "expired");
    let expiries = stripe
        .events()
        .into_iter()
        .filter(|e| e["type"] == "checkout.session.expired")
        .count();
    assert_eq!(expiries, 2, "the API's expiry and the clock's");
}

// ---- refunds -------------------------------------------------------------------------------

async fn paid_intent(stripe: &StripeSandbox, payment_id: &str) -> String {
    let s = create_session(stripe, payment_id).await;
    stripe.pay(s["id"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn stripe_refunds_and_refuses_an_over_refund() {
    let stripe = StripeSandbox::start().await.unwrap();
    let pi = paid_intent(&stripe, "pay_9").await; // 44.98 EUR

    let r = post(
        &stripe,
        "/v1/refunds",
        &[
            ("payment_intent", pi.as_str()),
            ("amount", "1000"),
            ("reason", "requested_by_customer"),
            ("metadata[payment_id]", "pay_9"),
        ],
        Some("refund-9a"),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body["id"].as_str().unwrap().starts_with("re_"));
    assert_eq!(r.body["object"], "refund");
    assert_eq!(r.body["status"], "succeeded");
    assert_eq!(r.body["amount"], 1000);
    assert_eq!(r.body["payment_intent"], pi.as_str());
    assert_eq!(r.body["metadata"]["payment_id"], "pay_9");

    let too_much = post(
        &stripe,
        "/v1/refunds",
        &[("payment_intent", pi.as_str()), ("amount", "4000")],
        None,
    )
    .await;
    assert_eq!(too_much.status, 400);
    assert_eq!(error(&too_much)["code"], "amount_too_large");
    assert_eq!(
        error(&too_much)["message"],
        "Refund amount (40.00 EUR) is greater than unrefunded amount on charge (34.98 EUR)"
    );

    let bad_reason = post(
        &stripe,
        "/v1/refunds",
        &[("payment_intent", pi.as_str()), ("reason", "changed_mind")],
        None,
    )
    .await;
    assert_eq!(error(&bad_reason)["param"], "reason");

    // No amount: what is left.
    let rest = post(
        &stripe,
        "/v1/refunds",
        &[("payment_intent", pi.as_str())],
        None,
    )
    .await;
    assert_eq!(rest.status, 200);
    assert_eq!(rest.body["amount"], 3498);

    let again = post(
        &stripe,
        "/v1/refunds",
        &[("payment_intent", pi.as_str())],
        None,
    )
    .await;
    assert_eq!(again.status, 400);
    assert_eq!(error(&again)["code"], "charge_already_refunded");

    let nothing = post(&stripe, "/v1/refunds", &[("amount", "1")], None).await;
    assert_eq!(error(&nothing)["code"], "parameter_missing");
    let nobody = post(
        &stripe,
        "/v1/refunds",
        &[("payment_intent", "pi_nope")],
        None,
    )
    .await;
    assert_eq!(nobody.status, 400);
    assert_eq!(error(&nobody)["code"], "resource_missing");

    let id = r.body["id"].as_str().unwrap();
    let got = get(&stripe, &format!("/v1/refunds/{id}")).await;
    assert_eq!(got.body["amount"], 1000);

    let intents = stripe.payment_intents();
    assert_eq!(intents[0].amount_refunded, 4498);
    assert_eq!(stripe.refunds().len(), 2);
    let refunded_events: Vec<Value> = stripe
        .events()
        .into_iter()
        .filter(|e| e["type"] == "charge.refunded")
        .collect();
    assert_eq!(refunded_events.len(), 2);
    assert_eq!(refunded_events[1]["data"]["object"]["refunded"], true);
    assert_eq!(
        refunded_events[1]["data"]["object"]["amount_refunded"],
        4498
    );
    assert_eq!(
        refunded_events[0]["request"]["idempotency_key"],
        "refund-9a"
    );
    // 2024-06-20 sends refund.* only for refunds without a charge.
    assert!(
        !stripe
            .events()
            .iter()
            .any(|e| e["type"] == "refund.created")
    );
}

#[tokio::test]
async fn stripe_pending_and_failed_refunds_settle_later() {
    let stripe = StripeSandbox::start_with(SandboxConfig {
        refunds: RefundBehaviour::Pending {
            settle_after: Duration::from_millis(150),
            outcome: RefundOutcome::Succeeded,
        },
        api_version: "2024-10-28.acacia".into(),
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let pi = paid_intent(&stripe, "pay_10").await;

    let r = post(
        &stripe,
        "/v1/refunds",
        &[("payment_intent", pi.as_str()), ("amount", "500")],
        None,
    )
    .await;
    assert_eq!(r.body["status"], "pending");
    stripe.fail_next_refunds(1, "expired_or_canceled_card");
    let f = post(
        &stripe,
        "/v1/refunds",
        &[("payment_intent", pi.as_str()), ("amount", "700")],
        None,
    )
    .await;
    assert_eq!(f.body["status"], "pending");
    assert_eq!(stripe.payment_intents()[0].amount_refunded, 1200);

    tokio::time::sleep(Duration::from_millis(600)).await;
    let refunds = stripe.refunds();
    assert_eq!(refunds[0].status, "succeeded");
    assert_eq!(refunds[1].status, "failed");
    assert_eq!(
        refunds[1].failure_reason.as_deref(),
        Some("expired_or_canceled_card")
    );
    // The failed refund's money is refundable again.
    assert_eq!(stripe.payment_intents()[0].amount_refunded, 500);

    let kinds: Vec<String> = stripe
        .events()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .filter(|k| k.contains("refund"))
        .collect();
    for k in [
        "charge.refunded",
        "refund.created",
        "charge.refund.updated",
        "refund.updated",
        "refund.failed",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k} in {kinds:?}");
    }
}

// ---- events --------------------------------------------------------------------------------

#[tokio::test]
async fn stripe_lists_events_newest_first_across_pages() {
    let stripe = StripeSandbox::start().await.unwrap();
    for i in 0..3 {
        paid_intent(&stripe, &format!("pay_11_{i}")).await; // 4 events each
    }
    let all = stripe.events();
    assert_eq!(all.len(), 12);
    let newest_first: Vec<String> = all
        .iter()
        .rev()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("/v1/events?limit=5&starting_after={c}"),
            None => "/v1/events?limit=5".to_owned(),
        };
        let page = get(&stripe, &q).await.body;
        assert_eq!(page["object"], "list");
        assert_eq!(page["url"], "/v1/events");
        let data = page["data"].as_array().unwrap();
        for e in data {
            assert_eq!(e["object"], "event");
            assert_eq!(e["api_version"], VERSION);
            assert_eq!(e["livemode"], false);
            seen.push(e["id"].as_str().unwrap().to_owned());
        }
        if page["has_more"] == false {
            break;
        }
        cursor = Some(seen.last().unwrap().clone());
    }
    assert_eq!(seen, newest_first);

    // ending_before: the page just newer than the cursor, still newest first.
    let before = get(
        &stripe,
        &format!("/v1/events?limit=2&ending_before={}", newest_first[5]),
    )
    .await
    .body;
    let ids: Vec<&str> = before["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [newest_first[3].as_str(), newest_first[4].as_str()]);
    assert_eq!(before["has_more"], true);

    let default = get(&stripe, "/v1/events").await.body;
    assert_eq!(default["data"].as_array().unwrap().len(), 10);

    let typed = get(
        &stripe,
        "/v1/events?types[]=checkout.session.completed&types[]=charge.succeeded&limit=100",
    )
    .await
    .body;
    let data = typed["data"].as_array().unwrap();
    assert_eq!(data.len(), 6);
    assert!(
        data.iter()
            .all(|e| e["type"] == "checkout.session.completed" || e["type"] == "charge.succeeded")
    );

    let wildcard = get(&stripe, "/v1/events?type=payment_intent.*&limit=100")
        .await
        .body;
    assert_eq!(wildcard["data"].as_array().unwrap().len(), 6);

    let created = all[0]["created"].as_i64().unwrap();
    let bounded = get(
        &stripe,
        &format!("/v1/events?created[gte]={created}&created[lte]={created}&limit=100"),
    )
    .await
    .body;
    assert!(!bounded["data"].as_array().unwrap().is_empty());

    let both = get(
        &stripe,
        "/v1/events?type=charge.succeeded&types[]=charge.succeeded",
    )
    .await;
    assert_eq!(both.status, 400);
    let limit = get(&stripe, "/v1/events?limit=101").await;
    assert_eq!(error(&limit)["param"], "limit");
    let many: String = (0..21).map(|i| format!("types[]=t{i}&")).collect();
    let a = get(&stripe, &format!("/v1/events?{many}")).await;
    assert_eq!(a.status, 400);
    let unknown = get(&stripe, "/v1/events?starting_after=evt_nope").await;
    assert_eq!(error(&unknown)["code"], "resource_missing");

    // Kept 30 days.
    stripe.advance_clock(Duration::from_secs(31 * 24 * 3600));
    let old = get(&stripe, "/v1/events").await.body;
    assert!(old["data"].as_array().unwrap().is_empty());
}

// ---- webhooks ------------------------------------------------------------------------------

/// A webhook endpoint: it answers the scripted statuses in turn (200 once they run out) and
/// keeps what it received.
struct Receiver {
    url: String,
    got: Arc<Mutex<Vec<(String, String)>>>,
    _task: tokio::task::JoinHandle<()>,
}

async fn receiver(script: &[u16]) -> Receiver {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/webhook", listener.local_addr().unwrap());
    let got: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let script = Arc::new(Mutex::new(
        script.iter().copied().collect::<VecDeque<u16>>(),
    ));
    let (got2, script2) = (got.clone(), script.clone());
    let task = tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (got, script) = (got2.clone(), script2.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let (got, script) = (got.clone(), script.clone());
                        async move {
                            let sig = req
                                .headers()
                                .get("stripe-signature")
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("")
                                .to_owned();
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            got.lock()
                                .unwrap()
                                .push((sig, String::from_utf8_lossy(&body).into_owned()));
                            let status = script.lock().unwrap().pop_front().unwrap_or(200);
                            Ok::<_, Infallible>(
                                Response::builder()
                                    .status(status)
                                    .body(Full::new(Bytes::from_static(b"{}")))
                                    .unwrap(),
                            )
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Receiver {
        url,
        got,
        _task: task,
    }
}

/// Stripe's documented check, written out here: `v1` = hex HMAC-SHA256 of `"{t}.{body}"`.
fn signed_by(header: &str, body: &str, secret: &str) -> bool {
    let t = header
        .split(',')
        .find_map(|kv| kv.strip_prefix("t="))
        .expect("a timestamp");
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(t.as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    let expected: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    header
        .split(',')
        .filter_map(|kv| kv.strip_prefix("v1="))
        .any(|v| v == expected)
}

fn quick_retries() -> SandboxConfig {
    SandboxConfig {
        retry: RetryPolicy {
            attempts: 4,
            first_backoff: Duration::from_millis(50),
            timeout: Duration::from_secs(5),
        },
        ..SandboxConfig::default()
    }
}

#[tokio::test]
async fn stripe_webhook_signatures_verify() {
    let stripe = StripeSandbox::start().await.unwrap();
    let hook = receiver(&[]).await;
    stripe.add_webhook_endpoint(
        &hook.url,
        &["whsec_old_secret", "whsec_new_secret"],
        &["payment_intent.succeeded", "checkout.session.completed"],
    );
    let s = create_session(&stripe, "pay_12").await;
    stripe.pay(s["id"].as_str().unwrap()).unwrap();
    stripe
        .settle_webhooks(Duration::from_secs(10))
        .await
        .unwrap();

    let got = hook.got.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "only the enabled events");
    for (sig, body) in &got {
        assert!(signed_by(sig, body, "whsec_old_secret"), "{sig}");
        assert!(signed_by(sig, body, "whsec_new_secret"), "{sig}");
        assert!(!signed_by(sig, body, "whsec_other"));
        let t: i64 = sig.split(',').next().unwrap()[2..].parse().unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!((now - t).abs() < 60, "signed with the wall clock");
    }
    let pi_event: Value = got
        .iter()
        .map(|(_, b)| serde_json::from_str::<Value>(b).unwrap())
        .find(|e| e["type"] == "payment_intent.succeeded")
        .unwrap();
    assert_eq!(
        pi_event["data"]["object"]["metadata"]["payment_id"],
        "pay_12"
    );
    assert_eq!(pi_event["data"]["object"]["amount"], 4498);
    assert_eq!(pi_event["api_version"], VERSION);

    let stats = stripe.webhook_stats();
    assert_eq!(stats.delivered, 2);
    assert_eq!(stats.failed_attempts, 0);
    // Delivered events have no pending webhooks left.
    let listed = get(&stripe, "/v1/events?type=payment_intent.succeeded")
        .await
        .body;
    assert_eq!(listed["data"][0]["pending_webhooks"], 0);
}

#[tokio::test]
async fn stripe_redelivers_after_a_500() {
    let stripe = StripeSandbox::start_with(quick_retries()).await.unwrap();
    let hook = receiver(&[500, 503]).await;
    stripe.add_webhook_endpoint(
        &hook.url,
        &["whsec_test_seckill"],
        &["payment_intent.succeeded"],
    );
    paid_intent(&stripe, "pay_13").await;
    stripe
        .settle_webhooks(Duration::from_secs(10))
        .await
        .unwrap();

    let got = hook.got.lock().unwrap().clone();
    assert_eq!(got.len(), 3);
    let ids: Vec<String> = got
        .iter()
        .map(|(_, b)| {
            serde_json::from_str::<Value>(b).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "the same event, redelivered"
    );
    assert!(
        got.iter()
            .all(|(sig, body)| signed_by(sig, body, "whsec_test_seckill"))
    );

    let stats = stripe.webhook_stats();
    assert_eq!(stats.delivered, 1);
    assert_eq!(stats.attempts, 3);
    assert_eq!(stats.failed_attempts, 2);
    assert_eq!(stats.retries, 2);
    assert_eq!(stats.retried, 1);
    assert_eq!(stats.failed_statuses.get("500"), Some(&1));
    assert_eq!(stats.failed_statuses.get("503"), Some(&1));
    assert_eq!(stats.pending, 0);

    // An endpoint that never answers 2xx: every attempt, then given up.
    let down = receiver(&[500; 20]).await;
    stripe.add_webhook_endpoint(&down.url, &["whsec_test_seckill"], &["*"]);
    stripe.charge_outside_checkout(100, "eur", &[("payment_id", "x")]);
    stripe
        .settle_webhooks(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(
        stripe.webhook_stats().exhausted,
        3,
        "three events, four attempts each"
    );
}

#[tokio::test]
async fn stripe_holds_back_and_loses_webhooks_on_demand() {
    let stripe = StripeSandbox::start_with(quick_retries()).await.unwrap();
    let hook = receiver(&[]).await;
    stripe.add_webhook_endpoint(&hook.url, &["whsec_test_seckill"], &["*"]);

    stripe.hold_webhooks(WebhookFilter::Types(vec!["payment_intent.*".into()]));
    paid_intent(&stripe, "pay_14").await;
    stripe
        .settle_webhooks(Duration::from_secs(10))
        .await
        .unwrap();
    let stats = stripe.webhook_stats();
    assert_eq!((stats.delivered, stats.held), (2, 2));
    let held = get(&stripe, "/v1/events?delivery_success=false").await.body;
    assert_eq!(held["data"].as_array().unwrap().len(), 2);

    stripe.release_webhooks();
    stripe
        .settle_webhooks(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(stripe.webhook_stats().delivered, 4);
    assert_eq!(hook.got.lock().unwrap().len(), 4);

    // Lost: never delivered, still in the Events API for a backstop to find.
    let s = create_session(&stripe, "pay_14b").await;
    stripe
        .pay_without_webhooks(s["id"].as_str().unwrap())
        .unwrap();
    stripe
        .settle_webhooks(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(stripe.webhook_stats().dropped, 4);
    assert_eq!(hook.got.lock().unwrap().len(), 4);
    let undelivered = get(
        &stripe,
        "/v1/events?delivery_success=false&type=checkout.session.completed",
    )
    .await
    .body;
    let data = undelivered["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(
        data[0]["data"]["object"]["metadata"]["payment_id"],
        "pay_14b"
    );
    assert_eq!(data[0]["pending_webhooks"], 1);

    stripe.hold_webhooks_for(WebhookFilter::All, Duration::from_millis(200));
    stripe.charge_outside_checkout(100, "eur", &[]);
    assert_eq!(stripe.webhook_stats().held, 3);
    tokio::time::sleep(Duration::from_millis(400)).await;
    stripe
        .settle_webhooks(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(stripe.webhook_stats().held, 0);
}

#[tokio::test]
async fn stripe_payments_outside_a_session_name_our_metadata() {
    let stripe = StripeSandbox::start().await.unwrap();
    let s = create_session(&stripe, "pay_15").await;
    let id = s["id"].as_str().unwrap();
    let first = stripe.pay(id).unwrap();
    let second = stripe.charge_again(id, Some(123)).unwrap();
    let outside = stripe.charge_outside_checkout(999, "EUR", &[("payment_id", "pay_15")]);
    let intents = stripe.payment_intents();
    assert_eq!(intents.len(), 3);
    assert_eq!(
        intents.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        [first.as_str(), second.as_str(), outside.as_str()]
    );
    assert_eq!(intents[1].amount, 123);
    assert_eq!(intents[1].session, None);
    assert!(intents.iter().all(|p| p.metadata["payment_id"] == "pay_15"));
    assert_eq!(
        stripe.session(id).unwrap().payment_intent.as_deref(),
        Some(first.as_str())
    );
    let succeeded = get(&stripe, "/v1/events?type=payment_intent.succeeded")
        .await
        .body;
    assert_eq!(succeeded["data"].as_array().unwrap().len(), 3);
    assert_eq!(succeeded["data"][0]["data"]["object"]["currency"], "eur");
    assert_eq!(succeeded["data"][0]["request"]["id"], Value::Null);
}
