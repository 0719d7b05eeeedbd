//! A job run again and again for a time budget, for schedulers that fire seldom.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::Error;
use crate::order_events::deliver::DeliveryReport;
use crate::orders::{DrainReport, ReleaseReport};

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
        self.transfers_credited += later.transfers_credited;
        self.event_errors.extend(later.event_errors);
        self.sessions.add(later.sessions);
        self.refunds.add(later.refunds);
        self.backstop.add(later.backstop);
    }
    fn idle(&self) -> bool {
        let s = &self.sessions;
        self.expired == 0 && self.released == 0 && s.expired == 0 && s.settled == 0
    }
}

impl JobReport for DeliveryReport {
    fn add(&mut self, later: Self) {
        self.endpoints = self.endpoints.max(later.endpoints);
        self.delivered += later.delivered;
        self.failed += later.failed;
        self.disabled += later.disabled;
        self.trimmed += later.trimmed;
        self.max_lag_ms = self.max_lag_ms.max(later.max_lag_ms);
    }
    fn idle(&self) -> bool {
        self.delivered == 0 && self.failed == 0
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
