//! The payment provider's confirmation (a verified webhook, [`crate::provider`]): the one way an
//! order becomes paid. Applied once per provider event; the amount and currency are held
//! against the payment; an order past its deadline is never paid (its unit may be sold again
//! already), the payment is recorded as owing a refund instead.

use serde::Serialize;

use super::pay::PaymentStatus;
use super::{int, mirror, s, text, transaction};
use crate::error::Error;
use crate::event::EventId;
use crate::nodes::Nodes;
use crate::provider::{Notice, Succeeded};
use crate::scripts::set_order_status::Final;
use crate::sql::{Param as P, Sql};
use crate::store::Store;

/// What a provider event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The order is paid.
    Paid,
    /// The confirmation came after the deadline: the order stays unpaid, a refund is owed.
    RefundDueLate,
    /// The amount or currency is not what the payment asked: a refund is owed.
    RefundDueAmount,
    /// The payment was settled by an earlier event.
    AlreadySettled,
    /// This event was taken before (a redelivery).
    Duplicate,
    /// No payment of ours by that id.
    UnknownPayment,
    /// A kind of event we do not act on.
    Ignored,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Paid => "paid",
            Outcome::RefundDueLate => "refund_due_late",
            Outcome::RefundDueAmount => "refund_due_amount",
            Outcome::AlreadySettled => "already_settled",
            Outcome::Duplicate => "duplicate",
            Outcome::UnknownPayment => "unknown_payment",
            Outcome::Ignored => "ignored",
        }
    }
}

/// The answer to the provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Confirmation {
    /// Always true: the event is taken (the provider stops redelivering it).
    pub received: bool,
    /// What it did.
    pub outcome: Outcome,
}

/// Takes a provider event: in one transaction, records it by its id (a redelivery finds it and
/// changes nothing) and applies it; after the commit a paid order's state is mirrored in Redis.
pub fn confirm<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    notice: &Notice,
    now_ms: u64,
) -> Result<Confirmation, Error> {
    let (event_id, payment_id) = match notice {
        Notice::Succeeded(p) => (&p.event_id, Some(p.payment_id.as_str())),
        Notice::Ignored { event_id, .. } => (event_id, None),
    };
    let (outcome, paid) = transaction(db, || {
        let taken = db.execute(
            "INSERT INTO provider_events (provider_event_id, received_ms, payment_id, outcome)
                 VALUES ($1, $2, $3, 'taking') ON CONFLICT DO NOTHING",
            &[
                s(event_id),
                P::Int64(now_ms as i64),
                s(payment_id.unwrap_or("")),
            ],
        )?;
        if taken == 0 {
            // A redelivery. If the first delivery paid an order whose Redis mirror then
            // failed (the provider saw an error and retried), mirror it now: it is idempotent.
            return Ok((Outcome::Duplicate, paid_by(db, event_id)?));
        }
        let (outcome, paid) = match notice {
            Notice::Succeeded(p) => apply(db, p, now_ms)?,
            Notice::Ignored { .. } => (Outcome::Ignored, None),
        };
        db.execute(
            "UPDATE provider_events SET outcome = $2 WHERE provider_event_id = $1",
            &[s(event_id), s(outcome.as_str())],
        )?;
        Ok::<_, Error>((outcome, paid))
    })?;
    if let Some((event, shard, order)) = paid {
        mirror(nodes, &event, shard, Final::Paid, &[order])?;
    }
    Ok(Confirmation {
        received: true,
        outcome,
    })
}

/// The order provider event `event_id` paid, if it paid one: its event, shard and id.
fn paid_by(db: &impl Sql, event_id: &str) -> Result<Option<Paid>, Error> {
    let rows = db.query(
        "SELECT o.event_id, o.shard::bigint, o.order_id
             FROM provider_events e
             JOIN payments p ON p.payment_id = e.payment_id
             JOIN orders o ON o.order_id = p.order_id
             WHERE e.provider_event_id = $1 AND e.outcome = 'paid'",
        &[s(event_id)],
    )?;
    rows.rows.first().map(|row| paid_order(row)).transpose()
}

/// An order paid: its event, shard and id, for the Redis mirror.
type Paid = (EventId, u32, String);

fn paid_order(row: &[crate::sql::Cell]) -> Result<Paid, Error> {
    let event = EventId::parse(&text(row, 0)?).map_err(Error::bug)?;
    let shard = u32::try_from(int(row, 1)?).map_err(Error::bug)?;
    Ok((event, shard, text(row, 2)?))
}

/// Applies a succeeded payment inside the transaction; returns what it did and, when it paid
/// an order, that order.
fn apply(db: &impl Sql, p: &Succeeded, now_ms: u64) -> Result<(Outcome, Option<Paid>), Error> {
    let rows = db.query(
        "SELECT order_id, event_id, amount, currency, status FROM payments
             WHERE payment_id = $1 FOR UPDATE",
        &[s(&p.payment_id)],
    )?;
    let Some(row) = rows.rows.first() else {
        return Ok((Outcome::UnknownPayment, None));
    };
    let (order_id, event) = (text(row, 0)?, text(row, 1)?);
    if PaymentStatus::parse(&text(row, 4)?)? != PaymentStatus::Pending {
        return Ok((Outcome::AlreadySettled, None));
    }
    let settle = |status: PaymentStatus, reason: Option<&str>| {
        db.execute(
            "UPDATE payments SET status = $2, refund_reason = NULLIF($3, ''), provider_ref = $4,
                                 confirmed_ms = $5
                 WHERE payment_id = $1",
            &[
                s(&p.payment_id),
                s(status.as_str()),
                s(reason.unwrap_or("")),
                s(&p.reference),
                P::Int64(now_ms as i64),
            ],
        )
    };
    if int(row, 2)? != p.amount || text(row, 3)? != p.currency {
        settle(PaymentStatus::RefundDue, Some("amount_mismatch"))?;
        return Ok((Outcome::RefundDueAmount, None));
    }
    // The same compare-and-set timeout release races: before the deadline, from pending only.
    let paid = db.query(
        "UPDATE orders SET status = 'paid', paid_ms = $2, payment_ref = $3
             WHERE order_id = $1 AND status = 'pending_payment' AND pay_deadline_ms > $2
             RETURNING shard::bigint",
        &[s(&order_id), P::Int64(now_ms as i64), s(&p.reference)],
    )?;
    match paid.rows.first() {
        Some(row) => {
            let shard = u32::try_from(int(row, 0)?).map_err(Error::bug)?;
            settle(PaymentStatus::Succeeded, None)?;
            let event = EventId::parse(&event).map_err(Error::bug)?;
            Ok((Outcome::Paid, Some((event, shard, order_id))))
        }
        None => {
            settle(PaymentStatus::RefundDue, Some("late"))?;
            Ok((Outcome::RefundDueLate, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::SET_ORDER_STATUS;
    use crate::sql::Cell;
    use crate::testing::{FakeSql, FakeStore, Outcome as Sql};

    fn succeeded(amount: i64, currency: &str) -> Notice {
        Notice::Succeeded(Succeeded {
            event_id: "evt_1".into(),
            reference: "pi_1".into(),
            payment_id: "pay_1".into(),
            amount,
            currency: currency.into(),
        })
    }

    fn payment(status: &str) -> Sql {
        Sql::Rows(vec![vec![
            Cell::Str("0abc".into()),
            Cell::Str("e1".into()),
            Cell::Int64(1999),
            Cell::Str("eur".into()),
            Cell::Str(status.into()),
        ]])
    }

    fn run(store: &FakeStore, db: &FakeSql, notice: &Notice) -> Outcome {
        confirm(&Nodes::one(store), db, notice, 1_000)
            .unwrap()
            .outcome
    }

    #[test]
    fn a_confirmation_in_time_pays_the_order_and_mirrors_it() {
        let db = FakeSql::default()
            .then(Sql::Changed(1))
            .then(payment("pending"))
            .then(Sql::Rows(vec![vec![Cell::Int64(3)]]))
            .then(Sql::Changed(1))
            .then(Sql::Changed(1));
        let store =
            FakeStore::holding_every_script().answers(&SET_ORDER_STATUS, &[0.into(), 0.into()]);
        assert_eq!(run(&store, &db, &succeeded(1999, "eur")), Outcome::Paid);
        assert_eq!(
            db.verbs(),
            [
                "BEGIN", "INSERT", "SELECT", "UPDATE", "UPDATE", "UPDATE", "COMMIT"
            ]
        );
        assert_eq!(store.calls.borrow()[0].args, ["paid", "0abc"]);
        assert!(store.calls.borrow()[0].keys[0].starts_with("{sk:e1/3}"));
    }

    #[test]
    fn a_redelivered_event_changes_nothing_but_mirrors_the_order_it_paid_again() {
        let db = FakeSql::default()
            .then(Sql::Changed(0))
            .then(Sql::Rows(vec![]));
        let store = FakeStore::holding_every_script();
        assert_eq!(
            run(&store, &db, &succeeded(1999, "eur")),
            Outcome::Duplicate
        );
        assert_eq!(db.verbs(), ["BEGIN", "INSERT", "SELECT", "COMMIT"]);
        assert!(
            store.calls.borrow().is_empty(),
            "it paid nothing: nothing to mirror"
        );
        // Its first delivery paid 0abc, whose mirror failed: the redelivery mirrors it.
        let db = FakeSql::default()
            .then(Sql::Changed(0))
            .then(Sql::Rows(vec![vec![
                Cell::Str("e1".into()),
                Cell::Int64(3),
                Cell::Str("0abc".into()),
            ]]));
        let store =
            FakeStore::holding_every_script().answers(&SET_ORDER_STATUS, &[0.into(), 0.into()]);
        assert_eq!(
            run(&store, &db, &succeeded(1999, "eur")),
            Outcome::Duplicate
        );
        assert_eq!(store.calls.borrow()[0].args, ["paid", "0abc"]);
    }

    #[test]
    fn a_late_confirmation_owes_a_refund_and_never_pays_the_order() {
        let db = FakeSql::default()
            .then(Sql::Changed(1))
            .then(payment("pending"))
            .then(Sql::Rows(vec![]))
            .then(Sql::Changed(1))
            .then(Sql::Changed(1));
        let store = FakeStore::holding_every_script();
        assert_eq!(
            run(&store, &db, &succeeded(1999, "eur")),
            Outcome::RefundDueLate
        );
        assert!(store.calls.borrow().is_empty(), "nothing mirrored");
        assert!(db.statements()[4].contains("SET status = $2"));
    }

    #[test]
    fn another_amount_or_currency_owes_a_refund_without_touching_the_order() {
        for notice in [succeeded(1, "eur"), succeeded(1999, "usd")] {
            let db = FakeSql::default()
                .then(Sql::Changed(1))
                .then(payment("pending"))
                .then(Sql::Changed(1))
                .then(Sql::Changed(1));
            let store = FakeStore::holding_every_script();
            assert_eq!(run(&store, &db, &notice), Outcome::RefundDueAmount);
            assert!(
                db.statements().iter().all(|s| !s.contains("UPDATE orders")),
                "the order is untouched"
            );
        }
    }

    #[test]
    fn unknown_payments_and_other_kinds_are_taken_and_change_nothing_else() {
        let db = FakeSql::default()
            .then(Sql::Changed(1))
            .then(Sql::Rows(vec![]))
            .then(Sql::Changed(1));
        let store = FakeStore::holding_every_script();
        assert_eq!(
            run(&store, &db, &succeeded(1999, "eur")),
            Outcome::UnknownPayment
        );
        let ignored = Notice::Ignored {
            event_id: "evt_2".into(),
            kind: "charge.refunded".into(),
        };
        let db = FakeSql::default()
            .then(Sql::Changed(1))
            .then(Sql::Changed(1));
        assert_eq!(run(&store, &db, &ignored), Outcome::Ignored);
    }
}
