//! The scheduled jobs as each of their launchers runs them: the cron triggers (once a run), the
//! jobs route (once, or again and again for a budget, for schedulers that fire once a minute or
//! every five), and the poll-carried drain of one shard. One drain, one release, one reconcile,
//! one delivery of the order events; the launchers only say how long.

use std::time::{Duration, Instant};

use crate::clock;
use crate::error::{Error, ErrorCode};
use crate::event::EventId;
use crate::nodes::Nodes;
use crate::order_events::deliver::{self, DeliveryOptions, DeliveryReport, Sender};
use crate::orders::{self, DrainOptions, DrainReport, Provider, ReleaseReport};
use crate::scripts;
use crate::sql::Sql;
use crate::store::Store;

mod repeat;

pub use repeat::{JobReport, Repeated};

/// The jobs a scheduler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// Order intents from the Redis streams into Postgres ([`orders::drain`]).
    Drain,
    /// Unpaid orders past their deadline expire, their units back ([`orders::release_due`]).
    TimeoutRelease,
    /// Redis's books against Postgres's, repaired ([`orders::reconcile_all`]).
    Reconcile,
    /// The order events to the shop's endpoints ([`deliver::deliver`]): its own
    /// component, the one allowed to reach any `https` host.
    DeliverEvents,
}

impl Job {
    /// Every job.
    pub const ALL: [Job; 4] = [
        Job::Drain,
        Job::TimeoutRelease,
        Job::Reconcile,
        Job::DeliverEvents,
    ];

    /// Its name: the jobs route's `:job`, and its lease's.
    pub fn name(self) -> &'static str {
        match self {
            Job::Drain => "drain",
            Job::TimeoutRelease => "timeout-release",
            Job::Reconcile => "reconcile",
            Job::DeliverEvents => "deliver-events",
        }
    }

    /// The job named `name`; any other name is `not_found`.
    pub fn parse(name: &str) -> Result<Job, Error> {
        Job::ALL
            .into_iter()
            .find(|job| job.name() == name)
            .ok_or_else(|| Error::invalid(ErrorCode::NotFound, format!("no job `{name}`")))
    }
}

/// The longest a job run from the jobs route holds its lease past its budget before another
/// may take it over: a run cut short (its instance killed) blocks the next for at most this.
pub const JOB_LEASE_MARGIN_MS: u64 = 30_000;

/// One run of `job` at a time across the fleet, for the jobs route's timeout release and
/// reconcile (schedulers and persons; the drain's leases are per shard):
/// claims the job's lease on the first Redis node for `budget_ms` plus [`JOB_LEASE_MARGIN_MS`]
/// and runs `f`, then hands the lease back. While another run holds it: `409 conflict`, with
/// `Retry-After` until it expires. The cron triggers do not take it: the drain's per-shard
/// leases and timeout release's row locks already keep their overlapping runs apart.
pub fn run_one_at_a_time<S: Store, T, E: From<Error>>(
    nodes: &Nodes<S>,
    job: Job,
    budget_ms: u64,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let store = nodes
        .all()
        .next()
        .ok_or_else(|| Error::bug("no Redis node"))?
        .map_err(Error::from)?;
    let owner = crate::ids::random_hex(8);
    let ttl_ms = budget_ms + JOB_LEASE_MARGIN_MS;
    let taken = scripts::job_lease::take(store, job.name(), &owner, ttl_ms).map_err(Error::from)?;
    if let Err(wait_ms) = taken {
        return Err(Error::refused_for(
            ErrorCode::Conflict,
            format!("another run of {} holds its lease", job.name()),
            wait_ms,
        )
        .into());
    }
    let ran = f();
    // Best effort: a lease not handed back expires.
    let _ = scripts::job_lease::give(store, job.name(), &owner);
    ran
}

/// The longest budget the jobs route accepts: a minute, the finest period of a Kubernetes
/// CronJob, and well under the request time any platform allows a function.
pub const MAX_FOR_MS: u64 = 60_000;
/// Pause after a drain that found nothing: a new order waits at most this long for the next.
const DRAIN_PAUSE: Duration = Duration::from_millis(200);
/// Pause after a release run that found nothing: deadlines are judged to the second.
const RELEASE_PAUSE: Duration = Duration::from_millis(1_000);

/// Drains every event's shards, again and again for `budget` (once when it is zero), each run
/// ending by the budget's end.
pub fn drain_for<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    opts: &DrainOptions,
    budget: Duration,
) -> Result<Repeated<DrainReport>, Error> {
    repeat::repeat_for(budget, DRAIN_PAUSE, |until| {
        let opts = DrainOptions {
            until: Some(until).filter(|_| !budget.is_zero()),
            ..opts.clone()
        };
        orders::drain(nodes, db, &opts, clock::now_ms())
    })
}

/// Timeout release, again and again for `budget` (once when it is zero): `limit` orders a run,
/// their checkout sessions closed at `provider` first when there is one.
pub fn release_for<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    provider: Option<&Provider>,
    limit: i64,
    budget: Duration,
) -> Result<Repeated<ReleaseReport>, Error> {
    repeat::repeat_for(budget, RELEASE_PAUSE, |_| {
        orders::release_due(nodes, db, provider, clock::now_ms(), limit)
    })
}

/// Pause after a delivery run that found nothing: the cron trigger's period.
const DELIVER_PAUSE: Duration = Duration::from_millis(1_000);
/// A delivery run's own budget when it runs once: under its endpoints' lease
/// ([`deliver::LEASE_MS`]), so that only a run that died leaves one to the next.
pub const DELIVER_ONCE_MS: u64 = 30_000;

/// The order events' delivery, again and again for `budget` (once, for at most
/// [`DELIVER_ONCE_MS`], when it is zero).
pub fn deliver_events_for(
    db: &impl Sql,
    sender: &mut impl Sender,
    opts: &DeliveryOptions,
    budget: Duration,
) -> Result<Repeated<DeliveryReport>, Error> {
    let budget_once = Duration::from_millis(DELIVER_ONCE_MS);
    repeat::repeat_for(budget, DELIVER_PAUSE, |until| {
        let until = if budget.is_zero() {
            Instant::now() + budget_once
        } else {
            until
        };
        deliver::deliver(db, sender, opts, clock::now_ms(), || {
            Instant::now() >= until
        })
        .map_err(Error::from)
    })
}

/// The poll-carried drain: shard `shard` of `event` only, until `until` (set by the poll
/// before it opens Postgres, so opening it counts against the budget).
pub fn drain_shard_until(
    store: &impl Store,
    db: &impl Sql,
    (event, shard): (&EventId, u32),
    opts: &DrainOptions,
    until: Instant,
) -> Result<DrainReport, Error> {
    let opts = DrainOptions {
        until: Some(until),
        ..opts.clone()
    };
    orders::catch_up(store, db, event, shard, &opts, clock::now_ms())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_named_and_read_back_by_its_route_name() {
        for job in Job::ALL {
            assert_eq!(Job::parse(job.name()).unwrap(), job);
        }
        assert!(Job::parse("vacuum").is_err());
    }

    /// A run whose job's lease another run holds is refused, `409` with how long to wait, and
    /// runs nothing; a run that takes the lease runs, then hands the lease back.
    #[test]
    fn one_run_of_a_job_at_a_time() {
        use crate::scripts::{JOB_LEASE, code};
        use crate::testing::FakeStore;

        let held = FakeStore::holding_every_script()
            .answers(&JOB_LEASE, &[code::OK.into(), 0.into(), 12_000.into()]);
        let nodes = Nodes::one(held);
        let mut ran = false;
        let err = run_one_at_a_time(&nodes, Job::Reconcile, 60_000, || {
            ran = true;
            Ok::<_, Error>(())
        })
        .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Refused {
                    code: ErrorCode::Conflict,
                    retry_after_ms: Some(12_000),
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(!ran, "a refused run runs nothing");

        let free = FakeStore::holding_every_script()
            .answers(&JOB_LEASE, &[code::OK.into(), 1.into(), 0.into()])
            .answers(&JOB_LEASE, &[code::OK.into(), 1.into(), 0.into()]);
        let nodes = Nodes::one(free);
        let answer = run_one_at_a_time(&nodes, Job::Reconcile, 60_000, || Ok::<_, Error>(7));
        assert_eq!(answer.unwrap(), 7);
        let store = nodes.all().next().unwrap().unwrap();
        let calls = store.calls.borrow();
        assert_eq!(calls.len(), 2, "take, then give");
        assert_eq!(calls[0].args[0], "take");
        assert_eq!(calls[0].args[2], (60_000 + JOB_LEASE_MARGIN_MS).to_string());
        assert_eq!(calls[1].args[0], "give");
        assert_eq!(
            calls[1].args[1], calls[0].args[1],
            "the same owner gives it back"
        );
    }
}
