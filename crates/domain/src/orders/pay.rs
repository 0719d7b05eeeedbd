//! Starting a payment: the buyer's pay route records what is owed (amount, currency, deadline)
//! and tells the storefront what to hand the payment provider. Nothing here marks anything
//! paid: only the provider's signed confirmation does ([`super::confirm`]).

use serde::{Deserialize, Serialize};

use super::{int, s, text, transaction};
use crate::error::{Error, ErrorCode};
use crate::event::EventId;
use crate::ids::{self, OrderId};
use crate::sql::{Cell, Param as P, Sql};

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
}

impl PaymentStatus {
    /// As stored in `payments.status`.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentStatus::Pending => "pending",
            PaymentStatus::Succeeded => "succeeded",
            PaymentStatus::RefundDue => "refund_due",
        }
    }

    /// As stored, or a status an operator names.
    pub fn parse(raw: &str) -> Result<Self, crate::sql::DbError> {
        Ok(match raw {
            "pending" => PaymentStatus::Pending,
            "succeeded" => PaymentStatus::Succeeded,
            "refund_due" => PaymentStatus::RefundDue,
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

/// Starts the payment of `order_id` (the caller's), or returns the one already started: one
/// payment per order. An order past its deadline is refused with 409 `order_expired`; a paid
/// one answers its succeeded payment.
pub fn start_payment(
    db: &impl Sql,
    event: &EventId,
    user: &str,
    order_id: &OrderId,
    checkout_url: Option<&str>,
    now_ms: u64,
) -> Result<Payment, Error> {
    let key = [s(order_id.as_str()), s(event.as_str()), s(user)];
    let mut payment = transaction(db, || {
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
                    s(event.as_str()),
                    s(user),
                    P::Int64(int(row, 2)?),
                    s(&text(row, 3)?),
                    P::Int64(now_ms as i64),
                    P::Int64(deadline),
                ],
            )?;
        }
        let found = db.query(
            "SELECT payment_id, status, amount, currency, deadline_ms FROM payments
                 WHERE order_id = $1",
            &[s(order_id.as_str())],
        )?;
        match found.rows.first() {
            // A payment already confirmed is answered as it stands.
            Some(p) if open || !matches!(p.get(1), Some(Cell::Str(s)) if s == "pending") => {
                Ok(Payment {
                    payment_id: text(p, 0)?,
                    order_id: order_id.as_str().to_owned(),
                    status: PaymentStatus::parse(&text(p, 1)?)?,
                    amount: int(p, 2)?,
                    currency: text(p, 3)?,
                    deadline_ms: int(p, 4)?,
                    checkout_url: None,
                })
            }
            _ => Err(Error::refused(
                ErrorCode::OrderExpired,
                "the payment window has closed",
            )),
        }
    })?;
    if payment.status == PaymentStatus::Pending {
        payment.checkout_url = checkout_url.map(|base| checkout_link(base, &payment));
    }
    Ok(payment)
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
                provider_ref, created_ms, received_ms
             FROM (SELECT p.payment_id, p.order_id, p.user_id,
                          CASE WHEN pp.status = 'refund_due' THEN 'refund_due'
                               ELSE p.status END AS status,
                          pp.refund_reason, coalesce(pp.amount, p.amount) AS amount,
                          coalesce(pp.currency, p.currency) AS currency, pp.provider_ref,
                          p.created_ms, pp.received_ms
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
    let optional_text = |row: &[Cell], i: usize| match row.get(i) {
        Some(Cell::Null) => Ok(None),
        _ => text(row, i).map(Some),
    };
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
                confirmed_ms: match row.get(9) {
                    Some(Cell::Null) => None,
                    _ => Some(int(row, 9)?),
                },
            })
        })
        .collect()
}

/// The provider's hosted checkout for `payment`: its reference, amount and currency in the query
/// (ids, digits and letters only: nothing to escape).
fn checkout_link(base: &str, payment: &Payment) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!(
        "{base}{sep}payment_id={}&amount={}&currency={}",
        payment.payment_id, payment.amount, payment.currency
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeSql, Outcome};

    fn start(db: &FakeSql) -> Result<Payment, Error> {
        start_payment(
            db,
            &EventId::parse("e1").unwrap(),
            "u1",
            &OrderId::parse("0abc").unwrap(),
            Some("https://pay.example/checkout"),
            1_000,
        )
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
        Outcome::Rows(vec![vec![
            Cell::Str("pay_1".into()),
            Cell::Str(status.into()),
            Cell::Int64(1999),
            Cell::Str("eur".into()),
            Cell::Int64(5_000),
        ]])
    }

    #[test]
    fn an_open_order_gets_a_pending_payment_and_a_checkout_never_a_paid_order() {
        let db = FakeSql::default()
            .then(order("pending_payment", 5_000))
            .then(Outcome::Changed(1))
            .then(payment("pending"));
        let p = start(&db).unwrap();
        assert_eq!(
            (p.status, p.amount, p.deadline_ms),
            (PaymentStatus::Pending, 1999, 5_000)
        );
        assert_eq!(
            p.checkout_url.as_deref(),
            Some("https://pay.example/checkout?payment_id=pay_1&amount=1999&currency=eur")
        );
        assert_eq!(
            db.verbs(),
            ["BEGIN", "SELECT", "INSERT", "SELECT", "COMMIT"]
        );
        assert!(
            db.statements().iter().all(|s| !s.contains("'paid'")),
            "starting a payment never marks anything paid"
        );
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
