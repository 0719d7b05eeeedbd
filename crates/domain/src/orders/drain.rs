//! The drain: order intents from each shard's Redis stream into Postgres, exactly once.
//!
//! Per (event, shard): a Redis lease with a fencing token (`drain_claim.lua`); Postgres keeps the
//! newest fence (`drain_fences`) and a batch with an older one rolls back, so a drainer whose
//! lease expired cannot write. A batch is one transaction: a multi-row insert `ON CONFLICT DO
//! NOTHING` and one `stock_ledger` update by the rows actually inserted. Entries are acknowledged
//! and orders confirmed only after `COMMIT`, so a crash between redelivers entries that change
//! nothing. A dead drainer's entries are taken over (`XAUTOCLAIM`); one that keeps failing goes to
//! the shard's dead letters, never dropped. Acknowledged entries are trimmed. **Invariant: one
//! drainer per shard, whoever launches it** (cron, jobs route, elected poll): all reach the same
//! lease and fence through `jobs`.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::{fault, int, postgres_lost, s, transaction};
use crate::error::{Dependency, Error};
use crate::event::EventId;
use crate::keys::ShardKeys;
use crate::nodes::Nodes;
use crate::registry;
use crate::scripts;
use crate::scripts::drain_claim::{Claim, Holder, Lease};
use crate::scripts::drain_read::{self, Entry};
use crate::sharded::{EventShards, transfer};
use crate::sql::{DbError, Param as P, Sql};
use crate::store::Store;

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
    /// Shards (`event/shard`) another drainer holds.
    pub busy: Vec<String>,
    /// Redis nodes that could not be reached (their registries wait for the next run).
    pub unreachable_nodes: usize,
    /// Units moved between shards because they had drifted apart (see
    /// [`crate::sharded::transfer::drifted`]).
    pub rebalanced: u64,
    /// Events (or `event/shard`s) whose drain failed this run, with the reason; the others were
    /// drained.
    pub event_errors: BTreeMap<String, String>,
}

/// Drains every shard's queue into Postgres: a lease with fencing per shard, batches written in
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
        let Ok(events) = store.map_err(Error::from).and_then(registry::events) else {
            report.unreachable_nodes += 1;
            continue;
        };
        for event in events {
            report.events += 1;
            // One failing event must not hold back the others; a lost Postgres would fail
            // them all, so that one ends the run.
            match drain_event(nodes, db, &event, opts, now_ms, &mut report) {
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

/// The poll-carried drain: drains one shard's queue within `opts` (its `until` bounds the
/// time), the shard of the poll that was elected. The same lease and fencing as [`drain`], so
/// it may race the scheduled drain safely.
pub fn catch_up(
    store: &impl Store,
    db: &impl Sql,
    event: &EventId,
    shard: u32,
    opts: &DrainOptions,
    now_ms: u64,
) -> Result<DrainReport, Error> {
    let mut report = DrainReport {
        events: 1,
        ..DrainReport::default()
    };
    Drainer::new(store, db, Place { event, shard }, opts, now_ms, &mut report).run()?;
    Ok(report)
}

/// Drains every shard of `event`, each under its own lease and fence: drainers of different
/// shards (the cron, an elected poll of each shard) run side by side.
fn drain_event<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    event: &EventId,
    opts: &DrainOptions,
    now_ms: u64,
    report: &mut DrainReport,
) -> Result<(), Error> {
    let (e, _) = EventShards::open(nodes, event)?;
    // Each shard's units as its lease was claimed: all known when no other drainer held one.
    // A shard that fails (its node is down, its data broken) is reported and the others drain.
    let mut stocks = Vec::new();
    for shard in e.all() {
        let left = nodes.on_shard(event, shard, |store| {
            Drainer::new(store, db, Place { event, shard }, opts, now_ms, report).run()
        });
        match left {
            Ok(left) => stocks.push(left),
            Err(err) if postgres_lost(&err) => return Err(err),
            Err(err) => {
                let at = Place { event, shard }.to_string();
                report.event_errors.insert(at, err.reason());
                stocks.push(None);
            }
        }
    }
    if let Some(stocks) = stocks.into_iter().collect::<Option<Vec<u64>>>() {
        transfer::summarize(&e, &stocks)?;
        if transfer::drifted(&stocks) {
            report.rebalanced += transfer::rebalance(&e)?;
        }
    }
    Ok(())
}

/// Which queue a drainer drains: one shard of one event.
#[derive(Clone, Copy)]
struct Place<'a> {
    event: &'a EventId,
    shard: u32,
}

/// `event/shard`, as the report names a shard.
impl std::fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.event.as_str(), self.shard)
    }
}

/// One run at one shard's queue: batch after batch under the shard's lease, each written to
/// Postgres under the lease's fence, then confirmed in Redis.
struct Drainer<'a, S, D> {
    store: &'a S,
    db: &'a D,
    at: Place<'a>,
    k: ShardKeys,
    opts: &'a DrainOptions,
    now_ms: u64,
    report: &'a mut DrainReport,
    /// The fence of the lease last claimed: the lease is handed back at the end.
    fence: Option<i64>,
    /// Units the shard held when its lease was last claimed.
    left: Option<u64>,
}

impl<'a, S: Store, D: Sql> Drainer<'a, S, D> {
    fn new(
        store: &'a S,
        db: &'a D,
        at: Place<'a>,
        opts: &'a DrainOptions,
        now_ms: u64,
        report: &'a mut DrainReport,
    ) -> Self {
        Drainer {
            store,
            db,
            at,
            k: ShardKeys::new(at.event, at.shard),
            opts,
            now_ms,
            report,
            fence: None,
            left: None,
        }
    }

    /// Drains the shard; returns the units it held when its lease was claimed (`None`:
    /// another drainer holds it).
    fn run(mut self) -> Result<Option<u64>, Error> {
        let result = self.batches();
        // Done (or failed): hand the lease back so the next run need not wait for it to expire.
        if let Some(fence) = self.fence {
            let holder = Holder {
                owner: &self.opts.owner,
                fence,
            };
            scripts::drain_release::run(self.store, &self.k, holder)?;
        }
        result.map(|()| self.left)
    }

    /// Up to `max_batches` batches, until the queue is empty, the time is up or the lease is
    /// lost.
    fn batches(&mut self) -> Result<(), Error> {
        for _ in 0..self.opts.max_batches {
            if self.opts.until.is_some_and(|until| Instant::now() >= until) {
                return Ok(());
            }
            let Some(lease) = self.claim()? else {
                return Ok(());
            };
            let Some(entries) = self.read(&lease)? else {
                return Ok(());
            };
            if entries.is_empty() {
                return Ok(());
            }
            let Some(committed) = self.commit(&lease, &entries)? else {
                return Ok(()); // a newer fence wrote: the new holder drains
            };
            fault::trap(fault::Point::AfterCommit);
            let pairs: Vec<(&str, &str)> = committed
                .iter()
                .map(|e| (e.id.as_str(), e.order.as_str()))
                .collect();
            self.report.confirmed += scripts::drain_confirm::run(self.store, &self.k, &pairs)?;
            if entries.len() < self.opts.batch {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Claims or renews the lease (every batch: a slow batch cannot outlive it unnoticed);
    /// `None` when another drainer holds it or the event is gone.
    fn claim(&mut self) -> Result<Option<Lease>, Error> {
        match scripts::drain_claim::run(self.store, &self.k, &self.opts.owner, self.opts.lease_ms)?
        {
            Claim::Held(lease) => {
                self.left = Some(lease.left.max(0) as u64);
                self.fence = Some(lease.fence);
                Ok(Some(lease))
            }
            Claim::Busy => {
                self.report.busy.push(self.at.to_string());
                Ok(None)
            }
            Claim::NoEvent => Ok(None),
        }
    }

    /// The next batch; `None` when the lease moved on.
    fn read(&self, lease: &Lease) -> Result<Option<Vec<Entry>>, Error> {
        let holder = Holder {
            owner: &self.opts.owner,
            fence: lease.fence,
        };
        let limits = drain_read::Limits {
            batch: self.opts.batch,
            reclaim_idle_ms: self.opts.reclaim_idle_ms,
            max_deliveries: self.opts.max_deliveries,
        };
        Ok(drain_read::run(self.store, &self.k, holder, limits)?)
    }

    /// Writes the batch in one transaction; when Postgres refuses it, entry by entry. Returns
    /// the entries now in Postgres (`None`: the fence is stale).
    fn commit<'e>(
        &mut self,
        lease: &Lease,
        entries: &'e [Entry],
    ) -> Result<Option<Vec<&'e Entry>>, Error> {
        match write_batch(self.db, self.at, lease, entries, self.now_ms) {
            Ok(inserted) => {
                self.report.inserted += inserted;
                Ok(Some(entries.iter().collect()))
            }
            Err(e) if e.is_connection() => Err(e.into()),
            Err(StaleOrFailed::Stale) => Ok(None),
            // One bad entry must not hold back the rest: write them one by one.
            Err(e) => self.isolate(lease, entries, &e.to_string()).map(Some),
        }
    }

    /// Writes a failed batch entry by entry; those that still fail stay pending with their
    /// error.
    fn isolate<'e>(
        &mut self,
        lease: &Lease,
        entries: &'e [Entry],
        batch_error: &str,
    ) -> Result<Vec<&'e Entry>, Error> {
        let mut committed = Vec::new();
        let mut failed = Vec::new();
        for e in entries {
            match write_batch(
                self.db,
                self.at,
                lease,
                std::slice::from_ref(e),
                self.now_ms,
            ) {
                Ok(n) => {
                    self.report.inserted += n;
                    committed.push(e);
                }
                Err(err) if err.is_connection() => return Err(err.into()),
                Err(StaleOrFailed::Stale) => break,
                Err(err) => {
                    self.report.failed += 1;
                    failed.push((e.id.as_str(), format!("{err} (batch: {batch_error})")));
                }
            }
        }
        if !failed.is_empty() {
            let failed: Vec<(&str, &str)> =
                failed.iter().map(|(id, e)| (*id, e.as_str())).collect();
            scripts::drain_failed::run(self.store, &self.k, &failed)?;
        }
        Ok(committed)
    }
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
    INSERT INTO orders (order_id, event_id, user_id, shard, seq, status, created_ms, confirmed_ms, pay_deadline_ms, amount, currency)
    SELECT o, $1, u, s::integer, q, 'pending_payment', c, $6::bigint, c + $7::bigint * 1000, $9::bigint, $10::text
    FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $8::bigint[]) AS t(o, u, s, q, c)
    ON CONFLICT DO NOTHING
    RETURNING 1
), n AS (SELECT count(*) AS n FROM new)
UPDATE stock_ledger SET available = available - n.n, held = held + n.n
FROM n WHERE event_id = $1
RETURNING n.n";

fn write_batch(
    db: &impl Sql,
    at: Place<'_>,
    facts: &Lease,
    entries: &[Entry],
    now_ms: u64,
) -> Result<u64, StaleOrFailed> {
    let ev = at.event.as_str();
    transaction(db, || {
        let fenced = db.execute(
            "INSERT INTO drain_fences (event_id, shard, fence) VALUES ($1, $2::bigint::integer, $3)
             ON CONFLICT (event_id, shard) DO UPDATE SET fence = EXCLUDED.fence
             WHERE drain_fences.fence <= EXCLUDED.fence",
            &[s(ev), P::Int64(i64::from(at.shard)), P::Int64(facts.fence)],
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
                P::Int64(facts.unit_amount),
                s(&facts.currency),
            ],
        )?;
        fault::trap(fault::Point::InTransaction);
        Ok(rows.rows.first().map_or(Ok(0), |r| int(r, 0))? as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::{
        DRAIN_CLAIM, DRAIN_CONFIRM, DRAIN_FAILED, DRAIN_READ, DRAIN_RELEASE, code,
    };
    use crate::sql::Cell;
    use crate::store::Reply;
    use crate::testing::{FakeSql, FakeStore, Outcome};

    fn options() -> DrainOptions {
        DrainOptions {
            owner: "d1".into(),
            batch: 10,
            max_batches: 5,
            lease_ms: 30_000,
            reclaim_idle_ms: 30_000,
            max_deliveries: 5,
            until: None,
        }
    }

    fn claimed(store: FakeStore) -> FakeStore {
        store.answers(
            &DRAIN_CLAIM,
            &[
                0.into(),
                3.into(),
                "sku".into(),
                100.into(),
                900.into(),
                1999.into(),
                "eur".into(),
                25.into(),
            ],
        )
    }

    /// `drain_read.lua`'s reply with `n` well-formed entries.
    fn entries(n: i64) -> Vec<Reply> {
        let mut reply = vec![code::OK.into(), n.into()];
        for i in 0..n {
            let (id, order, user) = (format!("1-{i}"), format!("{i:04x}"), format!("u{i}"));
            reply.extend([
                id.as_str().into(),
                order.as_str().into(),
                user.as_str().into(),
            ]);
            reply.extend([0.into(), (i + 1).into(), 1_000.into()]);
        }
        reply
    }

    /// The statements of one batch that commits `inserted` rows.
    fn batch(db: FakeSql, inserted: i64) -> FakeSql {
        db.then(Outcome::Changed(1)) // fence
            .then(Outcome::Changed(0)) // events row
            .then(Outcome::Changed(0)) // ledger row
            .then(Outcome::Rows(vec![vec![Cell::Int64(inserted)]]))
    }

    fn drain_e1(store: &FakeStore, db: &FakeSql) -> Result<DrainReport, Error> {
        catch_up(
            store,
            db,
            &EventId::parse("e1").unwrap(),
            0,
            &options(),
            5_000,
        )
    }

    #[test]
    fn a_batch_is_committed_then_confirmed_then_the_lease_handed_back() {
        let store = claimed(FakeStore::holding_every_script())
            .answers(&DRAIN_READ, &entries(2))
            .answers(&DRAIN_CONFIRM, &[0.into(), 2.into()])
            .answers(&DRAIN_RELEASE, &[0.into(), 1.into()]);
        let db = batch(FakeSql::default(), 2);
        let report = drain_e1(&store, &db).unwrap();
        assert_eq!((report.inserted, report.confirmed), (2, 2));
        let scripts: Vec<_> = store.commands().into_iter().map(|(_, s)| s).collect();
        assert_eq!(
            scripts,
            [
                "drain_claim",
                "drain_read",
                "drain_confirm",
                "drain_release"
            ]
        );
        assert_eq!(
            db.verbs(),
            ["BEGIN", "INSERT", "INSERT", "INSERT", "WITH", "COMMIT"]
        );
        // The confirm names each committed entry with its order.
        assert_eq!(store.calls.borrow()[2].args, ["1-0", "0000", "1-1", "0001"]);
    }

    #[test]
    fn a_stale_fence_writes_nothing_and_confirms_nothing() {
        let store = claimed(FakeStore::holding_every_script())
            .answers(&DRAIN_READ, &entries(1))
            .answers(&DRAIN_RELEASE, &[0.into(), 0.into()]);
        let db = FakeSql::default().then(Outcome::Changed(0));
        let report = drain_e1(&store, &db).unwrap();
        assert_eq!((report.inserted, report.confirmed), (0, 0));
        assert_eq!(db.verbs(), ["BEGIN", "INSERT", "ROLLBACK"]);
        assert!(!store.commands().iter().any(|(_, s)| *s == "drain_confirm"));
    }

    #[test]
    fn a_shard_another_drainer_holds_is_reported_busy_and_left_alone() {
        let store = FakeStore::holding_every_script()
            .answers(&DRAIN_CLAIM, &[code::CONFLICT.into(), 20_000.into()]);
        let report = drain_e1(&store, &FakeSql::default()).unwrap();
        assert_eq!(report.busy, ["e1/0"]);
        assert_eq!(store.commands().len(), 1);
    }

    #[test]
    fn a_lost_database_ends_the_drain_and_still_hands_the_lease_back() {
        let store = claimed(FakeStore::holding_every_script())
            .answers(&DRAIN_READ, &entries(1))
            .answers(&DRAIN_RELEASE, &[0.into(), 1.into()]);
        let db = FakeSql::default().then_fail(DbError {
            connection: true,
            message: "connection closed".into(),
        });
        let e = drain_e1(&store, &db).unwrap_err();
        assert!(postgres_lost(&e), "{e:?}");
        assert_eq!(store.commands().last(), Some(&("EVALSHA", "drain_release")));
    }

    #[test]
    fn a_batch_postgres_refuses_is_retried_entry_by_entry_and_the_bad_one_recorded() {
        let refused = DbError::unexpected("check constraint");
        let store = claimed(FakeStore::holding_every_script())
            .answers(&DRAIN_READ, &entries(2))
            .answers(&DRAIN_FAILED, &[0.into()])
            .answers(&DRAIN_CONFIRM, &[0.into(), 1.into()])
            .answers(&DRAIN_RELEASE, &[0.into(), 1.into()]);
        let db = FakeSql::default()
            .then(Outcome::Changed(1))
            .then(Outcome::Changed(0))
            .then(Outcome::Changed(0))
            .then_fail(refused.clone()) // the whole batch
            .then(Outcome::Changed(1))
            .then(Outcome::Changed(0))
            .then(Outcome::Changed(0))
            .then_fail(refused); // entry 1-0 alone
        let db = batch(db, 1); // entry 1-1 alone
        let report = drain_e1(&store, &db).unwrap();
        assert_eq!(
            (report.inserted, report.failed, report.confirmed),
            (1, 1, 1)
        );
        let calls = store.calls.borrow();
        assert_eq!(calls[2].script, "drain_failed");
        assert_eq!(calls[2].args[0], "1-0");
        assert_eq!(calls[3].args, ["1-1", "0001"]);
    }
}
