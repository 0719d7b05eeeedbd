//! An in-process Stripe sandbox: Stripe's side of a Checkout integration, played over HTTP on
//! a loopback port as Stripe's API reference documents it, for the app's pay route (creates a
//! Checkout Session), its timeout-release job (expires sessions), its refund job (Refunds
//! API), its backstop job (Events API), and its webhook endpoint. It shares no code with the
//! app (`crates/domain`, `crates/spin-edge`, `functions/`): a misreading of Stripe's docs in
//! the app cannot hide behind the same misreading here.
//!
//! Pinned version: **2024-06-20** ([`API_VERSION`]), the `api_version` of the events
//! [`crate::Provider`] signs. Requests may send any well-formed `Stripe-Version`; it is
//! recorded per call ([`Call::stripe_version`]) and echoed, and objects keep the configured
//! version's shape. [`SandboxConfig::api_version`] may name a later version: the only
//! difference played is 2024-10-28.acacia's `refund.*` events.
//!
//! | Endpoint | Doc page | Here |
//! |---|---|---|
//! | `POST /v1/checkout/sessions` | [Create a Checkout Session](https://docs.stripe.com/api/checkout/sessions/create) | `payment` mode, `price_data` line items, hosted UI |
//! | `GET /v1/checkout/sessions/:id` | [Retrieve a Checkout Session](https://docs.stripe.com/api/checkout/sessions/retrieve) | `expand[]=payment_intent`, `expand[]=line_items` |
//! | `POST /v1/checkout/sessions/:id/expire` | [Expire a Checkout Session](https://docs.stripe.com/api/checkout/sessions/expire) | `open` only, else 400 |
//! | `GET /v1/payment_intents/:id` | [Retrieve a PaymentIntent](https://docs.stripe.com/api/payment_intents/retrieve) | `expand[]=latest_charge` |
//! | `POST /v1/refunds` | [Create a refund](https://docs.stripe.com/api/refunds/create) | by `payment_intent` or `charge` |
//! | `GET /v1/refunds/:id` | [Retrieve a refund](https://docs.stripe.com/api/refunds/retrieve) | |
//! | `GET /v1/events` | [List all events](https://docs.stripe.com/api/events/list) | cursors, `type` wildcards, `types[]`, `created`, `delivery_success`, 30 days |
//! | `GET /v1/events/:id` | [Retrieve an event](https://docs.stripe.com/api/events/retrieve) | |
//! | `GET`/`POST /c/pay/:session` | the hosted Checkout page | charges the stored amount |
//! | `GET /dashboard`, `POST /dashboard/sessions/:id/charge_again` | the Dashboard in test mode | sessions, payments, refunds; a second payment for a paid session |
//!
//! Across endpoints: [Authentication](https://docs.stripe.com/api/authentication) and
//! [restricted keys](https://docs.stripe.com/keys#limit-access), [Errors](https://docs.stripe.com/api/errors)
//! and [Error codes](https://docs.stripe.com/error-codes), [Idempotent requests](https://docs.stripe.com/api/idempotent_requests)
//! and [Advanced error handling](https://docs.stripe.com/error-low-level), [Rate limits](https://docs.stripe.com/rate-limits),
//! [Pagination](https://docs.stripe.com/api/pagination), [Versioning](https://docs.stripe.com/api/versioning),
//! [Metadata](https://docs.stripe.com/api/metadata), [Webhooks](https://docs.stripe.com/webhooks)
//! (signatures, retries). Each module says which rule it takes from where:
//! `config` (keys, permissions, retries), `form` (encoding), `schema` (documented parameters),
//! `api` (the request pipeline), `state` (objects, events, calls), `hosted` (the page),
//! `webhooks` (what a delivery is), `sandbox` (the shared state and the delivery tasks).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use seckill_testkit::stripe::{StripeSandbox, SECRET_KEY};
//! let stripe = StripeSandbox::start().await?;
//! stripe.add_webhook_endpoint("http://127.0.0.1:3000/api/payments/webhook",
//!     &[seckill_testkit::PAYMENT_WEBHOOK_SECRET], &["*"]);
//! // The app is configured with `stripe.url()` as its API base and `SECRET_KEY`.
//! let session_id = "cs_test_…"; // what the app's pay route created
//! let pi = stripe.pay(session_id)?; // as the buyer pressing Pay
//! stripe.settle_webhooks(std::time::Duration::from_secs(10)).await?;
//! # Ok(()) }
//! ```

mod api;
mod config;
mod dashboard;
mod error;
mod form;
mod hosted;
mod ids;
mod sandbox;
mod schema;
mod state;
mod webhooks;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;

pub use config::{
    ACCOUNT_ID, API_VERSION, ApiKey, Permission, RESTRICTED_KEY, RefundBehaviour, RefundOutcome,
    RetryPolicy, SECRET_KEY, SandboxConfig, WebhookFilter,
};
pub use state::Call;
pub use webhooks::{Attempt, DeliveryState};

use ids::Clock;
use sandbox::Inner;
use state::{Origin, SessionStatus, State, Unpayable};

/// A Checkout Session, for assertions.
#[derive(Debug, Clone)]
pub struct SessionView {
    pub id: String,
    /// `open`, `complete`, `expired`.
    pub status: &'static str,
    /// `unpaid`, `paid`.
    pub payment_status: &'static str,
    pub amount_total: i64,
    pub currency: String,
    pub metadata: BTreeMap<String, String>,
    pub payment_intent_metadata: BTreeMap<String, String>,
    pub client_reference_id: Option<String>,
    pub payment_intent: Option<String>,
    pub expires_at: i64,
    pub url: String,
}

/// A PaymentIntent and its charge's refunds, for assertions.
#[derive(Debug, Clone)]
pub struct PaymentView {
    pub id: String,
    pub charge: String,
    pub amount: i64,
    pub currency: String,
    /// Refunded so far, pending refunds included, failed ones not (`charge.amount_refunded`).
    pub amount_refunded: i64,
    pub metadata: BTreeMap<String, String>,
    /// The Checkout Session it paid, `None` for a payment outside Checkout.
    pub session: Option<String>,
}

/// A refund, for assertions.
#[derive(Debug, Clone)]
pub struct RefundView {
    pub id: String,
    pub payment_intent: String,
    pub charge: String,
    pub amount: i64,
    /// `pending`, `succeeded`, `failed`.
    pub status: &'static str,
    pub reason: Option<String>,
    pub failure_reason: Option<String>,
    pub metadata: BTreeMap<String, String>,
}

/// One event's delivery to one endpoint.
#[derive(Debug, Clone)]
pub struct DeliveryView {
    pub event_id: String,
    pub event_type: String,
    pub endpoint_url: String,
    pub state: DeliveryState,
    pub attempts: Vec<Attempt>,
}

/// Webhook delivery counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookStats {
    /// Deliveries answered with a 2xx.
    pub delivered: usize,
    /// Deliveries queued, in flight or waiting for a retry.
    pub pending: usize,
    /// Deliveries held back.
    pub held: usize,
    /// Deliveries lost on purpose.
    pub dropped: usize,
    /// Deliveries whose attempts all failed.
    pub exhausted: usize,
    /// Attempts made.
    pub attempts: usize,
    /// Attempts not answered with a 2xx.
    pub failed_attempts: usize,
    /// Attempts after a delivery's first.
    pub retries: usize,
    /// Deliveries that took more than one attempt.
    pub retried: usize,
    /// Failed attempts by status (`"500"`, `"no answer"`).
    pub failed_statuses: BTreeMap<String, usize>,
}

fn strings(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The sandbox; it stops (server, deliveries) when dropped.
pub struct StripeSandbox {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StripeSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeSandbox")
            .field("url", &self.inner.base_url)
            .finish()
    }
}

impl Drop for StripeSandbox {
    fn drop(&mut self) {
        for t in self.inner.tasks.lock().expect("sandbox tasks").drain(..) {
            t.abort();
        }
    }
}

impl StripeSandbox {
    /// A sandbox with the default configuration, on a free loopback port.
    pub async fn start() -> Result<Self> {
        Self::start_with(SandboxConfig::default()).await
    }

    /// A sandbox configured by `config`, on a free loopback port.
    pub async fn start_with(config: SandboxConfig) -> Result<Self> {
        Self::start_on(([127, 0, 0, 1], 0).into(), config).await
    }

    /// A sandbox configured by `config`, on `addr`.
    pub async fn start_on(addr: std::net::SocketAddr, config: SandboxConfig) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding the Stripe sandbox to {addr}"))?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let inner = Arc::new(Inner {
            state: Mutex::new(State::new(config.api_version.clone(), config.refunds)),
            clock: Clock::default(),
            base_url,
            keys: config.keys,
            api_version: config.api_version,
            retry: config.retry,
            http: reqwest::Client::new(),
            runtime: tokio::runtime::Handle::current(),
            tasks: Mutex::new(Vec::new()),
        });
        let server = tokio::spawn(api::serve(inner.clone(), listener));
        inner.track(server.abort_handle());
        let sweeper_inner = inner.clone();
        let sweeper = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let now = sweeper_inner.clock.now();
                sweeper_inner
                    .state
                    .lock()
                    .expect("sandbox state")
                    .tick(now, &sweeper_inner.base_url);
                sweeper_inner.flush();
            }
        });
        inner.track(sweeper.abort_handle());
        Ok(StripeSandbox { inner })
    }

    /// `http://127.0.0.1:PORT`: the API base (`…/v1/…`) and the hosted pages' host.
    pub fn url(&self) -> &str {
        &self.inner.base_url
    }

    /// The hosted page of session `id`.
    pub fn checkout_url(&self, id: &str) -> String {
        format!("{}/c/pay/{id}", self.inner.base_url)
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut State, i64) -> T) -> T {
        self.inner.with_state(f)
    }

    // ---- webhook endpoints -----------------------------------------------------------------

    /// Adds a webhook endpoint receiving `enabled_events` (`*` for all), signed with
    /// `secrets`; its id (`we_…`). Events already emitted are not sent to it.
    pub fn add_webhook_endpoint(
        &self,
        url: &str,
        secrets: &[&str],
        enabled_events: &[&str],
    ) -> String {
        let id = ids::new_id("we_", 24);
        self.with_state(|s, _| {
            s.endpoints.push(webhooks::Endpoint {
                id: id.clone(),
                url: url.to_owned(),
                secrets: secrets.iter().map(|x| x.to_string()).collect(),
                enabled_events: enabled_events.iter().map(|x| x.to_string()).collect(),
            })
        });
        id
    }

    /// Replaces an endpoint's signing secrets (a rotation signs with old and new).
    pub fn set_webhook_secrets(&self, endpoint_id: &str, secrets: &[&str]) -> Result<()> {
        self.with_state(|s, _| {
            let e = s
                .endpoints
                .iter_mut()
                .find(|e| e.id == endpoint_id)
                .context("no such webhook endpoint")?;
            e.secrets = secrets.iter().map(|x| x.to_string()).collect();
            Ok(())
        })
    }

    // ---- the buyer's side ------------------------------------------------------------------

    /// Pays session `id` as the buyer pressing Pay on the hosted page: its stored amount, its
    /// events delivered. The PaymentIntent's id.
    pub fn pay(&self, id: &str) -> Result<String> {
        self.pay_inner(id, false)
    }

    /// Pays session `id` but loses every webhook delivery of that payment (the events stay
    /// in the Events API, with `pending_webhooks` > 0).
    pub fn pay_without_webhooks(&self, id: &str) -> Result<String> {
        self.pay_inner(id, true)
    }

    fn pay_inner(&self, id: &str, lose: bool) -> Result<String> {
        let base = self.inner.base_url.clone();
        self.with_state(|s, now| {
            s.drop_webhooks = lose;
            let out = s.complete_session(id, now, &base);
            s.drop_webhooks = false;
            match out {
                Ok(pi) => Ok(pi),
                Err(Unpayable::NoSuchSession) => bail!("no such checkout session {id}"),
                Err(Unpayable::Expired) => bail!("checkout session {id} has expired"),
                Err(Unpayable::AlreadyComplete(pi)) => {
                    bail!("checkout session {id} is already paid by {pi}")
                }
            }
        })
    }

    /// A second, separate payment naming session `id`'s order: a new PaymentIntent with the
    /// session's `payment_intent_data[metadata]`, for `amount` (default the session's), the
    /// session itself untouched — what a buyer paying one order twice, or another
    /// integration, produces.
    pub fn charge_again(&self, id: &str, amount: Option<i64>) -> Result<String> {
        self.with_state(|s, now| s.charge_again(id, amount, now))
            .context("no such checkout session")
    }

    /// A succeeded PaymentIntent outside Checkout (another integration on the same account)
    /// with this `metadata`, and its events.
    pub fn charge_outside_checkout(
        &self,
        amount: i64,
        currency: &str,
        metadata: &[(&str, &str)],
    ) -> String {
        let metadata: serde_json::Map<String, Value> = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect();
        self.with_state(|s, now| {
            s.create_payment(
                state::Payment {
                    amount,
                    currency: currency.to_ascii_lowercase(),
                    metadata: Value::Object(metadata),
                    description: None,
                    receipt_email: None,
                    session: None,
                },
                &Origin::default(),
                now,
            )
        })
    }

    // ---- time ------------------------------------------------------------------------------

    /// Moves the sandbox's clock forward: sessions past `expires_at` expire (with their
    /// `checkout.session.expired`), idempotency keys older than 24 h and events older than
    /// 30 days go. Webhook signatures keep the wall clock.
    pub fn advance_clock(&self, by: Duration) {
        self.inner.clock.advance(by.as_secs() as i64);
        self.with_state(|_, _| ());
    }

    /// Session `id` reaches its `expires_at` now (as if the clock had moved to it, for that
    /// session only).
    pub fn expire_session(&self, id: &str) -> Result<()> {
        self.with_state(|s, now| {
            let i = s.sessions.pos(id).context("no such checkout session")?;
            if s.sessions.rows[i].status != SessionStatus::Open {
                bail!("checkout session {id} is not open");
            }
            s.sessions.rows[i].expires_at = now;
            Ok(())
        })?;
        self.with_state(|_, _| ());
        Ok(())
    }

    // ---- faults ----------------------------------------------------------------------------

    /// The next `n` API requests answer 429 `rate_limit` (`Stripe-Rate-Limited-Reason:
    /// global-rate`).
    pub fn rate_limit_next(&self, n: u32) {
        self.with_state(|s, _| s.faults.rate_limit_next = n);
    }

    /// That share (0..=1) of API requests answers 429, evenly spread; `None` stops it.
    pub fn rate_limit_share(&self, share: Option<f64>) {
        self.with_state(|s, _| {
            s.faults.rate_limit_share = share.map(|x| x.clamp(0.0, 1.0));
            s.faults.share_seen = 0;
        });
    }

    /// At most `budget` API requests per wall-clock second, the rest 429 (Stripe's sandbox
    /// allows 25); `None` lifts it.
    pub fn rate_limit_per_second(&self, budget: Option<u32>) {
        self.with_state(|s, _| {
            s.faults.per_second = budget;
            s.faults.window = (0, 0);
        });
    }

    /// The next `n` API requests answer 429 `lock_timeout` with `Stripe-Should-Retry: true`.
    pub fn lock_timeout_next(&self, n: u32) {
        self.with_state(|s, _| s.faults.lock_timeout_next = n);
    }

    /// The next `n` API requests that pass validation answer 500 `api_error` without doing
    /// anything; like every answer to a request with an idempotency key, it is replayed to
    /// that key.
    pub fn server_error_next(&self, n: u32) {
        self.with_state(|s, _| s.faults.server_error_next = n);
    }

    /// The next `n` API requests that reach an endpoint run, then their connection closes
    /// unanswered (the client sees a network error; a retry with the same idempotency key
    /// gets the stored answer).
    pub fn lose_next_responses(&self, n: u32) {
        self.with_state(|s, _| s.faults.lose_next = n);
    }

    /// The next `n` refunds are created `pending` and then fail with `failure_reason`
    /// (<https://docs.stripe.com/refunds#failed-refunds>: the money returns to the balance,
    /// `charge.refund.updated` is sent). Refund creation itself has no documented
    /// synchronous card failure; for a failing call use [`Self::server_error_next`].
    pub fn fail_next_refunds(&self, n: u32, failure_reason: &str) {
        self.with_state(|s, _| {
            s.faults.fail_refunds_next = n;
            s.faults.fail_refunds_reason = failure_reason.to_owned();
        });
    }

    /// How new refunds behave from now on.
    pub fn set_refund_behaviour(&self, behaviour: RefundBehaviour) {
        self.with_state(|s, _| s.refund_behaviour = behaviour);
    }

    // ---- webhooks --------------------------------------------------------------------------

    /// Holds back deliveries of events matching `filter` (new ones, and pending ones from
    /// their next attempt) until [`Self::release_webhooks`].
    pub fn hold_webhooks(&self, filter: WebhookFilter) {
        self.with_state(|s, _| {
            for d in s.deliveries.iter_mut() {
                let kind = &s.events.rows[d.event].kind;
                if d.state == DeliveryState::Pending && filter.matches(kind) {
                    d.state = DeliveryState::Held;
                }
            }
            s.hold = Some(filter);
        });
    }

    /// Holds back as [`Self::hold_webhooks`], releasing after `duration`.
    pub fn hold_webhooks_for(&self, filter: WebhookFilter, duration: Duration) {
        self.hold_webhooks(filter);
        let inner = self.inner.clone();
        let task = self.inner.runtime.spawn(async move {
            tokio::time::sleep(duration).await;
            release(&inner);
        });
        self.inner.track(task.abort_handle());
    }

    /// Stops holding back and delivers what was held.
    pub fn release_webhooks(&self) {
        release(&self.inner);
    }

    /// The delivery counters.
    pub fn webhook_stats(&self) -> WebhookStats {
        let state = self.inner.state.lock().expect("sandbox state");
        let mut stats = WebhookStats::default();
        for d in &state.deliveries {
            match d.state {
                DeliveryState::Pending => stats.pending += 1,
                DeliveryState::Held => stats.held += 1,
                DeliveryState::Dropped => stats.dropped += 1,
                DeliveryState::Delivered => stats.delivered += 1,
                DeliveryState::Exhausted => stats.exhausted += 1,
            }
            stats.attempts += d.attempts.len();
            stats.retries += d.attempts.len().saturating_sub(1);
            if d.attempts.len() > 1 {
                stats.retried += 1;
            }
            for a in &d.attempts {
                if !a.status.is_some_and(|s| (200..300).contains(&s)) {
                    stats.failed_attempts += 1;
                    let key = a.status.map_or("no answer".to_owned(), |s| s.to_string());
                    *stats.failed_statuses.entry(key).or_default() += 1;
                }
            }
        }
        stats
    }

    /// Every delivery, oldest event first.
    pub fn deliveries(&self) -> Vec<DeliveryView> {
        let state = self.inner.state.lock().expect("sandbox state");
        state
            .deliveries
            .iter()
            .map(|d| {
                let e = &state.events.rows[d.event];
                DeliveryView {
                    event_id: e.id.clone(),
                    event_type: e.kind.clone(),
                    endpoint_url: state.endpoints[d.endpoint].url.clone(),
                    state: d.state,
                    attempts: d.attempts.clone(),
                }
            })
            .collect()
    }

    /// Waits until no delivery is pending (held and lost ones aside).
    pub async fn settle_webhooks(&self, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let pending = self.webhook_stats().pending;
            if pending == 0 {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!("{pending} webhook deliveries still pending after {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    // ---- assertions ------------------------------------------------------------------------

    /// Every Checkout Session, oldest first.
    pub fn sessions(&self) -> Vec<SessionView> {
        let base = self.inner.base_url.clone();
        self.with_state(|s, _| {
            s.sessions
                .rows
                .iter()
                .map(|x| SessionView {
                    id: x.id.clone(),
                    status: x.status.as_str(),
                    payment_status: if x.paid { "paid" } else { "unpaid" },
                    amount_total: x.amount_total,
                    currency: x.currency.clone(),
                    metadata: strings(&x.metadata),
                    payment_intent_metadata: strings(&x.pi_metadata),
                    client_reference_id: x.client_reference_id.clone(),
                    payment_intent: x.payment_intent.clone(),
                    expires_at: x.expires_at,
                    url: format!("{base}/c/pay/{}", x.id),
                })
                .collect()
        })
    }

    /// Session `id`.
    pub fn session(&self, id: &str) -> Option<SessionView> {
        self.sessions().into_iter().find(|s| s.id == id)
    }

    /// Every PaymentIntent, oldest first, with what was refunded of it.
    pub fn payment_intents(&self) -> Vec<PaymentView> {
        self.with_state(|s, _| {
            s.intents
                .rows
                .iter()
                .map(|p| PaymentView {
                    id: p.id.clone(),
                    charge: p.charge.clone(),
                    amount: p.amount,
                    currency: p.currency.clone(),
                    amount_refunded: s.charges.get(&p.charge).map_or(0, |c| c.amount_refunded),
                    metadata: strings(&p.metadata),
                    session: p.session.clone(),
                })
                .collect()
        })
    }

    /// Every refund, oldest first.
    pub fn refunds(&self) -> Vec<RefundView> {
        self.with_state(|s, _| {
            s.refunds
                .rows
                .iter()
                .map(|r| RefundView {
                    id: r.id.clone(),
                    payment_intent: r.payment_intent.clone(),
                    charge: r.charge.clone(),
                    amount: r.amount,
                    status: r.status.as_str(),
                    reason: r.reason.clone(),
                    failure_reason: r.failure_reason.clone(),
                    metadata: strings(&r.metadata),
                })
                .collect()
        })
    }

    /// Every event as the Events API renders it, oldest first.
    pub fn events(&self) -> Vec<Value> {
        self.with_state(|s, _| s.events.rows.iter().map(|e| s.event_json(e)).collect())
    }

    /// Every API request received, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.inner
            .state
            .lock()
            .expect("sandbox state")
            .calls
            .clone()
    }

    /// The API requests with this method whose path starts with `path` (`"POST"`,
    /// `"/v1/refunds"`).
    pub fn calls_to(&self, method: &str, path: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method && c.path.starts_with(path))
            .collect()
    }
}

fn release(inner: &Arc<Inner>) {
    {
        let mut state = inner.state.lock().expect("sandbox state");
        state.hold = None;
        let mut queued = Vec::new();
        for (i, d) in state.deliveries.iter_mut().enumerate() {
            if d.state == DeliveryState::Held {
                d.state = DeliveryState::Pending;
                queued.push(i);
            }
        }
        state.to_spawn.extend(queued);
    }
    inner.flush();
}
