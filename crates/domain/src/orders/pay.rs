//! Starting a payment: the buyer's pay route records what is owed (amount, currency, deadline)
//! and tells the storefront what to hand the payment provider. Nothing here marks anything
//! paid: only the provider's signed confirmation does ([`super::confirm`]).

use serde::{Deserialize, Serialize};

use super::{int, s, text, transaction};
use crate::checkout::{self, CheckoutLocale, NewSession, ProviderApi, SessionStatus};
use crate::error::{Error, ErrorCode};
use crate::event::EventId;
use crate::ids::{self, OrderId};
use crate::sql::{Cell, Param as P, Sql, optional_int, optional_text};

/// Where a payment stands: ours is pending or succeeded; money the provider took that paid
/// nothing (too late, another amount, a second payment) is listed as owing a refund.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaymentStatus {
    /// Waiting for the provider's confirmation.
    Pending,
    /// Confirmed in time: the order is paid.
    Succeeded,
    /// A provider payment that paid no order: the money goes back.
    RefundDue,
    /// Its refund asked of the provider, not confirmed yet.
    RefundPending,
    /// Paid back.
    Refunded,
}

impl PaymentStatus {
    /// As stored in `payments.status`.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentStatus::Pending => "pending",
            PaymentStatus::Succeeded => "succeeded",
            PaymentStatus::RefundDue => "refund_due",
            PaymentStatus::RefundPending => "refund_pending",
            PaymentStatus::Refunded => "refunded",
        }
    }

    /// As stored, or a status an operator names.
    pub fn parse(raw: &str) -> Result<Self, crate::sql::DbError> {
        Ok(match raw {
            "pending" => PaymentStatus::Pending,
            "succeeded" => PaymentStatus::Succeeded,
            "refund_due" => PaymentStatus::RefundDue,
            "refund_pending" => PaymentStatus::RefundPending,
            "refunded" => PaymentStatus::Refunded,
            other => {
                return Err(crate::sql::DbError::unexpected(format!(
                    "payment status {other:?}"
                )));
            }
        })
    }
}

/// A payment, as the buyer's pay route answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Payment {
    /// Ours: the storefront hands it to the provider as `metadata.payment_id`.
    pub payment_id: String,
    /// The order it pays.
    pub order_id: String,
    /// Where it stands.
    pub status: PaymentStatus,
    /// What is owed, in the currency's smallest unit.
    pub amount: i64,
    /// Lowercase ISO 4217.
    pub currency: String,
    /// The provider's confirmation must arrive before this (Unix ms): the order's deadline.
    pub deadline_ms: i64,
    /// The provider's hosted checkout for this payment, when the deployment names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkout_url: Option<String>,
}

/// Who starts which payment, and when.
#[derive(Debug, Clone, Copy)]
pub struct PayRequest<'a> {
    pub event: &'a EventId,
    pub user: &'a str,
    pub order_id: &'a OrderId,
    pub now_ms: u64,
}

/// The provider's hosted checkout: its API, and the storefront pages it sends the buyer back to.
pub struct Checkout<'a> {
    pub api: &'a dyn ProviderApi,
    /// Where the buyer lands after paying (`{CHECKOUT_SESSION_ID}` is filled in by the provider).
    pub success_url: &'a str,
    /// Where the provider's back link goes.
    pub cancel_url: &'a str,
    /// The language its page speaks (a session already open keeps the one it was opened in).
    pub locale: CheckoutLocale,
}

/// Starts the payment of the caller's order, or returns the one already started: one payment
/// per order, and one checkout session per payment, created at the provider with the order's
/// own amount (the buyer names nothing but the order). An order past its deadline is refused
/// with 409 `order_expired`; a paid one answers its succeeded payment. Without a provider
/// (`checkout` is `None`) the payment is recorded and answered without a checkout.
pub fn start_payment(
    db: &impl Sql,
    req: PayRequest,
    checkout: Option<&Checkout>,
) -> Result<Payment, Error> {
    let (mut payment, session) = record_payment(db, &req)?;
    if payment.status != PaymentStatus::Pending {
        return Ok(payment);
    }
    let Some(checkout) = checkout else {
        return Ok(payment);
    };
    payment.checkout_url = match session {
        Some((SessionStatus::Open, url)) => url,
        // Paid or closed at the provider: its event settles the payment.
        Some(_) => None,
        None => open_session(db, &req, checkout, &payment)?,
    };
    Ok(payment)
}

/// The stored session: its status and page.
type StoredSession = Option<(SessionStatus, Option<String>)>;

/// Records the payment (once per order) and reads it back with its session, in one transaction.
fn record_payment(db: &impl Sql, req: &PayRequest) -> Result<(Payment, StoredSession), Error> {
    let (order_id, now_ms) = (req.order_id, req.now_ms);
    let key = [s(order_id.as_str()), s(req.event.as_str()), s(req.user)];
    transaction(db, || {
        let order = db.query(
            "SELECT status, pay_deadline_ms, amount, currency FROM orders
                 WHERE order_id = $1 AND event_id = $2 AND user_id = $3 FOR UPDATE",
            &key,
        )?;
        let Some(row) = order.rows.first() else {
            return Err(Error::refused(
                ErrorCode::OrderNotFound,
                "no such order of yours (a new order takes a moment to be confirmed)",
            ));
        };
        let (status, deadline) = (text(row, 0)?, int(row, 1)?);
        let open = status == "pending_payment" && deadline > now_ms as i64;
        if open {
            db.execute(
                "INSERT INTO payments (payment_id, order_id, event_id, user_id, amount, currency,
                                       created_ms, deadline_ms, status)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending')
                 ON CONFLICT (order_id) DO NOTHING",
                &[
                    s(&format!("pay_{}", ids::random_hex(16))),
                    s(order_id.as_str()),
                    s(req.event.as_str()),
                    s(req.user),
                    P::Int64(int(row, 2)?),
                    s(&text(row, 3)?),
                    P::Int64(now_ms as i64),
                    P::Int64(deadline),
                ],
            )?;
        }
        let found = db.query(
            "SELECT payment_id, status, amount, currency, deadline_ms, session_status, session_url
                 FROM payments WHERE order_id = $1",
            &[s(order_id.as_str())],
        )?;
        match found.rows.first() {
            // A payment already confirmed is answered as it stands.
            Some(p) if open || !matches!(p.get(1), Some(Cell::Str(s)) if s == "pending") => {
                let payment = Payment {
                    payment_id: text(p, 0)?,
                    order_id: order_id.as_str().to_owned(),
                    status: PaymentStatus::parse(&text(p, 1)?)?,
                    amount: int(p, 2)?,
                    currency: text(p, 3)?,
                    deadline_ms: int(p, 4)?,
                    checkout_url: None,
                };
                let session = match p.get(5) {
                    Some(Cell::Str(status)) => Some((
                        SessionStatus::parse(status)?,
                        match p.get(6) {
                            Some(Cell::Str(url)) => Some(url.clone()),
                            _ => None,
                        },
                    )),
                    _ => None,
                };
                Ok((payment, session))
            }
            _ => Err(Error::refused(
                ErrorCode::OrderExpired,
                "the payment window has closed",
            )),
        }
    })
}

/// Creates the payment's checkout session at the provider (the payment id is its idempotency
/// key: two pays at once get one session) and stores it; its page.
fn open_session(
    db: &impl Sql,
    req: &PayRequest,
    checkout: &Checkout,
    payment: &Payment,
) -> Result<Option<String>, Error> {
    let product = format!("{} — order {}", req.event.as_str(), payment.order_id);
    let session = checkout::create_session(
        checkout.api,
        &NewSession {
            payment_id: &payment.payment_id,
            order_id: &payment.order_id,
            amount: payment.amount,
            currency: &payment.currency,
            product: &product,
            success_url: checkout.success_url,
            cancel_url: checkout.cancel_url,
            locale: checkout.locale,
            now_s: req.now_ms / 1000,
            deadline_s: (payment.deadline_ms.max(0) as u64).div_ceil(1000),
        },
    )?;
    db.execute(
        "UPDATE payments SET session_id = $2, session_url = NULLIF($3, ''), session_status = $4
             WHERE payment_id = $1 AND (session_id IS NULL OR session_id = $2)",
        &[
            s(&payment.payment_id),
            s(&session.id),
            s(session.url.as_deref().unwrap_or("")),
            s(session.status.as_str()),
        ],
    )?;
    Ok(match session.status {
        SessionStatus::Open => session.url,
        _ => None,
    })
}

/// A payment as operators see it: one of ours, with the provider payment that paid it, or a
/// provider payment naming it that owes a refund.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PaymentRecord {
    /// Ours.
    pub payment_id: String,
    /// The order it pays.
    pub order_id: String,
    /// The buyer.
    pub user_id: String,
    /// Where it stands.
    pub status: PaymentStatus,
    /// Why it owes a refund (`late`, `amount_mismatch`, `duplicate`), when it does.
    pub refund_reason: Option<String>,
    /// What was asked (or, for a provider payment, taken), in the currency's smallest unit.
    pub amount: i64,
    /// Lowercase ISO 4217.
    pub currency: String,
    /// The provider's reference, once it confirmed.
    pub provider_ref: Option<String>,
    /// Why the last attempt to refund it failed (it is tried again after a back-off).
    pub refund_error: Option<String>,
    /// When the buyer started it (Unix ms).
    pub created_ms: i64,
    /// When the provider's payment was taken.
    pub confirmed_ms: Option<i64>,
}

/// The most payments one call lists.
pub const MAX_PAYMENTS_LISTED: u32 = 500;

/// `event`'s payments in `status` (all when `None`), newest first, at most `limit` of them
/// ([`MAX_PAYMENTS_LISTED`]): what operators refund from.
pub fn payments(
    db: &impl Sql,
    event: &EventId,
    status: Option<PaymentStatus>,
    limit: u32,
) -> Result<Vec<PaymentRecord>, Error> {
    let rows = db.query(
        "SELECT payment_id, order_id, user_id, status, refund_reason, amount, currency,
                provider_ref, created_ms, received_ms, refund_error
             FROM (SELECT p.payment_id, p.order_id, p.user_id,
                          CASE WHEN pp.status <> 'paid' THEN pp.status
                               ELSE p.status END AS status,
                          pp.refund_reason, coalesce(pp.amount, p.amount) AS amount,
                          coalesce(pp.currency, p.currency) AS currency, pp.provider_ref,
                          p.created_ms, pp.received_ms, pp.refund_error
                   FROM payments p
                   LEFT JOIN provider_payments pp ON pp.payment_id = p.payment_id
                   WHERE p.event_id = $1) listed
             WHERE $2 = '' OR status = $2
             ORDER BY created_ms DESC, received_ms NULLS FIRST LIMIT $3",
        &[
            s(event.as_str()),
            s(status.map_or("", PaymentStatus::as_str)),
            P::Int64(i64::from(limit.min(MAX_PAYMENTS_LISTED))),
        ],
    )?;
    rows.rows
        .iter()
        .map(|row| {
            Ok(PaymentRecord {
                payment_id: text(row, 0)?,
                order_id: text(row, 1)?,
                user_id: text(row, 2)?,
                status: PaymentStatus::parse(&text(row, 3)?)?,
                refund_reason: optional_text(row, 4)?,
                amount: int(row, 5)?,
                currency: text(row, 6)?,
                provider_ref: optional_text(row, 7)?,
                created_ms: int(row, 8)?,
                confirmed_ms: optional_int(row, 9)?,
                refund_error: optional_text(row, 10)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeSql, Outcome};

    /// The provider: every session it creates is open, at its page; the amounts it was asked.
    #[derive(Default)]
    struct Provider(std::cell::RefCell<Vec<String>>);

    impl ProviderApi for Provider {
        fn call(&self, call: &checkout::ApiCall) -> Result<checkout::ApiAnswer, String> {
            let amount = call
                .form
                .iter()
                .find(|(k, _)| k == "line_items[0][price_data][unit_amount]")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            self.0.borrow_mut().push(amount);
            Ok(checkout::ApiAnswer {
                status: 200,
                body: br#"{"id":"cs_1","url":"https://pay.example/c/pay/cs_1","status":"open",
                    "payment_status":"unpaid","amount_total":1999,"currency":"eur"}"#
                    .to_vec(),
            })
        }
    }

    fn start_with(db: &FakeSql, provider: &Provider) -> Result<Payment, Error> {
        let (event, order) = (
            EventId::parse("e1").unwrap(),
            OrderId::parse("0abc").unwrap(),
        );
        let req = PayRequest {
            event: &event,
            user: "u1",
            order_id: &order,
            now_ms: 1_000,
        };
        let checkout = Checkout {
            api: provider,
            success_url: "https://shop.example/ok",
            cancel_url: "https://shop.example/back",
            locale: CheckoutLocale::Auto,
        };
        start_payment(db, req, Some(&checkout))
    }

    fn start(db: &FakeSql) -> Result<Payment, Error> {
        start_with(db, &Provider::default())
    }

    fn order(status: &str, deadline: i64) -> Outcome {
        Outcome::Rows(vec![vec![
            Cell::Str(status.into()),
            Cell::Int64(deadline),
            Cell::Int64(1999),
            Cell::Str("eur".into()),
        ]])
    }

    fn payment(status: &str) -> Outcome {
        payment_with_session(status, None)
    }

    fn payment_with_session(status: &str, session: Option<(&str, &str)>) -> Outcome {
        let cell = |v: Option<&str>| v.map_or(Cell::Null, |v| Cell::Str(v.into()));
        Outcome::Rows(vec![vec![
            Cell::Str("pay_1".into()),
            Cell::Str(status.into()),
            Cell::Int64(1999),
            Cell::Str("eur".into()),
            Cell::Int64(5_000),
            cell(session.map(|s| s.0)),
            cell(session.map(|s| s.1)),
        ]])
    }

    #[test]
    fn an_open_order_gets_a_pending_payment_and_a_checkout_never_a_paid_order() {
        let db = FakeSql::default()
            .then(order("pending_payment", 5_000))
            .then(Outcome::Changed(1))
            .then(payment("pending"))
            .then(Outcome::Changed(1));
        let provider = Provider::default();
        let p = start_with(&db, &provider).unwrap();
        assert_eq!(
            (p.status, p.amount, p.deadline_ms),
            (PaymentStatus::Pending, 1999, 5_000)
        );
        // The session is the provider's, for the order's own amount.
        assert_eq!(
            p.checkout_url.as_deref(),
            Some("https://pay.example/c/pay/cs_1")
        );
        assert_eq!(*provider.0.borrow(), ["1999"]);
        assert_eq!(
            db.verbs(),
            ["BEGIN", "SELECT", "INSERT", "SELECT", "COMMIT", "UPDATE"]
        );
        assert!(
            db.statements().iter().all(|s| !s.contains("'paid'")),
            "starting a payment never marks anything paid"
        );
    }

    #[test]
    fn paying_again_answers_the_same_open_session_without_asking_the_provider() {
        let db = FakeSql::default()
            .then(order("pending_payment", 5_000))
            .then(Outcome::Changed(0))
            .then(payment_with_session(
                "pending",
                Some(("open", "https://pay.example/c/pay/cs_1")),
            ));
        let provider = Provider::default();
        let p = start_with(&db, &provider).unwrap();
        assert_eq!(
            p.checkout_url.as_deref(),
            Some("https://pay.example/c/pay/cs_1")
        );
        assert!(provider.0.borrow().is_empty());
    }

    #[test]
    fn a_paid_order_answers_its_payment_and_an_expired_one_is_409() {
        let db = FakeSql::default()
            .then(order("paid", 5_000))
            .then(payment("succeeded"));
        let p = start(&db).unwrap();
        assert_eq!((p.status, p.checkout_url), (PaymentStatus::Succeeded, None));
        for (status, deadline) in [("expired", 5_000), ("pending_payment", 1_000)] {
            let db = FakeSql::default()
                .then(order(status, deadline))
                .then(payment("pending"));
            assert_eq!(start(&db).unwrap_err().code(), ErrorCode::OrderExpired);
        }
    }

    #[test]
    fn operators_list_payments_with_their_refund_reasons() {
        let db = FakeSql::default().then(Outcome::Rows(vec![vec![
            Cell::Str("pay_1".into()),
            Cell::Str("0abc".into()),
            Cell::Str("u1".into()),
            Cell::Str("refund_due".into()),
            Cell::Str("late".into()),
            Cell::Int64(1999),
            Cell::Str("eur".into()),
            Cell::Str("pi_1".into()),
            Cell::Int64(1_000),
            Cell::Null,
            Cell::Null,
        ]]));
        let event = EventId::parse("e1").unwrap();
        let listed = payments(&db, &event, Some(PaymentStatus::RefundDue), 10_000).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].status, listed[0].refund_reason.as_deref()),
            (PaymentStatus::RefundDue, Some("late"))
        );
        assert_eq!(listed[0].confirmed_ms, None);
        let params = &db.statements.borrow()[0].1;
        assert_eq!(params[1], P::Str("refund_due".into()));
        assert_eq!(params[2], P::Int64(i64::from(MAX_PAYMENTS_LISTED)));
    }

    #[test]
    fn someone_elses_or_an_unknown_order_is_not_found() {
        let db = FakeSql::default().then(Outcome::Rows(vec![]));
        assert_eq!(start(&db).unwrap_err().code(), ErrorCode::OrderNotFound);
        assert_eq!(db.verbs(), ["BEGIN", "SELECT", "ROLLBACK"]);
    }
}
