//! The payment provider's confirmation (a verified webhook, [`crate::provider`]): the one way an
//! order becomes paid. Applied once per provider event, and every provider payment that names
//! one of ours is recorded once, by its reference (`provider_payments`): the one that pays its
//! order, or one that owes a refund (after the deadline, another amount or currency, a second
//! payment for a paid order). A payment owing a refund never blocks the order's correct one.

use serde::Serialize;

use super::pay::PaymentStatus;
use super::{int, mirror, s, text, transaction};
use crate::error::Error;
use crate::event::EventId;
use crate::nodes::Nodes;
use crate::provider::{Ignore, Notice, PaymentMode, Succeeded};
use crate::scripts::set_order_status::Final;
use crate::sql::{Param as P, Sql};
use crate::store::Store;

/// What a provider event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The order is paid.
    Paid,
    /// The payment came after the deadline: the order stays unpaid, a refund is owed.
    RefundDueLate,
    /// The amount or currency is not what the payment asked: a refund is owed.
    RefundDueAmount,
    /// The order was paid by another payment already: a refund is owed.
    RefundDueDuplicate,
    /// This provider payment was recorded from an earlier event.
    AlreadyRecorded,
    /// This event was taken before (a redelivery).
    Duplicate,
    /// No payment of ours by that id.
    UnknownPayment,
    /// An event that names no payment of ours, or of a kind we do not act on.
    Ignored,
    /// An event of the provider's other mode (test or live) than the deployment's.
    IgnoredLivemode,
}

impl Outcome {
    /// As recorded in `provider_events.outcome` and answered.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Paid => "paid",
            Outcome::RefundDueLate => "refund_due_late",
            Outcome::RefundDueAmount => "refund_due_amount",
            Outcome::RefundDueDuplicate => "refund_due_duplicate",
            Outcome::AlreadyRecorded => "already_recorded",
            Outcome::Duplicate => "duplicate",
            Outcome::UnknownPayment => "unknown_payment",
            Outcome::Ignored => "ignored",
            Outcome::IgnoredLivemode => "ignored_livemode",
        }
    }
}

/// Why a provider payment owes a refund.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundReason {
    /// It came after the order's deadline.
    Late,
    /// Its amount or currency is not what the payment asked.
    AmountMismatch,
    /// The order was paid already.
    Duplicate,
}

impl RefundReason {
    /// As stored in `provider_payments.refund_reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            RefundReason::Late => "late",
            RefundReason::AmountMismatch => "amount_mismatch",
            RefundReason::Duplicate => "duplicate",
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

/// Takes a verified provider event: in one transaction, records it by its id (a redelivery
/// finds it and changes nothing) and applies it; after the commit a paid order's state is
/// mirrored in Redis. Every verified event is taken, whatever it says, so the provider never
/// retries it: an event of the other `mode`, or naming nothing of ours, changes nothing else.
pub fn confirm<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    notice: &Notice,
    mode: PaymentMode,
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
            Notice::Succeeded(p) if !mode.takes(p.livemode) => (Outcome::IgnoredLivemode, None),
            Notice::Succeeded(p) => apply(db, p, now_ms)?,
            Notice::Ignored {
                why: Ignore::Kind | Ignore::NotOurs | Ignore::Unreadable,
                ..
            } => (Outcome::Ignored, None),
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

/// How many provider events were taken, by outcome (what operators watch: events of the other
/// mode, events ignored, refunds owed).
pub fn provider_event_counts(db: &impl Sql) -> Result<Vec<(String, u64)>, Error> {
    let rows = db.query(
        "SELECT outcome, count(*)::bigint FROM provider_events GROUP BY outcome ORDER BY outcome",
        &[],
    )?;
    rows.rows
        .iter()
        .map(|row| {
            Ok((
                text(row, 0)?,
                u64::try_from(int(row, 1)?).map_err(Error::bug)?,
            ))
        })
        .collect()
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
        "SELECT order_id, event_id, amount, currency, status, session_id IS NOT NULL
             FROM payments WHERE payment_id = $1 FOR UPDATE",
        &[s(&p.payment_id)],
    )?;
    let Some(row) = rows.rows.first() else {
        return Ok((Outcome::UnknownPayment, None));
    };
    let (order_id, event) = (text(row, 0)?, text(row, 1)?);
    // One record per provider payment, whichever event (or backstop) brings it first.
    let record =
        |refund: Option<RefundReason>| {
            db.execute(
            "INSERT INTO provider_payments (provider_ref, payment_id, event_id, amount, currency,
                                            received_ms, status, refund_reason)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, NULLIF($8, ''))
                 ON CONFLICT (provider_ref) DO NOTHING",
            &[
                s(&p.reference),
                s(&p.payment_id),
                s(&event),
                P::Int64(p.amount),
                s(&p.currency),
                P::Int64(now_ms as i64),
                s(if refund.is_some() { "refund_due" } else { "paid" }),
                s(refund.map_or("", RefundReason::as_str)),
            ],
        )
        };
    let known = db.query(
        "SELECT 1 FROM provider_payments WHERE provider_ref = $1",
        &[s(&p.reference)],
    )?;
    if !known.rows.is_empty() {
        return Ok((Outcome::AlreadyRecorded, None));
    }
    if int(row, 2)? != p.amount || text(row, 3)? != p.currency {
        record(Some(RefundReason::AmountMismatch))?;
        return Ok((Outcome::RefundDueAmount, None));
    }
    if PaymentStatus::parse(&text(row, 4)?)? == PaymentStatus::Succeeded {
        record(Some(RefundReason::Duplicate))?;
        return Ok((Outcome::RefundDueDuplicate, None));
    }
    // The same compare-and-set timeout release races, from pending only. A payment through a
    // checkout session pays its order whenever its event arrives: release expires the session
    // at the provider before the order, so a payment that completed came in time. Without a
    // session, the deadline is the event's arrival.
    let through_session = matches!(row.get(5), Some(crate::sql::Cell::Bool(true)));
    let paid = db.query(
        "UPDATE orders SET status = 'paid', paid_ms = $2, payment_ref = $3
             WHERE order_id = $1 AND status = 'pending_payment'
               AND (pay_deadline_ms > $2 OR $4::bigint = 1)
             RETURNING shard::bigint",
        &[
            s(&order_id),
            P::Int64(now_ms as i64),
            s(&p.reference),
            P::Int64(i64::from(through_session)),
        ],
    )?;
    let Some(paid) = paid.rows.first() else {
        record(Some(RefundReason::Late))?;
        return Ok((Outcome::RefundDueLate, None));
    };
    let shard = u32::try_from(int(paid, 0)?).map_err(Error::bug)?;
    db.execute(
        "UPDATE payments SET status = 'succeeded', provider_ref = $2, confirmed_ms = $3
             WHERE payment_id = $1",
        &[s(&p.payment_id), s(&p.reference), P::Int64(now_ms as i64)],
    )?;
    record(None)?;
    let event = EventId::parse(&event).map_err(Error::bug)?;
    Ok((Outcome::Paid, Some((event, shard, order_id))))
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
            livemode: false,
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

    /// The provider payment is not recorded yet.
    fn unrecorded() -> Sql {
        Sql::Rows(vec![])
    }

    fn run(store: &FakeStore, db: &FakeSql, notice: &Notice) -> Outcome {
        confirm(&Nodes::one(store), db, notice, PaymentMode::Test, 1_000)
            .unwrap()
            .outcome
    }

    /// The `provider_payments` row a run wrote: its status and refund reason.
    fn recorded(db: &FakeSql) -> Option<(String, String)> {
        let statements = db.statements.borrow();
        let (_, params) = statements
            .iter()
            .find(|(sql, _)| sql.contains("INSERT INTO provider_payments"))?;
        let text = |p: &P| match p {
            P::Str(s) => s.clone(),
            other => panic!("{other:?}"),
        };
        Some((text(&params[6]), text(&params[7])))
    }

    #[test]
    fn a_payment_in_time_pays_the_order_records_it_and_mirrors_it() {
        let db = FakeSql::default()
            .then(Sql::Changed(1))
            .then(payment("pending"))
            .then(unrecorded())
            .then(Sql::Rows(vec![vec![Cell::Int64(3)]]))
            .then(Sql::Changed(1))
            .then(Sql::Changed(1))
            .then(Sql::Changed(1));
        let store =
            FakeStore::holding_every_script().answers(&SET_ORDER_STATUS, &[0.into(), 0.into()]);
        assert_eq!(run(&store, &db, &succeeded(1999, "eur")), Outcome::Paid);
        assert_eq!(recorded(&db), Some(("paid".into(), String::new())));
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
    fn a_late_payment_owes_a_refund_and_never_pays_the_order() {
        let db = FakeSql::default()
            .then(Sql::Changed(1))
            .then(payment("pending"))
            .then(unrecorded())
            .then(Sql::Rows(vec![]))
            .then(Sql::Changed(1))
            .then(Sql::Changed(1));
        let store = FakeStore::holding_every_script();
        assert_eq!(
            run(&store, &db, &succeeded(1999, "eur")),
            Outcome::RefundDueLate
        );
        assert_eq!(recorded(&db), Some(("refund_due".into(), "late".into())));
        assert!(store.calls.borrow().is_empty(), "nothing mirrored");
    }

    #[test]
    fn another_amount_or_currency_owes_a_refund_and_leaves_the_payment_open() {
        for notice in [succeeded(1, "eur"), succeeded(1999, "usd")] {
            let db = FakeSql::default()
                .then(Sql::Changed(1))
                .then(payment("pending"))
                .then(unrecorded())
                .then(Sql::Changed(1))
                .then(Sql::Changed(1));
            let store = FakeStore::holding_every_script();
            assert_eq!(run(&store, &db, &notice), Outcome::RefundDueAmount);
            assert_eq!(
                recorded(&db),
                Some(("refund_due".into(), "amount_mismatch".into()))
            );
            assert!(
                db.statements()
                    .iter()
                    .all(|s| !s.contains("UPDATE orders") && !s.contains("UPDATE payments")),
                "the order and its payment are untouched: the right payment still pays it"
            );
        }
    }

    #[test]
    fn a_second_payment_for_a_paid_order_owes_a_refund() {
        let db = FakeSql::default()
            .then(Sql::Changed(1))
            .then(payment("succeeded"))
            .then(unrecorded())
            .then(Sql::Changed(1))
            .then(Sql::Changed(1));
        let store = FakeStore::holding_every_script();
        assert_eq!(
            run(&store, &db, &succeeded(1999, "eur")),
            Outcome::RefundDueDuplicate
        );
        assert_eq!(
            recorded(&db),
            Some(("refund_due".into(), "duplicate".into()))
        );
    }

    #[test]
    fn a_provider_payment_is_recorded_once_whichever_event_brings_it() {
        let db = FakeSql::default()
            .then(Sql::Changed(1))
            .then(payment("succeeded"))
            .then(Sql::Rows(vec![vec![Cell::Int64(1)]]))
            .then(Sql::Changed(1));
        let store = FakeStore::holding_every_script();
        assert_eq!(
            run(&store, &db, &succeeded(1999, "eur")),
            Outcome::AlreadyRecorded
        );
        assert_eq!(recorded(&db), None);
    }

    #[test]
    fn unknown_payments_other_kinds_and_the_other_mode_are_taken_and_change_nothing_else() {
        let db = FakeSql::default()
            .then(Sql::Changed(1))
            .then(Sql::Rows(vec![]))
            .then(Sql::Changed(1));
        let store = FakeStore::holding_every_script();
        assert_eq!(
            run(&store, &db, &succeeded(1999, "eur")),
            Outcome::UnknownPayment
        );
        for why in [Ignore::Kind, Ignore::NotOurs, Ignore::Unreadable] {
            let ignored = Notice::Ignored {
                event_id: "evt_2".into(),
                why,
            };
            let db = FakeSql::default()
                .then(Sql::Changed(1))
                .then(Sql::Changed(1));
            assert_eq!(run(&store, &db, &ignored), Outcome::Ignored);
            assert_eq!(db.verbs(), ["BEGIN", "INSERT", "UPDATE", "COMMIT"]);
        }
        let Notice::Succeeded(mut live) = succeeded(1999, "eur") else {
            unreachable!()
        };
        live.livemode = true;
        let db = FakeSql::default()
            .then(Sql::Changed(1))
            .then(Sql::Changed(1));
        assert_eq!(
            run(&store, &db, &Notice::Succeeded(live)),
            Outcome::IgnoredLivemode
        );
        assert_eq!(db.verbs(), ["BEGIN", "INSERT", "UPDATE", "COMMIT"]);
        assert!(store.calls.borrow().is_empty());
    }
}
