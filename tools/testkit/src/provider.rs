//! The payment provider's side, as Stripe documents it: a charge for the amount and currency
//! the storefront hands over, then a `payment_intent.succeeded` event POSTed to the endpoint,
//! signed in the `Stripe-Signature` scheme (`t=<unix s>,v1=<hex HMAC-SHA256 of "t.body">`, one
//! `v1` per active secret during a rotation), redelivered with exponential backoff until a 2xx,
//! each attempt signed anew with its own timestamp. Stripe spreads its retries over three days;
//! this provider compresses them to [`Provider::retries`] attempts over seconds. It shares no
//! code with the app: a bug in our verification cannot hide behind the same bug here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

/// The webhook signing secret the test apps are configured with.
pub const PAYMENT_WEBHOOK_SECRET: &str = "whsec_test_seckill";

/// A payment provider delivering to one webhook endpoint.
#[derive(Debug)]
pub struct Provider {
    http: reqwest::Client,
    endpoint: String,
    secrets: Vec<String>,
    retries: u32,
    first_backoff: Duration,
}

/// Ids unique across providers and processes: the clock at start, then a count.
fn next_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static EPOCH: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    let epoch = EPOCH.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    });
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{epoch:x}{:x}{n:08x}", std::process::id())
}

/// One delivery attempt's answer.
#[derive(Debug, Clone)]
pub struct Delivered {
    /// The endpoint's status.
    pub status: u16,
    /// Its JSON body (`null` when it was not JSON).
    pub body: Value,
    /// Attempts it took.
    pub attempts: u32,
}

/// Unix seconds now.
pub fn unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `Stripe-Signature` for `body` at `t` under `secrets` (several during a rotation).
pub fn signature(secrets: &[impl AsRef<str>], t: u64, body: &str) -> String {
    let mut header = format!("t={t}");
    for secret in secrets {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret.as_ref().as_bytes()).expect("HMAC takes any key");
        mac.update(format!("{t}.{body}").as_bytes());
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        header.push_str(&format!(",v1={hex}"));
    }
    header
}

impl Provider {
    /// A provider signing with `secret`, delivering to `endpoint` (`…/api/payments/webhook`).
    pub fn new(http: reqwest::Client, endpoint: impl Into<String>, secret: &str) -> Self {
        Provider {
            http,
            endpoint: endpoint.into(),
            secrets: vec![secret.to_owned()],
            retries: 8,
            first_backoff: Duration::from_millis(200),
        }
    }

    /// The same provider during a rotation of its signing secret: it signs with all of them.
    pub fn signing_with(mut self, secrets: &[&str]) -> Self {
        self.secrets = secrets.iter().map(|s| s.to_string()).collect();
        self
    }

    /// At most `attempts` deliveries of an event, the first waits `first_backoff`, doubling.
    pub fn retries(mut self, attempts: u32, first_backoff: Duration) -> Self {
        self.retries = attempts.max(1);
        self.first_backoff = first_backoff;
        self
    }

    /// A new `payment_intent.succeeded` event for `amount` `currency`, with the metadata the
    /// storefront handed over (`payment_id`): its id and its body.
    pub fn succeeded_event(
        &self,
        payment_id: &str,
        amount: i64,
        currency: &str,
    ) -> (String, String) {
        let id = next_id();
        let event_id = format!("evt_{id}");
        let body = json!({
            "id": event_id,
            "object": "event",
            "api_version": "2024-06-20",
            "created": unix_s(),
            "livemode": false,
            "type": "payment_intent.succeeded",
            "data": { "object": {
                "id": format!("pi_{id}"),
                "object": "payment_intent",
                "amount": amount,
                "amount_received": amount,
                "currency": currency,
                "status": "succeeded",
                "metadata": { "payment_id": payment_id },
            }},
        });
        (event_id, body.to_string())
    }

    /// Charges what the pay route answered (`payment_id`, `amount`, `currency`) and delivers
    /// the confirmation until the endpoint takes it.
    pub async fn pay(&self, payment: &Value) -> Result<Delivered> {
        self.pay_via(payment, |body, header| async move {
            self.post(&body, &header).await
        })
        .await
    }

    /// [`Provider::pay`], each delivery attempt POSTed by `post` (called with the body and its
    /// `Stripe-Signature`, answering the status and the JSON body) instead of this provider's
    /// own client: for a caller that measures every delivery (the demo's recorder).
    pub async fn pay_via<F, Fut>(&self, payment: &Value, post: F) -> Result<Delivered>
    where
        F: Fn(String, String) -> Fut,
        Fut: Future<Output = Result<(u16, Value)>>,
    {
        let id = payment["payment_id"].as_str().context("no payment_id")?;
        let amount = payment["amount"].as_i64().context("no amount")?;
        let currency = payment["currency"].as_str().context("no currency")?;
        let (_, body) = self.succeeded_event(id, amount, currency);
        self.deliver_via(&body, post).await
    }

    /// Delivers `body` as Stripe does: signed at each attempt, again after a non-2xx or no
    /// answer, with exponential backoff, at most [`Provider::retries`] times.
    pub async fn deliver(&self, body: &str) -> Result<Delivered> {
        self.deliver_via(body, |body, header| async move {
            self.post(&body, &header).await
        })
        .await
    }

    /// [`Provider::deliver`], each attempt POSTed by `post` (see [`Provider::pay_via`]).
    pub async fn deliver_via<F, Fut>(&self, body: &str, post: F) -> Result<Delivered>
    where
        F: Fn(String, String) -> Fut,
        Fut: Future<Output = Result<(u16, Value)>>,
    {
        let mut backoff = self.first_backoff;
        let mut last = None;
        for attempt in 1..=self.retries {
            let header = signature(&self.secrets, unix_s(), body);
            match post(body.to_owned(), header).await {
                Ok((status, json)) if (200..300).contains(&status) => {
                    return Ok(Delivered {
                        status,
                        body: json,
                        attempts: attempt,
                    });
                }
                Ok((status, json)) => {
                    last = Some(Delivered {
                        status,
                        body: json,
                        attempts: attempt,
                    })
                }
                Err(_) => {}
            }
            if attempt < self.retries {
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
        }
        last.context("the endpoint never answered")
    }

    /// One attempt: `body` signed at `t` (a stale `t` is how a replay looks).
    pub async fn attempt(&self, body: &str, t: u64) -> Result<(u16, Value)> {
        let header = signature(&self.secrets, t, body);
        self.post(body, &header).await
    }

    /// POSTs `body` with `header` as its `Stripe-Signature`, as it is (for forged ones).
    pub async fn post(&self, body: &str, header: &str) -> Result<(u16, Value)> {
        let resp = self
            .http
            .post(&self.endpoint)
            .header("content-type", "application/json; charset=utf-8")
            .header("stripe-signature", header)
            .header(
                "user-agent",
                "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
            )
            .body(body.to_owned())
            .timeout(Duration::from_secs(30))
            .send()
            .await?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await?;
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }
}
