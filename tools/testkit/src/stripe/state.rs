//! The sandbox's objects — Checkout Sessions, PaymentIntents, Charges, Refunds, Events — and
//! what changes them, rendered in the shapes of the pinned version's reference:
//!
//! - the Checkout Session object, <https://docs.stripe.com/api/checkout/sessions/object>:
//!   `status` `open` → `complete` | `expired`, `payment_status` `unpaid` → `paid`,
//!   `payment_intent` null until paid (since 2022-08-01 Checkout creates the PaymentIntent when
//!   the customer pays), `url` only while the session is open, `line_items` only when
//!   expanded;
//! - the PaymentIntent object, <https://docs.stripe.com/api/payment_intents/object> (at
//!   2024-06-20 `capture_method` defaults to `automatic_async`);
//! - the Charge object, <https://docs.stripe.com/api/charges/object> (`amount_refunded`
//!   counts pending and succeeded refunds; `refunds` is no longer included by default);
//! - the Refund object, <https://docs.stripe.com/api/refunds/object> (`status` `pending`,
//!   `succeeded`, `failed` with a `failure_reason`, <https://docs.stripe.com/refunds#failed-refunds>);
//! - the Event object, <https://docs.stripe.com/api/events/object>: `data.object` is the
//!   object as it was when the event happened, `data.previous_attributes` on `*.updated`
//!   events, `request.id` / `request.idempotency_key` of the API call that caused it (null
//!   for the customer's own actions on the hosted page), `pending_webhooks` the endpoints not
//!   yet answered with a 2xx.
//!
//! Which events happen, at 2024-06-20 (<https://docs.stripe.com/api/events/types>):
//! a Checkout payment emits `payment_intent.created`, `charge.succeeded`,
//! `payment_intent.succeeded`, `checkout.session.completed`; an expiry
//! `checkout.session.expired`; a refund `charge.refunded` ("whenever a charge is refunded,
//! including partial refunds") and, when its status moves, `charge.refund.updated`.
//! `refund.created`/`refund.updated`/`refund.failed` were only for refunds without a charge
//! (customer cash balance) until 2024-10-28.acacia made them apply to all refunds
//! (<https://docs.stripe.com/changelog/acacia/2024-10-28/refund-webhook-update>): the sandbox
//! emits them when configured with that version or a later one.

use std::collections::HashMap;
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::config::{RefundBehaviour, RefundOutcome, WebhookFilter};
use super::error::ApiError;
use super::ids::new_id;
use super::schema::ZERO_DECIMAL;
use super::webhooks::{Delivery, DeliveryState, Endpoint, pattern_matches};

/// Rows in creation order, found by id.
#[derive(Debug)]
pub(crate) struct Table<T> {
    pub rows: Vec<T>,
    index: HashMap<String, usize>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            rows: Vec::new(),
            index: HashMap::new(),
        }
    }
}

impl<T> Table<T> {
    pub fn insert(&mut self, id: String, row: T) -> usize {
        self.rows.push(row);
        let i = self.rows.len() - 1;
        self.index.insert(id, i);
        i
    }
    pub fn pos(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }
    pub fn get(&self, id: &str) -> Option<&T> {
        self.pos(id).map(|i| &self.rows[i])
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionStatus {
    Open,
    Complete,
    Expired,
}

impl SessionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Open => "open",
            SessionStatus::Complete => "complete",
            SessionStatus::Expired => "expired",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct LineItem {
    pub id: String,
    pub price_id: String,
    pub product_id: String,
    pub name: String,
    pub description: Option<String>,
    pub unit_amount: i64,
    pub quantity: i64,
    pub currency: String,
}

#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub id: String,
    pub created: i64,
    pub expires_at: i64,
    pub status: SessionStatus,
    pub paid: bool,
    pub currency: String,
    pub amount_total: i64,
    pub line_items: Vec<LineItem>,
    pub success_url: String,
    pub cancel_url: Option<String>,
    pub client_reference_id: Option<String>,
    pub customer_email: Option<String>,
    pub locale: Option<String>,
    pub metadata: Value,
    pub pi_metadata: Value,
    pub pi_description: Option<String>,
    pub receipt_email: Option<String>,
    pub payment_method_types: Vec<String>,
    pub submit_type: Option<String>,
    pub payment_intent: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct PaymentIntent {
    pub id: String,
    pub created: i64,
    pub amount: i64,
    pub currency: String,
    pub metadata: Value,
    pub description: Option<String>,
    pub receipt_email: Option<String>,
    pub charge: String,
    pub payment_method: String,
    pub session: Option<String>,
    pub client_secret: String,
}

#[derive(Debug, Clone)]
pub(crate) struct Charge {
    pub id: String,
    pub created: i64,
    pub amount: i64,
    pub amount_refunded: i64,
    pub currency: String,
    pub payment_intent: String,
    pub metadata: Value,
    pub balance_transaction: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefundStatus {
    Pending,
    Succeeded,
    Failed,
}

impl RefundStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RefundStatus::Pending => "pending",
            RefundStatus::Succeeded => "succeeded",
            RefundStatus::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Refund {
    pub id: String,
    pub created: i64,
    pub amount: i64,
    pub currency: String,
    pub charge: String,
    pub payment_intent: String,
    pub reason: Option<String>,
    pub metadata: Value,
    pub status: RefundStatus,
    pub failure_reason: Option<String>,
    pub balance_transaction: String,
    /// When a pending refund settles, and how.
    pub settle: Option<(Instant, RefundOutcome)>,
}

#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub id: String,
    pub created: i64,
    pub kind: String,
    pub object: Value,
    pub previous_attributes: Option<Value>,
    pub api_version: String,
    pub request_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub deliveries: Vec<usize>,
}

/// The API request an object change comes from (`event.request`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Origin {
    pub request_id: Option<String>,
    pub idempotency_key: Option<String>,
}

/// A stored answer for an idempotency key.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub endpoint: String,
    pub params: Value,
    pub status: u16,
    pub body: String,
    pub request_id: String,
    pub stored_at: i64,
}

/// Failures a test asked for.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pub rate_limit_next: u32,
    pub rate_limit_share: Option<f64>,
    pub share_seen: u64,
    pub per_second: Option<u32>,
    pub window: (i64, u32),
    pub lock_timeout_next: u32,
    pub server_error_next: u32,
    pub lose_next: u32,
    pub fail_refunds_next: u32,
    pub fail_refunds_reason: String,
}

#[derive(Debug)]
pub(crate) struct State {
    pub api_version: String,
    pub refund_behaviour: RefundBehaviour,
    pub sessions: Table<Session>,
    pub intents: Table<PaymentIntent>,
    pub charges: Table<Charge>,
    pub refunds: Table<Refund>,
    pub events: Table<Event>,
    pub idempotency: HashMap<String, Stored>,
    pub calls: Vec<Call>,
    pub endpoints: Vec<Endpoint>,
    pub deliveries: Vec<Delivery>,
    pub hold: Option<WebhookFilter>,
    /// Set while a payment's webhooks are to be lost.
    pub drop_webhooks: bool,
    /// Deliveries to start once the lock is released.
    pub to_spawn: Vec<usize>,
    pub faults: Faults,
}

/// Events are kept 30 days (<https://docs.stripe.com/api/events/list>: "going back up to 30
/// days").
pub(crate) const EVENT_RETENTION_S: i64 = 30 * 24 * 3600;

/// Whether `version` has 2024-10-28.acacia's refund events.
fn refund_events_for_all(version: &str) -> bool {
    version >= "2024-10-28"
}

pub(crate) fn format_amount(minor: i64, currency: &str, decimal_comma: bool) -> String {
    let code = currency.to_uppercase();
    if ZERO_DECIMAL.contains(&currency) {
        return format!("{minor} {code}");
    }
    let sep = if decimal_comma { ',' } else { '.' };
    let sign = if minor < 0 { "-" } else { "" };
    let m = minor.unsigned_abs();
    format!("{sign}{}{sep}{:02} {code}", m / 100, m % 100)
}

impl State {
    pub fn new(api_version: String, refund_behaviour: RefundBehaviour) -> Self {
        State {
            api_version,
            refund_behaviour,
            sessions: Table::default(),
            intents: Table::default(),
            charges: Table::default(),
            refunds: Table::default(),
            events: Table::default(),
            idempotency: HashMap::new(),
            calls: Vec::new(),
            endpoints: Vec::new(),
            deliveries: Vec::new(),
            hold: None,
            drop_webhooks: false,
            to_spawn: Vec::new(),
            faults: Faults::default(),
        }
    }

    // ---- rendering -------------------------------------------------------------------------

    pub fn session_json(&self, s: &Session, base_url: &str, expand: &[String]) -> Value {
        let payment_intent = match (
            &s.payment_intent,
            expand.iter().any(|e| e == "payment_intent"),
        ) {
            (Some(pi), true) => self
                .intents
                .get(pi)
                .map_or(json!(pi), |p| self.intent_json(p, &[])),
            (Some(pi), false) => json!(pi),
            (None, _) => Value::Null,
        };
        let subtotal: i64 = s
            .line_items
            .iter()
            .map(|l| l.unit_amount * l.quantity)
            .sum();
        let mut v = json!({
            "id": s.id,
            "object": "checkout.session",
            "after_expiration": null,
            "allow_promotion_codes": null,
            "amount_subtotal": subtotal,
            "amount_total": s.amount_total,
            "automatic_tax": { "enabled": false, "liability": null, "status": null },
            "billing_address_collection": null,
            "cancel_url": s.cancel_url,
            "client_reference_id": s.client_reference_id,
            "client_secret": null,
            "consent": null,
            "consent_collection": null,
            "created": s.created,
            "currency": s.currency,
            "currency_conversion": null,
            "custom_fields": [],
            "custom_text": {
                "after_submit": null, "shipping_address": null, "submit": null,
                "terms_of_service_acceptance": null
            },
            "customer": null,
            "customer_creation": "if_required",
            "customer_details": if s.paid {
                json!({ "email": s.customer_email, "name": null, "phone": null,
                        "tax_exempt": "none", "tax_ids": [], "address": null })
            } else { Value::Null },
            "customer_email": s.customer_email,
            "expires_at": s.expires_at,
        });
        let rest = json!({
            "invoice": null,
            "invoice_creation": null,
            "livemode": false,
            "locale": s.locale,
            "metadata": s.metadata,
            "mode": "payment",
            "payment_intent": payment_intent,
            "payment_link": null,
            "payment_method_collection": "if_required",
            "payment_method_configuration_details": null,
            "payment_method_options": {},
            "payment_method_types": s.payment_method_types,
            "payment_status": if s.paid { "paid" } else { "unpaid" },
            "phone_number_collection": { "enabled": false },
            "recovered_from": null,
            "saved_payment_method_options": null,
            "setup_intent": null,
            "shipping_address_collection": null,
            "shipping_cost": null,
            "shipping_details": null,
            "shipping_options": [],
            "status": s.status.as_str(),
            "submit_type": s.submit_type,
            "subscription": null,
            "success_url": s.success_url,
            "total_details": { "amount_discount": 0, "amount_shipping": 0, "amount_tax": 0 },
            "ui_mode": "hosted",
            "url": if s.status == SessionStatus::Open {
                json!(format!("{base_url}/c/pay/{}", s.id))
            } else { Value::Null },
        });
        if let (Value::Object(v), Value::Object(rest)) = (&mut v, rest) {
            v.extend(rest);
        }
        if expand.iter().any(|e| e == "line_items") {
            let data: Vec<Value> = s
                .line_items
                .iter()
                .map(|l| {
                    json!({
                        "id": l.id,
                        "object": "item",
                        "amount_discount": 0,
                        "amount_subtotal": l.unit_amount * l.quantity,
                        "amount_tax": 0,
                        "amount_total": l.unit_amount * l.quantity,
                        "currency": l.currency,
                        "description": l.name,
                        "price": {
                            "id": l.price_id, "object": "price", "active": false,
                            "currency": l.currency, "livemode": false, "metadata": {},
                            "product": l.product_id, "type": "one_time",
                            "unit_amount": l.unit_amount,
                            "unit_amount_decimal": l.unit_amount.to_string(),
                        },
                        "quantity": l.quantity,
                    })
                })
                .collect();
            v["line_items"] = json!({
                "object": "list",
                "data": data,
                "has_more": false,
                "url": format!("/v1/checkout/sessions/{}/line_items", s.id),
            });
        }
        v
    }

    pub fn intent_json(&self, p: &PaymentIntent, expand: &[String]) -> Value {
        let charge = self.charges.get(&p.charge);
        let latest_charge = match charge {
            Some(c) if expand.iter().any(|e| e == "latest_charge") => self.charge_json(c),
            _ => json!(p.charge),
        };
        json!({
            "id": p.id,
            "object": "payment_intent",
            "amount": p.amount,
            "amount_capturable": 0,
            "amount_details": { "tip": {} },
            "amount_received": p.amount,
            "application": null,
            "application_fee_amount": null,
            "automatic_payment_methods": null,
            "canceled_at": null,
            "cancellation_reason": null,
            "capture_method": "automatic_async",
            "client_secret": p.client_secret,
            "confirmation_method": "automatic",
            "created": p.created,
            "currency": p.currency,
            "customer": null,
            "description": p.description,
            "invoice": null,
            "last_payment_error": null,
            "latest_charge": latest_charge,
            "livemode": false,
            "metadata": p.metadata,
            "next_action": null,
            "on_behalf_of": null,
            "payment_method": p.payment_method,
            "payment_method_options": {},
            "payment_method_types": ["card"],
            "processing": null,
            "receipt_email": p.receipt_email,
            "review": null,
            "setup_future_usage": null,
            "shipping": null,
            "source": null,
            "statement_descriptor": null,
            "statement_descriptor_suffix": null,
            "status": "succeeded",
            "transfer_data": null,
            "transfer_group": null,
        })
    }

    /// The PaymentIntent before it was paid (`payment_intent.created`).
    fn intent_created_json(&self, p: &PaymentIntent) -> Value {
        let mut v = self.intent_json(p, &[]);
        v["status"] = json!("requires_payment_method");
        v["amount_received"] = json!(0);
        v["latest_charge"] = Value::Null;
        v["payment_method"] = Value::Null;
        v
    }

    pub fn charge_json(&self, c: &Charge) -> Value {
        json!({
            "id": c.id,
            "object": "charge",
            "amount": c.amount,
            "amount_captured": c.amount,
            "amount_refunded": c.amount_refunded,
            "balance_transaction": c.balance_transaction,
            "captured": true,
            "created": c.created,
            "currency": c.currency,
            "customer": null,
            "description": null,
            "disputed": false,
            "failure_code": null,
            "failure_message": null,
            "livemode": false,
            "metadata": c.metadata,
            "outcome": { "network_status": "approved_by_network", "reason": null,
                         "risk_level": "normal", "seller_message": "Payment complete.",
                         "type": "authorized" },
            "paid": true,
            "payment_intent": c.payment_intent,
            "payment_method_details": { "type": "card" },
            "refunded": c.amount_refunded == c.amount,
            "status": "succeeded",
        })
    }

    pub fn refund_json(&self, r: &Refund) -> Value {
        let mut v = json!({
            "id": r.id,
            "object": "refund",
            "amount": r.amount,
            "balance_transaction": r.balance_transaction,
            "charge": r.charge,
            "created": r.created,
            "currency": r.currency,
            "destination_details": { "type": "card", "card": {
                "reference_status": if r.status == RefundStatus::Succeeded { "available" } else { "pending" },
                "reference_type": "acquirer_reference_number", "type": "refund" } },
            "metadata": r.metadata,
            "payment_intent": r.payment_intent,
            "reason": r.reason,
            "receipt_number": null,
            "source_transfer_reversal": null,
            "status": r.status.as_str(),
            "transfer_reversal": null,
        });
        if let Some(reason) = &r.failure_reason {
            v["failure_reason"] = json!(reason);
            v["failure_balance_transaction"] = json!(new_id("txn_", 24));
        }
        v
    }

    pub fn pending_webhooks(&self, e: &Event) -> usize {
        e.deliveries
            .iter()
            .filter(|d| self.deliveries[**d].state != DeliveryState::Delivered)
            .count()
    }

    pub fn event_json(&self, e: &Event) -> Value {
        let mut data = json!({ "object": e.object });
        if let Some(prev) = &e.previous_attributes {
            data["previous_attributes"] = prev.clone();
        }
        json!({
            "id": e.id,
            "object": "event",
            "account": null,
            "api_version": e.api_version,
            "created": e.created,
            "data": data,
            "livemode": false,
            "pending_webhooks": self.pending_webhooks(e),
            "request": { "id": e.request_id, "idempotency_key": e.idempotency_key },
            "type": e.kind,
        })
    }

    // ---- events ----------------------------------------------------------------------------

    /// Appends an event and queues its deliveries: one per endpoint listening to its type,
    /// held back or lost when a test asked for that.
    pub fn emit(
        &mut self,
        kind: &str,
        object: Value,
        previous_attributes: Option<Value>,
        origin: &Origin,
        now: i64,
    ) {
        let id = new_id("evt_", 24);
        let event_index = self.events.rows.len();
        let mut deliveries = Vec::new();
        for (endpoint, e) in self.endpoints.iter().enumerate() {
            if !e.enabled_events.iter().any(|p| pattern_matches(p, kind)) {
                continue;
            }
            let state = if self.drop_webhooks {
                DeliveryState::Dropped
            } else if self.hold.as_ref().is_some_and(|h| h.matches(kind)) {
                DeliveryState::Held
            } else {
                DeliveryState::Pending
            };
            self.deliveries.push(Delivery {
                event: event_index,
                endpoint,
                state,
                attempts: Vec::new(),
                running: false,
            });
            let d = self.deliveries.len() - 1;
            if state == DeliveryState::Pending {
                self.to_spawn.push(d);
            }
            deliveries.push(d);
        }
        self.events.insert(
            id.clone(),
            Event {
                id,
                created: now,
                kind: kind.to_owned(),
                object,
                previous_attributes,
                api_version: self.api_version.clone(),
                request_id: origin.request_id.clone(),
                idempotency_key: origin.idempotency_key.clone(),
                deliveries,
            },
        );
    }

    // ---- time ------------------------------------------------------------------------------

    /// What time changes: open sessions past `expires_at` expire (emitting
    /// `checkout.session.expired`, as Stripe does at that time), pending refunds due settle.
    pub fn tick(&mut self, now: i64, base_url: &str) {
        let due: Vec<usize> = self
            .sessions
            .rows
            .iter()
            .enumerate()
            .filter(|(_, s)| s.status == SessionStatus::Open && s.expires_at <= now)
            .map(|(i, _)| i)
            .collect();
        for i in due {
            self.sessions.rows[i].status = SessionStatus::Expired;
            let obj = self.session_json(&self.sessions.rows[i], base_url, &[]);
            self.emit(
                "checkout.session.expired",
                obj,
                None,
                &Origin::default(),
                now,
            );
        }
        let instant = Instant::now();
        let settle: Vec<(usize, RefundOutcome)> = self
            .refunds
            .rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match &r.settle {
                Some((at, outcome)) if *at <= instant => Some((i, outcome.clone())),
                _ => None,
            })
            .collect();
        for (i, outcome) in settle {
            self.settle_refund(i, outcome, now);
        }
    }

    fn settle_refund(&mut self, i: usize, outcome: RefundOutcome, now: i64) {
        let refund = &mut self.refunds.rows[i];
        refund.settle = None;
        let before = refund.status;
        match &outcome {
            RefundOutcome::Succeeded => refund.status = RefundStatus::Succeeded,
            RefundOutcome::Failed(reason) => {
                refund.status = RefundStatus::Failed;
                refund.failure_reason = Some(reason.clone());
            }
        }
        let (charge_id, amount) = (refund.charge.clone(), refund.amount);
        if matches!(outcome, RefundOutcome::Failed(_))
            && let Some(c) = self.charges.pos(&charge_id)
        {
            // A failed refund's funds go back to the balance: the charge is refundable again.
            self.charges.rows[c].amount_refunded -= amount;
        }
        let obj = self.refund_json(&self.refunds.rows[i]);
        let prev = json!({ "status": before.as_str() });
        let origin = Origin::default();
        self.emit(
            "charge.refund.updated",
            obj.clone(),
            Some(prev.clone()),
            &origin,
            now,
        );
        if refund_events_for_all(&self.api_version) {
            self.emit("refund.updated", obj.clone(), Some(prev), &origin, now);
            if matches!(outcome, RefundOutcome::Failed(_)) {
                self.emit("refund.failed", obj, None, &origin, now);
            }
        }
    }

    // ---- payments --------------------------------------------------------------------------

    /// A second, separate payment naming session `id`'s order (its `payment_intent_data`
    /// metadata), for `amount` (default the session's); `None` when there is no such session.
    pub fn charge_again(&mut self, id: &str, amount: Option<i64>, now: i64) -> Option<String> {
        let session = self.sessions.get(id)?.clone();
        Some(self.create_payment(
            Payment {
                amount: amount.unwrap_or(session.amount_total),
                currency: session.currency.clone(),
                metadata: session.pi_metadata.clone(),
                description: session.pi_description.clone(),
                receipt_email: None,
                session: None,
            },
            &Origin::default(),
            now,
        ))
    }

    /// A succeeded payment: a PaymentIntent and its Charge, with their events.
    pub fn create_payment(&mut self, payment: Payment, origin: &Origin, now: i64) -> String {
        let Payment {
            amount,
            currency,
            metadata,
            description,
            receipt_email,
            session,
        } = payment;
        let currency = currency.as_str();
        let pi_id = new_id("pi_", 24);
        let charge_id = new_id("ch_", 24);
        let intent = PaymentIntent {
            id: pi_id.clone(),
            created: now,
            amount,
            currency: currency.to_owned(),
            metadata: metadata.clone(),
            description,
            receipt_email,
            charge: charge_id.clone(),
            payment_method: new_id("pm_", 24),
            session,
            client_secret: format!("{pi_id}_secret_{}", new_id("", 25)),
        };
        let charge = Charge {
            id: charge_id.clone(),
            created: now,
            amount,
            amount_refunded: 0,
            currency: currency.to_owned(),
            payment_intent: pi_id.clone(),
            metadata,
            balance_transaction: new_id("txn_", 24),
        };
        let created = self.intent_created_json(&intent);
        self.intents.insert(pi_id.clone(), intent);
        self.charges.insert(charge_id.clone(), charge);
        self.emit("payment_intent.created", created, None, origin, now);
        let charge = self.charge_json(self.charges.get(&charge_id).expect("just inserted"));
        self.emit("charge.succeeded", charge, None, origin, now);
        let succeeded = self.intent_json(self.intents.get(&pi_id).expect("just inserted"), &[]);
        self.emit("payment_intent.succeeded", succeeded, None, origin, now);
        pi_id
    }

    /// The customer pays session `id` on the hosted page: the stored amount, only while the
    /// session is open.
    pub fn complete_session(
        &mut self,
        id: &str,
        now: i64,
        base_url: &str,
    ) -> Result<String, Unpayable> {
        let Some(i) = self.sessions.pos(id) else {
            return Err(Unpayable::NoSuchSession);
        };
        let s = self.sessions.rows[i].clone();
        match s.status {
            SessionStatus::Expired => return Err(Unpayable::Expired),
            SessionStatus::Complete => {
                return Err(Unpayable::AlreadyComplete(
                    s.payment_intent.clone().unwrap_or_default(),
                ));
            }
            SessionStatus::Open => {}
        }
        let origin = Origin::default();
        let pi = self.create_payment(
            Payment {
                amount: s.amount_total,
                currency: s.currency.clone(),
                metadata: s.pi_metadata.clone(),
                description: s.pi_description.clone(),
                receipt_email: s.receipt_email.clone().or(s.customer_email.clone()),
                session: Some(s.id.clone()),
            },
            &origin,
            now,
        );
        let row = &mut self.sessions.rows[i];
        row.status = SessionStatus::Complete;
        row.paid = true;
        row.payment_intent = Some(pi.clone());
        let obj = self.session_json(&self.sessions.rows[i], base_url, &[]);
        self.emit("checkout.session.completed", obj, None, &origin, now);
        Ok(pi)
    }

    // ---- refunds ---------------------------------------------------------------------------

    /// `POST /v1/refunds` with checked parameters.
    pub fn create_refund(
        &mut self,
        params: &Value,
        origin: &Origin,
        now: i64,
    ) -> Result<Value, ApiError> {
        let by_pi = params["payment_intent"].as_str();
        let by_charge = params["charge"].as_str();
        let charge_pos = match (by_pi, by_charge) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid(
                    "You may only specify one of these parameters: charge, payment_intent.",
                )
                .with_param("payment_intent"));
            }
            (None, None) => {
                return Err(ApiError::invalid(
                    "One of the following params should be provided for this request: \
                     payment_intent or charge.",
                )
                .with_code("parameter_missing"));
            }
            (Some(pi), None) => {
                let p = self.intents.get(pi).ok_or_else(|| {
                    ApiError::no_such("payment_intent", pi, "payment_intent", 400)
                })?;
                self.charges
                    .pos(&p.charge)
                    .expect("every intent has its charge")
            }
            (None, Some(ch)) => self
                .charges
                .pos(ch)
                .ok_or_else(|| ApiError::no_such("charge", ch, "charge", 400))?,
        };
        let charge = &self.charges.rows[charge_pos];
        let left = charge.amount - charge.amount_refunded;
        if left == 0 {
            return Err(ApiError::invalid(format!(
                "Charge {} has already been refunded.",
                charge.id
            ))
            .with_code("charge_already_refunded"));
        }
        let amount = params["amount"].as_i64().unwrap_or(left);
        if amount > left {
            let decimal_comma = false;
            return Err(ApiError::invalid(format!(
                "Refund amount ({}) is greater than unrefunded amount on charge ({})",
                format_amount(amount, &charge.currency, decimal_comma),
                format_amount(left, &charge.currency, decimal_comma),
            ))
            .with_code("amount_too_large")
            .with_param("amount"));
        }
        let (status, settle) = if self.faults.fail_refunds_next > 0 {
            self.faults.fail_refunds_next -= 1;
            let outcome = RefundOutcome::Failed(self.faults.fail_refunds_reason.clone());
            let after = match &self.refund_behaviour {
                RefundBehaviour::Pending { settle_after, .. } => *settle_after,
                RefundBehaviour::Succeed => std::time::Duration::from_millis(200),
            };
            (
                RefundStatus::Pending,
                Some((Instant::now() + after, outcome)),
            )
        } else {
            match &self.refund_behaviour {
                RefundBehaviour::Succeed => (RefundStatus::Succeeded, None),
                RefundBehaviour::Pending {
                    settle_after,
                    outcome,
                } => (
                    RefundStatus::Pending,
                    Some((Instant::now() + *settle_after, outcome.clone())),
                ),
            }
        };
        let id = new_id("re_", 24);
        let refund = Refund {
            id: id.clone(),
            created: now,
            amount,
            currency: charge.currency.clone(),
            charge: charge.id.clone(),
            payment_intent: charge.payment_intent.clone(),
            reason: params["reason"].as_str().map(str::to_owned),
            metadata: params
                .get("metadata")
                .cloned()
                .filter(|m| m.is_object())
                .unwrap_or_else(|| json!({})),
            status,
            failure_reason: None,
            balance_transaction: new_id("txn_", 24),
            settle,
        };
        self.charges.rows[charge_pos].amount_refunded += amount;
        self.refunds.insert(id.clone(), refund);
        let charge_obj = self.charge_json(&self.charges.rows[charge_pos]);
        let refund_obj = self.refund_json(self.refunds.get(&id).expect("just inserted"));
        let prev =
            json!({ "amount_refunded": self.charges.rows[charge_pos].amount_refunded - amount });
        self.emit("charge.refunded", charge_obj, Some(prev), origin, now);
        if refund_events_for_all(&self.api_version) {
            self.emit("refund.created", refund_obj.clone(), None, origin, now);
        }
        Ok(refund_obj)
    }

    // ---- events list -----------------------------------------------------------------------

    /// `GET /v1/events` with checked parameters (<https://docs.stripe.com/api/events/list>,
    /// <https://docs.stripe.com/api/pagination>): newest first, `limit` (default 10),
    /// `starting_after` (older than that event) / `ending_before` (newer than it), `type`
    /// (with `*` wildcards) or `types` (up to 20, not both), `created` bounds,
    /// `delivery_success`, and only the last 30 days.
    pub fn list_events(&self, params: &Value, now: i64) -> Result<Value, ApiError> {
        if params.get("type").is_some_and(|t| !t.is_null())
            && params.get("types").is_some_and(|t| !t.is_null())
        {
            return Err(
                ApiError::invalid("You may pass either `type` or `types`, but not both.")
                    .with_param("types"),
            );
        }
        let after = params["starting_after"].as_str();
        let before = params["ending_before"].as_str();
        if after.is_some() && before.is_some() {
            return Err(ApiError::invalid(
                "You may only specify one of these parameters: ending_before, starting_after.",
            )
            .with_param("ending_before"));
        }
        let limit = params["limit"].as_i64().unwrap_or(10) as usize;
        let kind = params["type"].as_str();
        let kinds: Option<Vec<&str>> = params["types"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect());
        let created = &params["created"];
        let success = params["delivery_success"].as_bool();
        let keep = |e: &Event| -> bool {
            if e.created < now - EVENT_RETENTION_S {
                return false;
            }
            if let Some(k) = kind
                && !pattern_matches(k, &e.kind)
            {
                return false;
            }
            if let Some(ks) = &kinds
                && !ks.contains(&e.kind.as_str())
            {
                return false;
            }
            if let Some(c) = created.as_i64()
                && e.created != c
            {
                return false;
            }
            if created.is_object() {
                let t = e.created;
                let bound = |k: &str| created[k].as_i64();
                if bound("gt").is_some_and(|b| t <= b)
                    || bound("gte").is_some_and(|b| t < b)
                    || bound("lt").is_some_and(|b| t >= b)
                    || bound("lte").is_some_and(|b| t > b)
                {
                    return false;
                }
            }
            if let Some(want) = success
                && (self.pending_webhooks(e) == 0) != want
            {
                return false;
            }
            true
        };
        // Newest first: the insertion order, reversed.
        let all: Vec<&Event> = self.events.rows.iter().rev().filter(|e| keep(e)).collect();
        let cursor_pos = |id: &str, param: &str| -> Result<usize, ApiError> {
            // A cursor is an event id (one filtered out still marks a place in the list).
            let Some(p) = self.events.pos(id) else {
                return Err(ApiError::no_such("event", id, param, 400));
            };
            Ok(p)
        };
        let page: Vec<&Event>;
        let has_more;
        if let Some(id) = after {
            let p = cursor_pos(id, "starting_after")?;
            let older: Vec<&Event> = all
                .into_iter()
                .filter(|e| self.events.pos(&e.id).expect("listed") < p)
                .collect();
            has_more = older.len() > limit;
            page = older.into_iter().take(limit).collect();
        } else if let Some(id) = before {
            let p = cursor_pos(id, "ending_before")?;
            let newer: Vec<&Event> = all
                .into_iter()
                .filter(|e| self.events.pos(&e.id).expect("listed") > p)
                .collect();
            // The `limit` events closest to the cursor, still newest first.
            has_more = newer.len() > limit;
            let skip = newer.len().saturating_sub(limit);
            page = newer.into_iter().skip(skip).collect();
        } else {
            has_more = all.len() > limit;
            page = all.into_iter().take(limit).collect();
        }
        let data: Vec<Value> = page.into_iter().map(|e| self.event_json(e)).collect();
        Ok(json!({
            "object": "list",
            "data": data,
            "has_more": has_more,
            "url": "/v1/events",
        }))
    }
}

/// Why a session cannot be paid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unpayable {
    NoSuchSession,
    Expired,
    /// Paid already, by this PaymentIntent.
    AlreadyComplete(String),
}

/// Reads `metadata` of typed parameters as a JSON object (empty when absent).
pub(crate) fn metadata_of(v: &Value) -> Value {
    match v.get("metadata") {
        Some(Value::Object(m)) => Value::Object(m.clone()),
        _ => Value::Object(Map::new()),
    }
}

/// What a succeeded payment is for: a PaymentIntent's fields, and the Checkout Session it
/// completes, if any.
pub struct Payment {
    pub amount: i64,
    pub currency: String,
    pub metadata: Value,
    pub description: Option<String>,
    pub receipt_email: Option<String>,
    pub session: Option<String>,
}

/// One API request the sandbox received.
#[derive(Debug, Clone)]
pub struct Call {
    /// Sandbox-clock Unix seconds.
    pub at: i64,
    pub method: String,
    pub path: String,
    /// The parameters as sent (query or form), nested, every value a string.
    pub params: Value,
    pub idempotency_key: Option<String>,
    pub stripe_version: Option<String>,
    pub api_key: Option<String>,
    /// The status answered (also when the response was lost on purpose).
    pub status: u16,
    /// Replayed from an idempotency key.
    pub replayed: bool,
    pub request_id: String,
}
