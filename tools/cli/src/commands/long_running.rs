//! Server-side runs that can take a while, behind a spinner: `draw` and `job`.

use std::time::Duration;

use clap::ValueEnum;
use seckill_domain::jobs;

use super::{Output, event_path, ms, progress, show};
use crate::api::{Api, Failure};
use crate::render;

/// `draw`: the lottery draw of an event.
pub fn draw(cli: Output, api: &Api, event: &str) -> Result<(), Failure> {
    let drawn = progress(cli, "drawing", || {
        api.send("POST", &format!("{}/draw", event_path(event)), None)
    })?;
    show(cli, &drawn, |v| {
        format!("drawn {event}: {} admitted", render::num(&v["admitted"]))
    });
    Ok(())
}

/// `job`: the request may take `--for` longer than the timeout, as the job keeps running.
pub fn job(
    cli: Output,
    api: &Api,
    job: Job,
    for_: Option<Duration>,
    event: Option<&str>,
) -> Result<(), Failure> {
    let path = job_path(job, for_, event);
    let extra = for_.unwrap_or_default();
    let report = progress(cli, job.name(), || api.send_long("POST", &path, extra))?;
    show(cli, &report, |v| render::job(job.name(), v));
    Ok(())
}

/// `/admin/jobs/<name>`, with `for_ms` and `event` in the query when given.
fn job_path(job: Job, for_: Option<Duration>, event: Option<&str>) -> String {
    let mut query = Vec::new();
    if let Some(d) = for_ {
        query.push(format!("for_ms={}", ms(d)));
    }
    if let Some(e) = event {
        query.push(format!("event={e}"));
    }
    let path = format!("/admin/jobs/{}", job.name());
    if query.is_empty() {
        path
    } else {
        format!("{path}?{}", query.join("&"))
    }
}

/// The scheduled jobs.
#[derive(Clone, Copy, ValueEnum)]
pub enum Job {
    /// Queued orders into Postgres.
    Drain,
    /// Expire unpaid orders past their deadline; their units go back on sale.
    TimeoutRelease,
    /// Check the books across Redis and Postgres, and repair what is safe.
    Reconcile,
    /// Send the order events to the shop's endpoints.
    DeliverEvents,
}

impl Job {
    /// Its name in the jobs route, the domain's.
    pub fn name(self) -> &'static str {
        match self {
            Job::Drain => jobs::Job::Drain,
            Job::TimeoutRelease => jobs::Job::TimeoutRelease,
            Job::Reconcile => jobs::Job::Reconcile,
            Job::DeliverEvents => jobs::Job::DeliverEvents,
        }
        .name()
    }
}
