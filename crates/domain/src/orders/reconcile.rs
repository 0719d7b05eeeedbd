//! Reconciliation: each event's books, Redis and Postgres side by side, the offenders named,
//! and (on request) expired units that never went back released.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{RECONCILE_PAGE, int, mirror, postgres_lost, s, text};
use crate::error::{Error, ErrorCode};
use crate::event::EventId;
use crate::keys::OrderStatus;
use crate::nodes::Nodes;
use crate::registry;
use crate::scripts;
use crate::scripts::set_order_status::Final;
use crate::sharded::{Event, transfer};
use crate::sql::{Param as P, Sql};
use crate::store::Store;

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
                match store.map_err(Error::from).and_then(registry::events) {
                    Ok(listed) => all.extend(listed),
                    Err(_) => books.unreachable_nodes += 1,
                }
            }
            all
        }
    };
    for event in events {
        match reconcile(nodes, db, &event, repair) {
            Ok(b) => books.events.push(b),
            // Asked for by name, a missing event is the caller's 404; found in the registry,
            // it is an event whose creation failed after registering it: nothing to check.
            Err(e) if e.code() == ErrorCode::EventNotFound => {
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
fn name_offenders<S: Store>(
    e: &Event<'_, S>,
    db: &impl Sql,
    out: &mut Reconciliation,
) -> Result<(), Error> {
    let event = e.id();
    // Paged (HSCAN): a large shard's orders are read a page per script call.
    let mut redis_orders = std::collections::HashMap::new();
    for shard in e.all() {
        let (store, k) = e.slot(shard)?;
        let mut cursor = "0".to_owned();
        loop {
            let page = scripts::reconcile_orders::run(store, &k, &cursor, RECONCILE_PAGE)?;
            redis_orders.extend(page.orders);
            cursor = page.cursor;
            if cursor == "0" {
                break;
            }
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
        .collect::<Result<_, _>>()?;
    out.missing_in_postgres = redis_orders
        .iter()
        .filter(|(id, status)| **status != OrderStatus::Queued && !in_pg.contains(*id))
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

/// Checks one event's books, summed over its shards, and, when `repair` is set, gives back
/// units of expired orders that never reached Redis (safe: the release is idempotent). Units
/// lent between shards and not yet credited are credited first (always safe: a transfer credits
/// once), so the Redis side counts every unit in a shard or an order; only a buy's tail running
/// at that very instant can show as a passing drift of one.
pub fn reconcile<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    event: &EventId,
    repair: bool,
) -> Result<Reconciliation, Error> {
    let (e, config) = Event::open(nodes, event)?;
    transfer::repair(&e, 0)?;
    let initial: i64 = config
        .get("stock")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Error::bug(format!("event {} has no stock", event.as_str())))?;
    let (mut remaining, mut accepted, mut drained, mut dead, mut dead_orders) = (0, 0, 0, 0, 0);
    for shard in e.all() {
        let (store, k) = e.slot(shard)?;
        let books = scripts::reconcile_read::run(store, &k)?;
        remaining += books.remaining;
        accepted += books.accepted;
        drained += books.drained;
        dead += books.dead_letters;
        dead_orders += books.dead_orders;
    }
    let ev = [s(event.as_str())];
    let held = db.query(
        "SELECT count(*) FILTER (WHERE status IN ('pending_payment', 'paid'))::bigint,
                    count(*) FILTER (WHERE status = 'expired' AND NOT released_in_redis)::bigint
             FROM orders WHERE event_id = $1",
        &ev,
    )?;
    let row = held.rows.first().cloned().unwrap_or_default();
    let (held, awaiting) = (int(&row, 0)?, int(&row, 1)?);
    let ledger = db.query(
        "SELECT available + held FROM stock_ledger WHERE event_id = $1",
        &ev,
    )?;
    let mut unreleased_by_shard: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for r in &db
        .query(
            "SELECT order_id, shard::bigint FROM orders
                 WHERE event_id = $1 AND status = 'expired' AND NOT released_in_redis",
            &ev,
        )?
        .rows
    {
        unreleased_by_shard
            .entry(int(r, 1)?)
            .or_default()
            .push(text(r, 0)?);
    }
    let unreleased: Vec<String> = unreleased_by_shard.values().flatten().cloned().collect();
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
        ledger_drift: match ledger.rows.first() {
            Some(r) => Some(initial - int(r, 0)?),
            None => None,
        },
        unreleased_orders: unreleased,
        missing_in_postgres: Vec::new(),
        unknown_to_redis: Vec::new(),
        repaired: false,
    };
    if out.drift != 0 {
        name_offenders(&e, db, &mut out)?;
    }
    if repair && !out.unreleased_orders.is_empty() {
        for (shard, orders) in &unreleased_by_shard {
            let shard = u32::try_from(*shard).map_err(Error::bug)?;
            mirror(nodes, event, shard, Final::Expired, orders)?;
        }
        db.execute(
            "UPDATE orders SET released_in_redis = true WHERE order_id = ANY($1::text[])",
            &[P::ArrayStr(out.unreleased_orders.clone())],
        )?;
        out.repaired = true;
    }
    Ok(out)
}
