//! Reconciliation: each event's books, Redis and Postgres side by side, the offenders named,
//! and (on request) expired units that never went back released.
//!
//! It checks, summed over shards, that initial stock = remaining in shards + in transit + in
//! flight to Postgres + pending or paid + expired awaiting release, and that Postgres's `available
//! + held` equals it. It writes only when asked to repair (`transfer::repair` first, pending
//! releases last). A dead-lettered order shows as drift (`dead_orders`) for an operator.

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
use crate::sharded::{EventShards, transfer};
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
    /// Whether the stock was loaded into Redis (warm-up). Before it nothing can sell: every
    /// term is 0 and so is the drift.
    pub warmed: bool,
    /// Units left in the Redis shards.
    pub remaining_in_redis: i64,
    /// Units lent from one shard to another and not credited yet (a tail cut short, or caught
    /// in the act).
    pub in_transit: i64,
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
    /// initial − (remaining + in transit + in flight + held + awaiting release): 0 when the
    /// books balance.
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
    e: &EventShards<'_, S>,
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

/// Checks one event's books, summed over its shards, reading only. With `repair`, first
/// finishes the transfers between shards a tail cut short (always safe: a transfer credits
/// once), then gives back the units of expired orders that never reached Redis (safe: the
/// release is idempotent). A buy's tail lending at the very instant of the read can show as a
/// passing drift of one.
pub fn reconcile<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    event: &EventId,
    repair: bool,
) -> Result<Reconciliation, Error> {
    let (e, config) = EventShards::open(nodes, event)?;
    let initial: i64 = config
        .get("stock")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Error::bug(format!("event {} has no stock", event.as_str())))?;
    if config.get("warmed").map(String::as_str) != Some("1") {
        return Ok(Reconciliation::not_warmed(event, initial));
    }
    if repair {
        transfer::repair(&e, 0)?;
    }
    let redis = RedisBooks::read(&e)?;
    let pg = PostgresBooks::read(db, event)?;
    let mut out = Reconciliation::of(event, initial, &redis, &pg);
    if out.drift != 0 {
        name_offenders(&e, db, &mut out)?;
    }
    if repair && !pg.unreleased.is_empty() {
        release_in_redis(nodes, db, event, &pg.unreleased)?;
        out.repaired = true;
    }
    Ok(out)
}

/// Redis's side of an event's books, summed over its shards.
#[derive(Default)]
struct RedisBooks {
    remaining: i64,
    in_transit: i64,
    accepted: i64,
    drained: i64,
    dead_letters: i64,
    dead_orders: i64,
}

impl RedisBooks {
    /// Reads every shard's transfers lent and not settled, then every shard's books with the
    /// transfers lent to it (one script each).
    fn read<S: Store>(e: &EventShards<'_, S>) -> Result<Self, Error> {
        let mut lent = Vec::new();
        for shard in e.all() {
            let (store, k) = e.slot(shard)?;
            lent.extend(scripts::shard_lent::run(store, &k, 0)?);
        }
        let mut books = RedisBooks::default();
        for shard in e.all() {
            let (store, k) = e.slot(shard)?;
            let lent_here: Vec<_> = lent.iter().filter(|t| t.to == shard).collect();
            let b = scripts::reconcile_read::run(store, &k, &lent_here)?;
            books.remaining += b.remaining;
            books.in_transit += b.in_transit;
            books.accepted += b.accepted;
            books.drained += b.drained;
            books.dead_letters += b.dead_letters;
            books.dead_orders += b.dead_orders;
        }
        Ok(books)
    }
}

/// Postgres's side of an event's books.
struct PostgresBooks {
    /// Pending and paid orders.
    held: i64,
    /// Expired orders whose unit is not back in Redis, by shard.
    unreleased: BTreeMap<u32, Vec<String>>,
    /// available + held in the ledger (`None` before the first drain).
    ledger: Option<i64>,
}

impl PostgresBooks {
    fn read(db: &impl Sql, event: &EventId) -> Result<Self, Error> {
        let ev = [s(event.as_str())];
        let held = db.query(
            "SELECT count(*)::bigint FROM orders
             WHERE event_id = $1 AND status IN ('pending_payment', 'paid')",
            &ev,
        )?;
        let held = held.rows.first().map_or(Ok(0), |r| int(r, 0))?;
        let mut unreleased: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for r in &db
            .query(
                "SELECT order_id, shard::bigint FROM orders
                 WHERE event_id = $1 AND status = 'expired' AND NOT released_in_redis",
                &ev,
            )?
            .rows
        {
            let shard = u32::try_from(int(r, 1)?).map_err(Error::bug)?;
            unreleased.entry(shard).or_default().push(text(r, 0)?);
        }
        let ledger = db.query(
            "SELECT available + held FROM stock_ledger WHERE event_id = $1",
            &ev,
        )?;
        let ledger = match ledger.rows.first() {
            Some(r) => Some(int(r, 0)?),
            None => None,
        };
        Ok(PostgresBooks {
            held,
            unreleased,
            ledger,
        })
    }
}

impl Reconciliation {
    /// An event whose stock was never loaded into Redis: nothing to reconcile.
    fn not_warmed(event: &EventId, initial: i64) -> Self {
        Reconciliation {
            event_id: event.as_str().to_owned(),
            initial_stock: initial,
            warmed: false,
            remaining_in_redis: 0,
            in_transit: 0,
            in_flight: 0,
            held_in_postgres: 0,
            awaiting_release: 0,
            dead_letters: 0,
            dead_orders: 0,
            drift: 0,
            ledger_drift: None,
            unreleased_orders: Vec::new(),
            missing_in_postgres: Vec::new(),
            unknown_to_redis: Vec::new(),
            repaired: false,
        }
    }

    /// The books of `event` side by side; the offenders are not named yet.
    fn of(event: &EventId, initial: i64, redis: &RedisBooks, pg: &PostgresBooks) -> Self {
        let unreleased: Vec<String> = pg.unreleased.values().flatten().cloned().collect();
        let awaiting = unreleased.len() as i64;
        // A dead-lettered order was sold and will never land by itself: it is drift, for an
        // operator.
        let in_flight = redis.accepted - redis.drained - redis.dead_orders;
        Reconciliation {
            event_id: event.as_str().to_owned(),
            initial_stock: initial,
            warmed: true,
            remaining_in_redis: redis.remaining,
            in_transit: redis.in_transit,
            in_flight,
            held_in_postgres: pg.held,
            awaiting_release: awaiting,
            dead_letters: redis.dead_letters,
            dead_orders: redis.dead_orders,
            drift: initial - (redis.remaining + redis.in_transit + in_flight + pg.held + awaiting),
            ledger_drift: pg.ledger.map(|books| initial - books),
            unreleased_orders: unreleased,
            missing_in_postgres: Vec::new(),
            unknown_to_redis: Vec::new(),
            repaired: false,
        }
    }
}

/// Gives back the units of expired orders that never reached Redis, shard by shard, then marks
/// them released in Postgres.
fn release_in_redis<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    event: &EventId,
    unreleased: &BTreeMap<u32, Vec<String>>,
) -> Result<(), Error> {
    for (&shard, orders) in unreleased {
        mirror(nodes, event, shard, Final::Expired, orders)?;
    }
    let all: Vec<String> = unreleased.values().flatten().cloned().collect();
    db.execute(
        "UPDATE orders SET released_in_redis = true WHERE order_id = ANY($1::text[])",
        &[P::ArrayStr(all)],
    )?;
    Ok(())
}
