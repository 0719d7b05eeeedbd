//! The scheduled jobs as each of their launchers runs them: the cron triggers (once a run), the
//! jobs route (once, or again and again for a budget, for schedulers that fire once a minute or
//! every five), and the poll-carried drain of one shard. One drain, one release, one reconcile;
//! the launchers only say how long.

use std::time::{Duration, Instant};

use crate::clock;
use crate::error::{Error, ErrorCode};
use crate::event::EventId;
use crate::nodes::Nodes;
use crate::orders::{self, DrainOptions, DrainReport, Provider, ReleaseReport, Repeated};
use crate::sql::Sql;
use crate::store::Store;

/// The jobs a scheduler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// Order intents from the Redis streams into Postgres ([`orders::drain`]).
    Drain,
    /// Unpaid orders past their deadline expire, their units back ([`orders::release_due`]).
    TimeoutRelease,
    /// Redis's books against Postgres's, repaired ([`orders::reconcile_all`]).
    Reconcile,
}

impl Job {
    /// Every job.
    pub const ALL: [Job; 3] = [Job::Drain, Job::TimeoutRelease, Job::Reconcile];

    /// Its name: the jobs route's `:job`, and its lease's.
    pub fn name(self) -> &'static str {
        match self {
            Job::Drain => "drain",
            Job::TimeoutRelease => "timeout-release",
            Job::Reconcile => "reconcile",
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
    orders::repeat_for(budget, DRAIN_PAUSE, |until| {
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
    orders::repeat_for(budget, RELEASE_PAUSE, |_| {
        orders::release_due(nodes, db, provider, clock::now_ms(), limit)
    })
}

/// The poll-carried drain: shard `shard` of `event` only, for at most `for_`.
pub fn drain_shard_for(
    store: &impl Store,
    db: &impl Sql,
    (event, shard): (&EventId, u32),
    opts: &DrainOptions,
    for_: Duration,
) -> Result<DrainReport, Error> {
    let opts = DrainOptions {
        until: Some(Instant::now() + for_),
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
}
