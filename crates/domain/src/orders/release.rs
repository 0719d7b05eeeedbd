//! Timeout release: unpaid orders past their deadline expire, and their units go back to the
//! shards they came from, exactly once.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{BackstopReport, RefundReport, confirm, int, mirror, s, text, transaction};
use crate::checkout::{self, ProviderApi, SessionStatus};
use crate::error::{Error, ErrorCode};
use crate::event::EventId;
use crate::nodes::Nodes;
use crate::provider::{Notice, PaymentMode, Succeeded};
use crate::registry;
use crate::scripts::set_order_status::Final;
use crate::sharded::{EventShards, transfer};
use crate::sql::{DbError, Param as P, Sql};
use crate::store::Store;

/// What a timeout-release run did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct ReleaseReport {
    /// Orders moved pending_payment → expired in Postgres.
    pub expired: u64,
    /// Units given back to Redis shards.
    pub released: u64,
    /// Expired orders whose units could not go back this run (their event's Redis node is
    /// down, say): released by a later run.
    pub waiting_for_redis: u64,
    /// Units lent between shards by buys cut short, credited to their receivers this run.
    pub transfers_credited: u64,
    /// Shards (`event/shard`) whose units could not go back this run, and events whose
    /// transfers could not be finished, with the reason.
    pub event_errors: BTreeMap<String, String>,
    /// What the provider said of the checkout sessions of orders past their deadline.
    pub sessions: SessionReport,
    /// Refunds owed, paid back through the provider.
    pub refunds: RefundReport,
    /// Payments recovered from the provider's events list (webhooks lost).
    pub backstop: BackstopReport,
}

/// Checkout sessions closed at the provider before their orders' units go back.
#[derive(Debug, Default, Clone, Serialize)]
pub struct SessionReport {
    /// Expired at the provider: their orders may expire.
    pub expired: u64,
    /// Paid before we could expire them: their orders were settled from the provider's record.
    pub settled: u64,
    /// Completed with the payment still processing: their orders wait for its event.
    pub processing: u64,
    /// Left for the next run: the provider rate limited us, or the run's budget was spent.
    pub deferred: u64,
    /// Sessions the provider could not answer for, with the reason (tried again next run).
    pub errors: BTreeMap<String, String>,
}

impl SessionReport {
    /// A later run's report added to this one's (a job repeated for its time budget).
    pub(crate) fn add(&mut self, later: Self) {
        self.expired += later.expired;
        self.settled += later.settled;
        self.processing += later.processing;
        // Still left after the last run: that run's count, not a sum.
        self.deferred = later.deferred;
        self.errors.extend(later.errors);
    }
}

/// Checkout sessions one release run asks the provider about at most: a second of Stripe's
/// live-mode limit (100 requests a second; 25 in test mode), which it shares with the pay
/// route. A 429 ends the run early; the rest wait for the next run.
pub const SESSIONS_PER_RUN: u32 = 100;

/// Pages of the provider's events one run reads at most (100 events each).
pub const EVENT_PAGES_PER_RUN: u32 = 10;

/// The provider, for the sessions timeout release closes.
pub struct Provider<'a> {
    pub api: &'a dyn ProviderApi,
    /// The deployment's mode, which a settlement is held to as an event is.
    pub mode: PaymentMode,
    /// The most sessions one run asks about (the provider's rate limits are per second).
    pub budget: u32,
}

/// Before any order expires, the open checkout sessions of orders past their deadline are
/// expired at the provider. The provider answers for each: expired (no payment can complete
/// for it any more: the order may expire), or complete (the buyer paid first: the order is
/// paid from the provider's record, whenever its webhook comes). Only then, in
/// [`release_expired`], does a unit go back: an order whose session is still open never expires.
pub fn close_sessions<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    provider: &Provider,
    now_ms: u64,
) -> Result<SessionReport, Error> {
    let due = db.query(
        "SELECT p.session_id, p.payment_id FROM payments p JOIN orders o USING (order_id)
             WHERE p.session_status = 'open' AND o.status = 'pending_payment'
               AND o.pay_deadline_ms <= $1
             ORDER BY o.pay_deadline_ms LIMIT $2",
        &[
            P::Int64(now_ms as i64),
            P::Int64(i64::from(provider.budget) + 1),
        ],
    )?;
    let mut report = SessionReport::default();
    let mut rows = due.rows.iter();
    for (n, row) in rows.by_ref().enumerate() {
        if n as u32 == provider.budget {
            report.deferred += 1;
            break;
        }
        let (session_id, payment_id) = (text(row, 0)?, text(row, 1)?);
        let session = match checkout::expire_session(provider.api, &session_id) {
            Ok(session) => session,
            Err(e) if e.code() == ErrorCode::ProviderBusy => {
                report.deferred += 1;
                break;
            }
            Err(e) => {
                report.errors.insert(session_id, e.reason());
                continue;
            }
        };
        match (session.status, session.payment_intent.as_deref()) {
            (SessionStatus::Expired, _) => report.expired += 1,
            (SessionStatus::Complete, Some(intent)) if session.payment_status == "paid" => {
                let notice = Notice::Succeeded(Succeeded {
                    event_id: format!("settled:{session_id}"),
                    reference: intent.to_owned(),
                    payment_id,
                    amount: session.amount_total.unwrap_or(0),
                    currency: session.currency.clone().unwrap_or_default(),
                    livemode: session.livemode,
                });
                confirm::confirm(nodes, db, &notice, provider.mode, now_ms)?;
                report.settled += 1;
            }
            (SessionStatus::Complete, _) => report.processing += 1,
            (SessionStatus::Open, _) => {
                report
                    .errors
                    .insert(session_id, "still open after expiring it".into());
                continue;
            }
        }
        db.execute(
            "UPDATE payments SET session_status = $2 WHERE session_id = $1",
            &[s(&session.id), s(session.status.as_str())],
        )?;
    }
    report.deferred += rows.count() as u64;
    Ok(report)
}

/// The money's sweep, on timeout release's schedule, when there is a provider: payments whose
/// webhook was lost recovered from its events list ([`super::recover_events`]), the checkout
/// sessions of orders past their deadline closed ([`close_sessions`]); then what may go is
/// released ([`release_expired`]) and the refunds owed paid back ([`super::pay_back`]); then,
/// provider or not, the buyers told where their refunds stand ([`super::tell_buyers`]).
pub fn release_due<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    provider: Option<&Provider>,
    now_ms: u64,
    limit: i64,
) -> Result<ReleaseReport, Error> {
    // Payments whose webhook was lost first, so that their orders are paid, not released.
    let backstop = match provider {
        Some(provider) => super::recover_events(
            nodes,
            db,
            provider.api,
            provider.mode,
            now_ms,
            EVENT_PAGES_PER_RUN,
        )?,
        None => BackstopReport::default(),
    };
    let sessions = match provider {
        Some(provider) => close_sessions(nodes, db, provider, now_ms)?,
        None => SessionReport::default(),
    };
    let released = release_expired(nodes, db, now_ms, limit)?;
    let mut refunds = match provider {
        Some(provider) => super::pay_back(db, provider.api, now_ms, provider.budget)?,
        None => RefundReport::default(),
    };
    // With a provider or without (refunds then paid back by hand), buyers see where theirs stand.
    refunds.buyers_told = super::tell_buyers(nodes, db, super::refund::BUYERS_TOLD_PER_RUN)?;
    Ok(ReleaseReport {
        sessions,
        refunds,
        backstop,
        ..released
    })
}

/// Expires unpaid orders past their deadline whose checkout session (if any) the provider has
/// closed (compare-and-set, rows locked, ledger updated once per event) and gives their units
/// back to Redis exactly once (the Redis step is idempotent and retried until Postgres records
/// it as done).
pub fn release_expired(
    nodes: &Nodes<impl Store>,
    db: &impl Sql,
    now_ms: u64,
    limit: i64,
) -> Result<ReleaseReport, Error> {
    let expired = transaction(db, || {
        let rows = db.query(
            "WITH due AS (
                 SELECT order_id, shard FROM orders
                 WHERE status = 'pending_payment' AND pay_deadline_ms <= $1
                   AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = orders.order_id
                                   AND p.session_status IN ('open', 'complete'))
                 ORDER BY pay_deadline_ms LIMIT $2 FOR UPDATE SKIP LOCKED
             ), gone AS (
                 UPDATE orders o SET status = 'expired', expired_ms = $1
                 FROM due WHERE o.order_id = due.order_id AND o.status = 'pending_payment'
                 RETURNING o.event_id
             ), per_event AS (SELECT event_id, count(*) AS n FROM gone GROUP BY event_id),
             ledger AS (
                 UPDATE stock_ledger l SET available = available + p.n, held = held - p.n,
                     released = released + p.n
                 FROM per_event p WHERE l.event_id = p.event_id RETURNING p.n
             )
             SELECT coalesce(sum(n), 0)::bigint FROM ledger",
            &[P::Int64(now_ms as i64), P::Int64(limit)],
        )?;
        Ok::<_, DbError>(rows.rows.first().map_or(Ok(0), |r| int(r, 0))? as u64)
    })?;
    // Up to `limit` per shard of each event, every shard with units to give back: one shard
    // with many stuck rows (on a Redis node that is down, say) never starves the others.
    let pending = db.query(
        "SELECT e.event_id, o.order_id, e.shard::bigint
             FROM (SELECT DISTINCT event_id, shard FROM orders
                   WHERE status = 'expired' AND NOT released_in_redis) e
             CROSS JOIN LATERAL (
                 SELECT order_id FROM orders
                 WHERE event_id = e.event_id AND shard = e.shard
                   AND status = 'expired' AND NOT released_in_redis
                 ORDER BY expired_ms, order_id LIMIT $1) o",
        &[P::Int64(limit)],
    )?;
    let mut by_shard: BTreeMap<(String, i64), Vec<String>> = Default::default();
    for row in &pending.rows {
        by_shard
            .entry((text(row, 0)?, int(row, 2)?))
            .or_default()
            .push(text(row, 1)?);
    }
    let mut report = ReleaseReport {
        expired,
        ..ReleaseReport::default()
    };
    for ((event, shard), orders) in by_shard {
        let count = orders.len() as u64;
        match give_back(nodes, db, &event, shard, orders) {
            Ok(released) => report.released += released,
            Err(e) => {
                report.waiting_for_redis += count;
                report
                    .event_errors
                    .insert(format!("{event}/{shard}"), e.reason());
            }
        }
    }
    finish_transfers(nodes, &mut report);
    Ok(report)
}

/// A transfer older than this is finished by the job: a buy's tail takes milliseconds.
const TRANSFER_REPAIR_AGE_MS: u64 = 5_000;

/// Units a buy's tail lent and never brought home (its caller died between the two steps)
/// are credited to their shard here, every run, for every event ([`transfer::repair`]).
fn finish_transfers(nodes: &Nodes<impl Store>, report: &mut ReleaseReport) {
    for store in nodes.all() {
        let Ok(events) = store.map_err(Error::from).and_then(registry::events) else {
            continue; // the drain and the health check report nodes that are down
        };
        for event in events {
            let repaired = EventShards::open(nodes, &event)
                .and_then(|(e, _)| transfer::repair(&e, TRANSFER_REPAIR_AGE_MS));
            match repaired {
                Ok(r) => report.transfers_credited += r.credited,
                // Registered, never configured: nothing to finish.
                Err(e) if e.code() == ErrorCode::EventNotFound => {}
                Err(e) => {
                    report
                        .event_errors
                        .insert(event.as_str().to_owned(), e.reason());
                }
            }
        }
    }
}

/// Gives the units of one shard's expired orders back to it (once: the script flips each
/// order's Redis status with the INCR), then records that in Postgres.
fn give_back(
    nodes: &Nodes<impl Store>,
    db: &impl Sql,
    event: &str,
    shard: i64,
    orders: Vec<String>,
) -> Result<u64, Error> {
    let event = EventId::parse(event)?;
    let shard = u32::try_from(shard).map_err(Error::bug)?;
    let released = mirror(nodes, &event, shard, Final::Expired, &orders)?;
    db.execute(
        "UPDATE orders SET released_in_redis = true WHERE order_id = ANY($1::text[])",
        &[P::ArrayStr(orders)],
    )?;
    Ok(released)
}
