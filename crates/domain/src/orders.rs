//! Orders after the buy: the drain into Postgres, payment, timeout release and reconciliation.
//! Postgres is the record; Redis mirrors each order's state for poll.
//!
//! Every function here is called from a scheduled component (spin-trigger-cron) *and* from an
//! authenticated HTTP route (`functions/jobs`), for platforms without a cron trigger.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Dependency, Error};
use crate::event::EventId;
use crate::keys::EventKeys;
use crate::nodes::Nodes;
use crate::scripts;
use crate::scripts::drain_claim::{Claim, Lease};
use crate::scripts::drain_read::{self, Entry};
use crate::scripts::set_order_status::Final;
use crate::sql::{Cell, DbError, Param as P, Sql};
use crate::store::Store;

/// Orders read per reconcile script call: small enough that no call blocks Redis for long.
const RECONCILE_PAGE: u32 = 1_000;

/// Whether `e` says Postgres is gone: then every other event's work would fail too.
fn postgres_lost(e: &Error) -> bool {
    matches!(
        e,
        Error::Unavailable {
            dependency: Dependency::Postgres,
            ..
        }
    )
}

impl From<DbError> for Error {
    fn from(e: DbError) -> Self {
        if e.connection {
            Error::unavailable(
                Dependency::Postgres,
                "orders database unavailable; try again",
                e,
            )
        } else {
            Error::bug(e)
        }
    }
}

fn s(v: &str) -> P {
    P::Str(v.to_owned())
}

fn int(row: &[Cell], i: usize) -> i64 {
    match row.get(i) {
        Some(Cell::Int64(v)) => *v,
        Some(Cell::Int32(v)) => i64::from(*v),
        _ => 0,
    }
}

fn text(row: &[Cell], i: usize) -> String {
    match row.get(i) {
        Some(Cell::Str(v)) => v.clone(),
        _ => String::new(),
    }
}

/// Runs `f` inside BEGIN … COMMIT; rolls back when it fails. `Ok` means committed: a COMMIT
/// that fails is an error.
fn transaction<T, E: From<DbError>>(
    db: &impl Sql,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    db.execute("BEGIN", &[])?;
    match f() {
        Ok(v) => {
            db.execute("COMMIT", &[])?;
            Ok(v)
        }
        Err(e) => {
            let _ = db.execute("ROLLBACK", &[]);
            Err(e)
        }
    }
}

/// Tuning of the drain (Spin variables, see `spin.toml`).
#[derive(Debug, Clone)]
pub struct DrainOptions {
    /// This invocation's consumer name (unique per run).
    pub owner: String,
    /// Entries per batch (one transaction, one ledger update).
    pub batch: usize,
    /// Batches per event per run.
    pub max_batches: usize,
    /// Lease lifetime; renewed every batch.
    pub lease_ms: u64,
    /// An entry delivered but unacknowledged this long is taken over.
    pub reclaim_idle_ms: u64,
    /// Deliveries before an entry goes to the dead-letter stream.
    pub max_deliveries: u32,
    /// No batch starts after this instant (a run with a time budget); `None`: only
    /// `max_batches` bounds the run.
    pub until: Option<Instant>,
    /// Test-only fault injection (feature `fault-injection`, never in the product):
    /// `trap_after_commit` dies between commit and acknowledge, `trap_in_transaction` between
    /// BEGIN and COMMIT.
    pub fault: Option<String>,
}

/// What one drain run did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct DrainReport {
    /// Events looked at.
    pub events: usize,
    /// Rows inserted into Postgres.
    pub inserted: u64,
    /// Orders newly marked confirmed in Redis.
    pub confirmed: u64,
    /// Entries that failed and stay pending (retried, then dead-lettered).
    pub failed: u64,
    /// Events another drainer holds.
    pub busy: Vec<String>,
    /// Redis nodes that could not be reached (their events wait for the next run).
    pub unreachable_nodes: usize,
    /// Events whose drain failed this run, with the reason; the others were drained.
    pub event_errors: BTreeMap<String, String>,
}

/// Drains every event's queue into Postgres: lease with fencing per event, batches written in
/// one transaction each (multi-row insert `ON CONFLICT DO NOTHING`, one ledger update), then
/// acknowledged and confirmed in Redis. Redelivery is harmless.
pub fn drain(
    nodes: &Nodes<impl Store>,
    db: &impl Sql,
    opts: &DrainOptions,
    now_ms: u64,
) -> Result<DrainReport, Error> {
    let mut report = DrainReport::default();
    for store in nodes.all() {
        // A node that is down, or fails its first call, holds up only its own events.
        let Ok((store, events)) = store
            .map_err(Error::from)
            .and_then(|s| Ok((s, registered_events(s)?)))
        else {
            report.unreachable_nodes += 1;
            continue;
        };
        for event in events {
            report.events += 1;
            // One failing event must not hold back the others; a lost Postgres would fail
            // them all, so that one ends the run.
            match drain_event(store, db, &event, opts, now_ms, &mut report) {
                Ok(()) => {}
                Err(e) if postgres_lost(&e) => return Err(e),
                Err(e) => {
                    report
                        .event_errors
                        .insert(event.as_str().to_owned(), e.reason());
                }
            }
        }
    }
    Ok(report)
}

/// The events registered on one Redis node, for the scheduled jobs to walk.
pub fn registered_events(store: &impl Store) -> Result<Vec<EventId>, Error> {
    scripts::list_events::run(store)?
        .iter()
        .map(|id| EventId::parse(id))
        .collect()
}

/// The poll-carried drain: drains one event's queue within `opts` (its `until` bounds the
/// time). The same lease and fencing as [`drain`], so it may race the scheduled drain safely.
pub fn catch_up(
    store: &impl Store,
    db: &impl Sql,
    event: &EventId,
    opts: &DrainOptions,
    now_ms: u64,
) -> Result<DrainReport, Error> {
    let mut report = DrainReport {
        events: 1,
        ..DrainReport::default()
    };
    drain_event(store, db, event, opts, now_ms, &mut report)?;
    Ok(report)
}

fn drain_event(
    store: &impl Store,
    db: &impl Sql,
    event: &EventId,
    opts: &DrainOptions,
    now_ms: u64,
    report: &mut DrainReport,
) -> Result<(), Error> {
    let k = EventKeys::new(event);
    let mut lease = None;
    let result = drain_batches(store, db, event, &k, opts, now_ms, report, &mut lease);
    // Done (or failed): hand the lease back so the next run need not wait for it to expire.
    if let Some(lease) = lease {
        scripts::drain_release::run(store, &k, &lease)?;
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn drain_batches(
    store: &impl Store,
    db: &impl Sql,
    event: &EventId,
    k: &EventKeys,
    opts: &DrainOptions,
    now_ms: u64,
    report: &mut DrainReport,
    held: &mut Option<String>,
) -> Result<(), Error> {
    for _ in 0..opts.max_batches {
        if opts.until.is_some_and(|until| Instant::now() >= until) {
            return Ok(());
        }
        // Claim or renew the lease every batch: a slow batch cannot outlive it unnoticed.
        let facts = match scripts::drain_claim::run(store, k, &opts.owner, opts.lease_ms)? {
            Claim::Held(lease) => lease,
            Claim::Busy => {
                report.busy.push(event.as_str().to_owned());
                return Ok(());
            }
            Claim::NoEvent => return Ok(()),
        };
        let lease = format!("{}|{}", opts.owner, facts.fence);
        *held = Some(lease.clone());
        let limits = drain_read::Limits {
            batch: opts.batch,
            reclaim_idle_ms: opts.reclaim_idle_ms,
            max_deliveries: opts.max_deliveries,
        };
        let Some(entries) = drain_read::run(store, k, &lease, limits)? else {
            return Ok(()); // the lease moved on: the new holder drains
        };
        if entries.is_empty() {
            return Ok(());
        }
        let committed =
            match write_batch(db, event, &facts, &entries, now_ms, opts.fault.as_deref()) {
                Ok(inserted) => {
                    report.inserted += inserted;
                    entries.iter().collect::<Vec<_>>()
                }
                Err(e) if e.is_connection() => return Err(e.into()),
                Err(StaleOrFailed::Stale) => return Ok(()),
                // One bad entry must not hold back the rest: write them one by one.
                Err(e) => isolate(
                    store,
                    db,
                    k,
                    event,
                    &facts,
                    &entries,
                    now_ms,
                    &e.to_string(),
                    report,
                )?,
            };
        #[cfg(feature = "fault-injection")]
        if opts.fault.as_deref() == Some("trap_after_commit") {
            panic!("fault injection: drain dies between commit and acknowledge");
        }
        let pairs: Vec<(&str, &str)> = committed
            .iter()
            .map(|e| (e.id.as_str(), e.order.as_str()))
            .collect();
        report.confirmed += scripts::drain_confirm::run(store, k, &pairs)?;
        if entries.len() < opts.batch {
            return Ok(());
        }
    }
    Ok(())
}

/// Why a batch did not commit.
enum StaleOrFailed {
    /// A newer fence has written: this drainer lost its lease.
    Stale,
    /// Postgres refused.
    Db(DbError),
}

impl StaleOrFailed {
    fn is_connection(&self) -> bool {
        matches!(self, StaleOrFailed::Db(e) if e.connection)
    }
}

impl std::fmt::Display for StaleOrFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StaleOrFailed::Stale => write!(f, "stale fencing token"),
            StaleOrFailed::Db(e) => write!(f, "{e}"),
        }
    }
}

impl From<DbError> for StaleOrFailed {
    fn from(e: DbError) -> Self {
        StaleOrFailed::Db(e)
    }
}

impl From<StaleOrFailed> for Error {
    fn from(e: StaleOrFailed) -> Self {
        match e {
            StaleOrFailed::Db(e) => e.into(),
            StaleOrFailed::Stale => {
                Error::unavailable(Dependency::Redis, "drain lease lost", "a newer fence wrote")
            }
        }
    }
}

/// The batch statement: insert what is new, then move exactly that many units from `available`
/// to `held` in one update. The ledger's CHECK makes a Postgres oversell impossible.
const INSERT_BATCH: &str = "
WITH new AS (
    INSERT INTO orders (order_id, event_id, user_id, shard, seq, status, created_ms, confirmed_ms, pay_deadline_ms)
    SELECT o, $1, u, s::integer, q, 'pending_payment', c, $6::bigint, c + $7::bigint * 1000
    FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $8::bigint[]) AS t(o, u, s, q, c)
    ON CONFLICT DO NOTHING
    RETURNING 1
), n AS (SELECT count(*) AS n FROM new)
UPDATE stock_ledger SET available = available - n.n, held = held + n.n
FROM n WHERE event_id = $1
RETURNING n.n";

fn write_batch(
    db: &impl Sql,
    event: &EventId,
    facts: &Lease,
    entries: &[Entry],
    now_ms: u64,
    #[cfg_attr(not(feature = "fault-injection"), allow(unused_variables))] fault: Option<&str>,
) -> Result<u64, StaleOrFailed> {
    let ev = event.as_str();
    transaction(db, || {
        let fenced = db.execute(
            "INSERT INTO drain_fences (event_id, fence) VALUES ($1, $2)
             ON CONFLICT (event_id) DO UPDATE SET fence = EXCLUDED.fence
             WHERE drain_fences.fence <= EXCLUDED.fence",
            &[s(ev), P::Int64(facts.fence)],
        )?;
        if fenced == 0 {
            return Err(StaleOrFailed::Stale);
        }
        db.execute(
            "INSERT INTO events (event_id, sku, initial_stock, payment_timeout_s) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING",
            &[s(ev), s(&facts.sku), P::Int64(facts.stock), P::Int64(facts.payment_timeout_s)],
        )?;
        db.execute(
            "INSERT INTO stock_ledger (event_id, available) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[s(ev), P::Int64(facts.stock)],
        )?;
        let col = |f: &dyn Fn(&Entry) -> String| P::ArrayStr(entries.iter().map(f).collect());
        let nums = |f: &dyn Fn(&Entry) -> i64| P::ArrayInt64(entries.iter().map(f).collect());
        let rows = db.query(
            INSERT_BATCH,
            &[
                s(ev),
                col(&|e| e.order.clone()),
                col(&|e| e.user.clone()),
                nums(&|e| e.shard),
                nums(&|e| e.seq),
                P::Int64(now_ms as i64),
                P::Int64(facts.payment_timeout_s),
                nums(&|e| e.created_ms),
            ],
        )?;
        #[cfg(feature = "fault-injection")]
        if fault == Some("trap_in_transaction") {
            panic!("fault injection: drain dies between BEGIN and COMMIT");
        }
        Ok(rows.rows.first().map_or(0, |r| int(r, 0)) as u64)
    })
}

/// Writes a failed batch entry by entry; those that still fail stay pending with their error.
#[allow(clippy::too_many_arguments)]
fn isolate<'a>(
    store: &impl Store,
    db: &impl Sql,
    k: &EventKeys,
    event: &EventId,
    facts: &Lease,
    entries: &'a [Entry],
    now_ms: u64,
    batch_error: &str,
    report: &mut DrainReport,
) -> Result<Vec<&'a Entry>, Error> {
    let mut committed = Vec::new();
    let mut failed = Vec::new();
    for e in entries {
        match write_batch(db, event, facts, std::slice::from_ref(e), now_ms, None) {
            Ok(n) => {
                report.inserted += n;
                committed.push(e);
            }
            Err(err) if err.is_connection() => return Err(err.into()),
            Err(StaleOrFailed::Stale) => break,
            Err(err) => {
                report.failed += 1;
                failed.push((e.id.as_str(), format!("{err} (batch: {batch_error})")));
            }
        }
    }
    if !failed.is_empty() {
        let failed: Vec<(&str, &str)> = failed.iter().map(|(id, e)| (*id, e.as_str())).collect();
        scripts::drain_failed::run(store, k, &failed)?;
    }
    Ok(committed)
}

/// The outcome of `pay`.
#[derive(Debug, Clone, Serialize)]
pub struct Paid {
    /// The order.
    pub order_id: String,
    /// Always `paid`.
    pub status: &'static str,
}

/// Marks an order paid, by compare-and-set from `pending_payment` before its deadline. An
/// order that expired (or whose deadline passed) is refused with 409: never paid and released.
pub fn pay(
    store: &impl Store,
    db: &impl Sql,
    event: &EventId,
    user: &str,
    order_id: &str,
    now_ms: u64,
) -> Result<Paid, Error> {
    let key = [s(order_id), s(event.as_str()), s(user)];
    let mut params = key.to_vec();
    params.push(P::Int64(now_ms as i64));
    // One transaction, committed before the answer: a 200 means the payment is in Postgres.
    transaction(db, || {
        let updated = db.execute(
            "UPDATE orders SET status = 'paid', paid_ms = $4
                 WHERE order_id = $1 AND event_id = $2 AND user_id = $3
                   AND status = 'pending_payment' AND pay_deadline_ms > $4",
            &params,
        )?;
        if updated > 0 {
            return Ok(());
        }
        let rows = db.query(
            "SELECT status FROM orders WHERE order_id = $1 AND event_id = $2 AND user_id = $3",
            &key,
        )?;
        match rows.rows.first().map(|r| text(r, 0)).as_deref() {
            Some("paid") => Ok(()),
            Some("pending_payment" | "expired") => Err(Error::refused(
                "order_expired",
                "the payment window has closed",
            )),
            Some(other) => Err(Error::refused("conflict", format!("order is {other}"))),
            None => Err(Error::refused(
                "order_not_found",
                "no such order of yours (a new order takes a moment to be confirmed)",
            )),
        }
    })?;
    mirror(store, event, Final::Paid, &[order_id.to_owned()])?;
    Ok(Paid {
        order_id: order_id.to_owned(),
        status: "paid",
    })
}

/// Mirrors final states in Redis; for `expired` this returns the units to their shards, once.
fn mirror(
    store: &impl Store,
    event: &EventId,
    status: Final,
    orders: &[String],
) -> Result<u64, Error> {
    Ok(scripts::set_order_status::run(
        store,
        &EventKeys::new(event),
        status,
        orders,
    )?)
}

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
    /// Events whose units could not go back this run, with the reason.
    pub event_errors: BTreeMap<String, String>,
}

/// Expires unpaid orders past their deadline (compare-and-set, rows locked, ledger updated once
/// per event) and gives their units back to Redis exactly once (the Redis step is idempotent
/// and retried until Postgres records it as done).
pub fn release_expired(
    nodes: &Nodes<impl Store>,
    db: &impl Sql,
    now_ms: u64,
    limit: i64,
) -> Result<ReleaseReport, Error> {
    let expired = transaction(db, || {
        let rows = db.query(
            "WITH due AS (
                 SELECT order_id FROM orders
                 WHERE status = 'pending_payment' AND pay_deadline_ms <= $1
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
        Ok::<_, DbError>(rows.rows.first().map_or(0, |r| int(r, 0)) as u64)
    })?;
    // Up to `limit` per event, every event with units to give back: one event with many stuck
    // rows (or on a Redis node that is down) never starves the others.
    let pending = db.query(
        "SELECT e.event_id, o.order_id
             FROM (SELECT DISTINCT event_id FROM orders
                   WHERE status = 'expired' AND NOT released_in_redis) e
             CROSS JOIN LATERAL (
                 SELECT order_id FROM orders
                 WHERE event_id = e.event_id AND status = 'expired' AND NOT released_in_redis
                 ORDER BY expired_ms, order_id LIMIT $1) o",
        &[P::Int64(limit)],
    )?;
    let mut by_event: BTreeMap<String, Vec<String>> = Default::default();
    for row in &pending.rows {
        by_event.entry(text(row, 0)).or_default().push(text(row, 1));
    }
    let mut report = ReleaseReport {
        expired,
        ..ReleaseReport::default()
    };
    for (event, orders) in by_event {
        let count = orders.len() as u64;
        match give_back(nodes, db, &event, orders) {
            Ok(released) => report.released += released,
            Err(e) => {
                report.waiting_for_redis += count;
                report.event_errors.insert(event, e.reason());
            }
        }
    }
    Ok(report)
}

/// Gives the units of one event's expired orders back to its shards (once: the script flips
/// each order's Redis status with the INCR), then records that in Postgres.
fn give_back(
    nodes: &Nodes<impl Store>,
    db: &impl Sql,
    event: &str,
    orders: Vec<String>,
) -> Result<u64, Error> {
    let event = EventId::parse(event)?;
    let released = mirror(nodes.for_event(&event)?, &event, Final::Expired, &orders)?;
    db.execute(
        "UPDATE orders SET released_in_redis = true WHERE order_id = ANY($1::text[])",
        &[P::ArrayStr(orders)],
    )?;
    Ok(released)
}

/// The books of several events (`POST /admin/jobs/reconcile`, the reconcile cron).
#[derive(Debug, Default, Clone, Serialize)]
pub struct Reconciliations {
    /// One entry per event reconciled.
    pub events: Vec<Reconciliation>,
    /// Events that could not be reconciled this run, with the reason; the others were.
    pub event_errors: BTreeMap<String, String>,
    /// Redis nodes that could not be reached (their events are not in `events`).
    pub unreachable_nodes: usize,
}

impl Reconciliations {
    /// Whether an operator needs to look: drift, ledger drift, dead letters or a failure.
    pub fn needs_an_operator(&self) -> bool {
        self.unreachable_nodes > 0
            || !self.event_errors.is_empty()
            || self.events.iter().any(|b| {
                b.drift != 0 || b.dead_letters != 0 || b.ledger_drift.is_some_and(|d| d != 0)
            })
    }
}

/// Reconciles `events` (or every registered event on every node), each on its own: one that
/// fails is reported and the others are still checked.
pub fn reconcile_all(
    nodes: &Nodes<impl Store>,
    db: &impl Sql,
    events: Option<Vec<EventId>>,
    repair: bool,
) -> Result<Reconciliations, Error> {
    let mut books = Reconciliations::default();
    let asked = events.is_some();
    let events = match events {
        Some(events) => events,
        None => {
            let mut all = Vec::new();
            for store in nodes.all() {
                match store.map_err(Error::from).and_then(registered_events) {
                    Ok(listed) => all.extend(listed),
                    Err(_) => books.unreachable_nodes += 1,
                }
            }
            all
        }
    };
    for event in events {
        match nodes
            .for_event(&event)
            .map_err(Error::from)
            .and_then(|store| reconcile(store, db, &event, repair))
        {
            Ok(b) => books.events.push(b),
            // Asked for by name, a missing event is the caller's 404; found in the registry,
            // it is an event whose creation failed after registering it: nothing to check.
            Err(e) if e.code() == "event_not_found" => {
                if asked {
                    return Err(e);
                }
            }
            Err(e) if postgres_lost(&e) => return Err(e),
            Err(e) => {
                books
                    .event_errors
                    .insert(event.as_str().to_owned(), e.reason());
            }
        }
    }
    Ok(books)
}

/// An event's books, Redis and Postgres side by side.
#[derive(Debug, Clone, Serialize)]
pub struct Reconciliation {
    /// The event.
    pub event_id: String,
    /// Units put on sale.
    pub initial_stock: i64,
    /// Units left in the Redis shards.
    pub remaining_in_redis: i64,
    /// Accepted buys not yet drained into Postgres.
    pub in_flight: i64,
    /// Pending and paid orders in Postgres.
    pub held_in_postgres: i64,
    /// Expired in Postgres, not yet back in Redis.
    pub awaiting_release: i64,
    /// Entries in the dead-letter stream (accepted orders that could not land: an operator's job).
    pub dead_letters: i64,
    /// Dead letters that are sold orders: not in flight any more, so they show as drift.
    pub dead_orders: i64,
    /// initial − (remaining + in flight + held + awaiting release): 0 when the books balance.
    pub drift: i64,
    /// Postgres's own books: available + held = initial (0 when they agree; null before the
    /// first drain).
    pub ledger_drift: Option<i64>,
    /// Orders whose state disagrees (Postgres expired, Redis not released), repaired if asked.
    pub unreleased_orders: Vec<String>,
    /// When the books do not balance: orders Redis says reached Postgres that Postgres lacks
    /// (at most 100).
    pub missing_in_postgres: Vec<String>,
    /// When the books do not balance: orders in Postgres that Redis does not know (at most 100).
    pub unknown_to_redis: Vec<String>,
    /// Whether the safe repairs ran.
    pub repaired: bool,
}

/// Compares the order sets of Redis and Postgres to name what the drift consists of.
fn name_offenders(
    store: &impl Store,
    db: &impl Sql,
    k: &EventKeys,
    event: &EventId,
    out: &mut Reconciliation,
) -> Result<(), Error> {
    // Paged (HSCAN): a large event's orders are read a page per script call.
    let mut redis_orders = std::collections::HashMap::new();
    let mut cursor = "0".to_owned();
    loop {
        let page = scripts::reconcile_orders::run(store, k, &cursor, RECONCILE_PAGE)?;
        redis_orders.extend(page.orders);
        cursor = page.cursor;
        if cursor == "0" {
            break;
        }
    }
    let in_pg: std::collections::HashSet<String> = db
        .query(
            "SELECT order_id FROM orders WHERE event_id = $1",
            &[s(event.as_str())],
        )?
        .rows
        .iter()
        .map(|r| text(r, 0))
        .collect();
    out.missing_in_postgres = redis_orders
        .iter()
        .filter(|(id, status)| status.as_str() != "queued" && !in_pg.contains(*id))
        .map(|(id, _)| id.clone())
        .take(100)
        .collect();
    out.unknown_to_redis = in_pg
        .iter()
        .filter(|id| !redis_orders.contains_key(*id))
        .take(100)
        .cloned()
        .collect();
    Ok(())
}

/// Checks one event's books and, when `repair` is set, gives back units of expired orders that
/// never reached Redis (safe: the release is idempotent).
pub fn reconcile(
    store: &impl Store,
    db: &impl Sql,
    event: &EventId,
    repair: bool,
) -> Result<Reconciliation, Error> {
    let k = EventKeys::new(event);
    let books = scripts::reconcile_read::run(store, &k)?;
    let (initial, remaining, accepted, drained, dead, dead_orders) = (
        books.initial_stock,
        books.remaining,
        books.accepted,
        books.drained,
        books.dead_letters,
        books.dead_orders,
    );
    let ev = [s(event.as_str())];
    let held = db.query(
        "SELECT count(*) FILTER (WHERE status IN ('pending_payment', 'paid'))::bigint,
                    count(*) FILTER (WHERE status = 'expired' AND NOT released_in_redis)::bigint
             FROM orders WHERE event_id = $1",
        &ev,
    )?;
    let row = held.rows.first().cloned().unwrap_or_default();
    let (held, awaiting) = (int(&row, 0), int(&row, 1));
    let ledger = db.query(
        "SELECT available + held FROM stock_ledger WHERE event_id = $1",
        &ev,
    )?;
    let unreleased: Vec<String> = db
        .query(
            "SELECT order_id FROM orders WHERE event_id = $1 AND status = 'expired' AND NOT released_in_redis",
            &ev,
        )
        ?
        .rows
        .iter()
        .map(|r| text(r, 0))
        .collect();
    // A dead-lettered order was sold and will never land by itself: it is drift, for an operator.
    let in_flight = accepted - drained - dead_orders;
    let mut out = Reconciliation {
        event_id: event.as_str().to_owned(),
        initial_stock: initial,
        remaining_in_redis: remaining,
        in_flight,
        held_in_postgres: held,
        awaiting_release: awaiting,
        dead_letters: dead,
        dead_orders,
        drift: initial - (remaining + in_flight + held + awaiting),
        ledger_drift: ledger.rows.first().map(|r| initial - int(r, 0)),
        unreleased_orders: unreleased,
        missing_in_postgres: Vec::new(),
        unknown_to_redis: Vec::new(),
        repaired: false,
    };
    if out.drift != 0 {
        name_offenders(store, db, &k, event, &mut out)?;
    }
    if repair && !out.unreleased_orders.is_empty() {
        mirror(store, event, Final::Expired, &out.unreleased_orders)?;
        db.execute(
            "UPDATE orders SET released_in_redis = true WHERE order_id = ANY($1::text[])",
            &[P::ArrayStr(out.unreleased_orders.clone())],
        )?;
        out.repaired = true;
    }
    Ok(out)
}

/// A job's report, summed over the runs of [`repeat_for`].
pub trait JobReport: Default {
    /// Adds a later run's report to this one.
    fn add(&mut self, later: Self);
    /// Whether the run found nothing to do (the next one may wait a little).
    fn idle(&self) -> bool;
}

impl JobReport for DrainReport {
    fn add(&mut self, later: Self) {
        self.events = self.events.max(later.events);
        self.inserted += later.inserted;
        self.confirmed += later.confirmed;
        self.failed += later.failed;
        for event in later.busy {
            if !self.busy.contains(&event) {
                self.busy.push(event);
            }
        }
        self.unreachable_nodes = self.unreachable_nodes.max(later.unreachable_nodes);
        self.event_errors.extend(later.event_errors);
    }
    fn idle(&self) -> bool {
        self.inserted == 0 && self.confirmed == 0 && self.failed == 0
    }
}

impl JobReport for ReleaseReport {
    fn add(&mut self, later: Self) {
        self.expired += later.expired;
        self.released += later.released;
        // Still waiting after the last run: that run's count, not a sum.
        self.waiting_for_redis = later.waiting_for_redis;
        self.event_errors.extend(later.event_errors);
    }
    fn idle(&self) -> bool {
        self.expired == 0 && self.released == 0
    }
}

/// A job run again and again for a time budget.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Repeated<R> {
    /// How many times the job ran.
    pub runs: u32,
    /// Their reports, summed.
    #[serde(flatten)]
    pub report: R,
}

/// Runs `job` until `budget` has passed (once at least), pausing `pause` after a run that found
/// nothing to do. A coarse scheduler (Akamai's cron fires every 5 minutes at most) calls the
/// job route with a budget close to the time a request may run, so the work keeps flowing for
/// most of each period instead of once per period. `job` gets the instant its run must end by.
pub fn repeat_for<R: JobReport>(
    budget: Duration,
    pause: Duration,
    mut job: impl FnMut(Instant) -> Result<R, Error>,
) -> Result<Repeated<R>, Error> {
    let until = Instant::now() + budget;
    let mut done = Repeated::<R>::default();
    loop {
        let report = job(until)?;
        let idle = report.idle();
        done.runs += 1;
        done.report.add(report);
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(done);
        }
        if idle {
            std::thread::sleep(pause.min(left));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_job_runs_for_its_budget_and_pauses_when_idle() {
        let mut calls = 0;
        let started = Instant::now();
        let done = repeat_for(
            Duration::from_millis(120),
            Duration::from_millis(50),
            |until| {
                calls += 1;
                assert!(until > Instant::now() || calls > 1);
                // Busy on the first run, idle afterwards.
                Ok(ReleaseReport {
                    expired: u64::from(calls == 1),
                    ..ReleaseReport::default()
                })
            },
        )
        .unwrap();
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(120), "{took:?}");
        // One busy run, then idle runs 50 ms apart: about 3 more, never a busy loop.
        assert!((2..=5).contains(&done.runs), "{}", done.runs);
        assert_eq!((done.report.expired, done.runs), (1, calls));
    }

    #[test]
    fn a_failing_run_ends_the_repetition() {
        let failed = repeat_for(
            Duration::from_secs(5),
            Duration::from_millis(1),
            |_| -> Result<DrainReport, Error> { Err(Error::bug("boom")) },
        );
        assert!(failed.is_err());
    }
}
