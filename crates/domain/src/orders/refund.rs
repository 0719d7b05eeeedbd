//! Refunds paid back: every provider payment that paid nothing (`refund_due`: late, another
//! amount, a second payment) is refunded through the provider, once. The provider's refund id
//! is kept (`refund_pending`) until the provider says it succeeded (`refunded`); a refund the
//! provider could not make, or a call that got no answer, is tried again after a back-off, its
//! last error kept for operators. Before a second attempt the payment's refunded amount is
//! read at the provider: a first attempt whose answer was lost may have refunded it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{int, s, text};
use crate::checkout::{self, ProviderApi, Refund};
use crate::error::{Error, ErrorCode};
use crate::event::EventId;
use crate::keys::{RefundState, ShardKeys};
use crate::nodes::Nodes;
use crate::scripts;
use crate::sql::{Cell, Param as P, Sql};
use crate::store::Store;

/// What a refund run did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct RefundReport {
    /// Refunds the provider made (or said it is making).
    pub requested: u64,
    /// Refunds the provider confirmed succeeded.
    pub refunded: u64,
    /// Refunds that failed at the provider or got no answer: tried again after a back-off.
    pub retrying: u64,
    /// Left for the next run: the provider rate limited us, or the run's budget was spent.
    pub deferred: u64,
    /// Orders whose buyers' polls were told where their refunds stand.
    pub buyers_told: u64,
    /// By provider payment, why its refund is not paid yet.
    pub errors: BTreeMap<String, String>,
}

impl RefundReport {
    /// A later run's report added to this one's (a job repeated for its time budget).
    pub(crate) fn add(&mut self, later: Self) {
        self.requested += later.requested;
        self.refunded += later.refunded;
        self.retrying += later.retrying;
        self.deferred = later.deferred;
        self.buyers_told += later.buyers_told;
        self.errors.extend(later.errors);
    }
}

/// The longest a failed refund waits before it is tried again.
const MAX_BACK_OFF_MS: u64 = 3_600_000;

/// The wait after `attempts` failed attempts: 1 s, doubling, at most an hour.
fn back_off_ms(attempts: i64) -> u64 {
    let doublings = u32::try_from(attempts.clamp(0, 22)).unwrap_or(22);
    (1_000u64 << doublings).min(MAX_BACK_OFF_MS)
}

/// Refunds what is owed and follows the refunds under way, at most `budget` of them a run.
pub fn pay_back(
    db: &impl Sql,
    api: &dyn ProviderApi,
    now_ms: u64,
    budget: u32,
) -> Result<RefundReport, Error> {
    let due = db.query(
        "SELECT provider_ref, status, refund_id, refund_reason, refund_attempts::bigint
             FROM provider_payments
             WHERE status IN ('refund_due', 'refund_pending') AND refund_next_ms <= $1
             ORDER BY refund_next_ms, provider_ref LIMIT $2",
        &[P::Int64(now_ms as i64), P::Int64(i64::from(budget) + 1)],
    )?;
    let mut report = RefundReport::default();
    let mut rows = due.rows.iter();
    for (n, row) in rows.by_ref().enumerate() {
        if n as u32 == budget {
            report.deferred += 1;
            break;
        }
        let (reference, status) = (text(row, 0)?, text(row, 1)?);
        let refund_id = match row.get(2) {
            Some(Cell::Str(id)) => Some(id.clone()),
            _ => None,
        };
        let attempts = int(row, 4)?;
        let asked = match (status.as_str(), &refund_id) {
            ("refund_pending", Some(id)) => checkout::retrieve_refund(api, id),
            _ => {
                // Stripe keeps the first answer to a key, a 500 included, so every attempt has
                // a key of its own; an attempt after one that failed first asks whether that
                // one refunded the payment after all, so that nothing is refunded twice.
                let already = match attempts {
                    0 => Ok(0),
                    _ => checkout::refunded_amount(api, &reference),
                };
                match already {
                    Ok(0) => {
                        let key = format!("refund-{reference}-{attempts}");
                        let reason = (text(row, 3)? == "duplicate").then_some("duplicate");
                        checkout::create_refund(api, &reference, reason, &key)
                            .inspect(|_| report.requested += 1)
                    }
                    Ok(_) => Ok(Refund {
                        id: refund_id.clone().unwrap_or_default(),
                        status: "succeeded".into(),
                        failure_reason: None,
                    }),
                    Err(e) => Err(e),
                }
            }
        };
        match asked {
            Ok(refund) => record(db, &reference, &refund, attempts, now_ms, &mut report)?,
            Err(e) if e.code() == ErrorCode::ProviderBusy => {
                report.deferred += 1;
                break;
            }
            Err(e) => {
                report.retrying += 1;
                report.errors.insert(reference.clone(), e.reason());
                db.execute(
                    "UPDATE provider_payments SET refund_attempts = refund_attempts + 1,
                         refund_next_ms = $2, refund_error = $3 WHERE provider_ref = $1",
                    &[
                        s(&reference),
                        P::Int64((now_ms + back_off_ms(attempts)) as i64),
                        s(&e.reason()),
                    ],
                )?;
            }
        }
    }
    report.deferred += rows.count() as u64;
    Ok(report)
}

/// Orders whose buyers one run of timeout release tells where their refunds stand, at most.
pub const BUYERS_TOLD_PER_RUN: u32 = 100;

/// Mirrors, for at most `budget` orders, where the refunds of their payments that paid nothing
/// stand into each order's shard ([`scripts::set_refund`]), until what the buyer was told
/// matches the record. A node that does not answer leaves its orders for the next run.
pub fn tell_buyers<S: Store>(nodes: &Nodes<S>, db: &impl Sql, budget: u32) -> Result<u64, Error> {
    let untold = db.query(
        "SELECT o.event_id, o.shard, o.order_id, bool_and(pp.status = 'refunded'),
                count(*)::bigint, string_agg(pp.provider_ref || '=' || pp.status, ',')
             FROM provider_payments pp JOIN payments p USING (payment_id)
             JOIN orders o ON o.order_id = p.order_id
             WHERE pp.status <> 'paid' AND p.order_id IN (
                 SELECT p.order_id FROM provider_payments pp JOIN payments p USING (payment_id)
                 WHERE pp.status <> 'paid' AND pp.buyer_told IS DISTINCT FROM pp.status
                 LIMIT $1)
             GROUP BY o.event_id, o.shard, o.order_id",
        &[P::Int64(i64::from(budget))],
    )?;
    let mut told = 0;
    for row in &untold.rows {
        let (event, order) = (text(row, 0)?, text(row, 2)?);
        let event = EventId::parse(&event).map_err(Error::bug)?;
        let shard = u32::try_from(int(row, 1)?).map_err(Error::bug)?;
        let state = match row.get(3) {
            Some(Cell::Bool(true)) => RefundState::Refunded,
            _ => RefundState::Pending,
        };
        let payments = u64::try_from(int(row, 4)?).unwrap_or(0);
        let k = ShardKeys::new(&event, shard);
        let mirrored = nodes.on_shard(&event, shard, |store| {
            scripts::set_refund::run(store, &k, &order, state, payments)
        });
        if mirrored.is_err() {
            continue;
        }
        // Each payment marked with the state it had when read: one that moved since is told
        // again next run.
        db.execute(
            "UPDATE provider_payments pp SET buyer_told = seen.status
                 FROM (SELECT split_part(e, '=', 1) AS provider_ref, split_part(e, '=', 2) AS status
                       FROM unnest(string_to_array($1, ',')) AS e) seen
                 WHERE pp.provider_ref = seen.provider_ref",
            &[s(&text(row, 5)?)],
        )?;
        told += 1;
    }
    Ok(told)
}

/// Records what the provider said of a refund.
fn record(
    db: &impl Sql,
    reference: &str,
    refund: &Refund,
    attempts: i64,
    now_ms: u64,
    report: &mut RefundReport,
) -> Result<(), Error> {
    let (status, next_ms, error) = match refund.status.as_str() {
        "succeeded" => {
            report.refunded += 1;
            ("refunded", now_ms, None)
        }
        "failed" | "canceled" => {
            report.retrying += 1;
            let why = refund
                .failure_reason
                .clone()
                .unwrap_or_else(|| refund.status.clone());
            report.errors.insert(reference.to_owned(), why.clone());
            ("refund_due", now_ms + back_off_ms(attempts), Some(why))
        }
        // Pending at the provider: asked about again next run.
        _ => ("refund_pending", now_ms, None),
    };
    db.execute(
        "UPDATE provider_payments SET status = $2, refund_id = COALESCE(NULLIF($3, ''), refund_id),
             refund_next_ms = $4,
             refund_error = NULLIF($5, ''),
             refund_attempts = refund_attempts + CASE WHEN $2 = 'refund_due' THEN 1 ELSE 0 END,
             refunded_ms = CASE WHEN $2 = 'refunded' THEN $6 ELSE refunded_ms END
             WHERE provider_ref = $1",
        &[
            s(reference),
            s(status),
            s(&refund.id),
            P::Int64(next_ms as i64),
            s(error.as_deref().unwrap_or("")),
            P::Int64(now_ms as i64),
        ],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_from_a_second_to_an_hour() {
        assert_eq!(back_off_ms(0), 1_000);
        assert_eq!(back_off_ms(3), 8_000);
        assert_eq!(back_off_ms(40), MAX_BACK_OFF_MS);
    }
}
