//! The cron trigger, as the spin-trigger-cron plugin runs it: each `[[trigger.cron]]` fires its
//! component on a seconds-first cron expression, in a fresh instance, with
//! `metadata.timestamp` = the firing time in Unix seconds. Runs of one trigger never overlap: a run
//! that outlasts its period makes the next firing wait, rather than piling up instances. On
//! shutdown no run starts and the runs in progress finish.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Result, anyhow};
use chrono::Utc;
use tokio_util::sync::CancellationToken;

use crate::manifest::{ManifestError, ManifestFile};
use crate::runtime::Runtime;
use crate::runtime::state::Ctx;
use crate::trigger::metrics::Metrics;
use bindings::SpinCronPre;
use bindings::fermyon::spin_cron::cron_types::{Error, Metadata};

/// The plugin's world (a component that exports `handle-cron-event`), generated here: this
/// trigger is its only user.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/deps/spin-cron@2.0.0",
        world: "fermyon:spin-cron/spin-cron",
        exports: { default: async },
    });
}

/// A `[[trigger.cron]]` entry.
struct CronJob {
    component: usize,
    schedule: cron::Schedule,
    expression: String,
}

/// An app's cron trigger: its schedules and each component's cron handler.
pub struct CronTrigger {
    runtime: Arc<Runtime>,
    jobs: Vec<CronJob>,
    /// By component: its `handle-cron-event`, if it exports one.
    handlers: Vec<Option<SpinCronPre<Ctx>>>,
}

impl CronTrigger {
    /// Checks every `[[trigger.cron]]` of `file`: its component exists and exports the handler,
    /// its expression parses.
    pub(crate) fn build(
        file: &ManifestFile,
        runtime: Arc<Runtime>,
    ) -> Result<CronTrigger, ManifestError> {
        let handlers: Vec<_> = (0..runtime.len())
            .map(|c| SpinCronPre::new(runtime.pre(c).clone()).ok())
            .collect();
        let mut jobs = Vec::new();
        for trigger in &file.manifest.trigger.cron {
            let c = runtime.component_at(file, &trigger.component)?;
            if handlers[c].is_none() {
                return Err(file.error_at(
                    &trigger.component,
                    "component does not export handle-cron-event (fermyon:spin-cron@2.0.0)",
                ));
            }
            let expression = trigger.cron_expression.get_ref().clone();
            let schedule = expression.parse::<cron::Schedule>().map_err(|e| {
                file.error_at(
                    &trigger.cron_expression,
                    format!("bad cron expression: {e}"),
                )
            })?;
            jobs.push(CronJob {
                component: c,
                schedule,
                expression,
            });
        }
        Ok(CronTrigger {
            runtime,
            jobs,
            handlers,
        })
    }
}

/// Runs every cron trigger of `app` until the returned future is dropped.
pub async fn run_schedules<A>(app: Arc<A>)
where
    A: AsRef<CronTrigger> + Send + Sync + 'static,
{
    run_schedules_until(app, CancellationToken::new(), None).await
}

/// Runs every cron trigger of `app` until `shutdown` is cancelled, then returns once the runs in
/// progress have finished (none is cut short; the caller bounds the wait). Counts each run in
/// `metrics`.
pub async fn run_schedules_until<A>(
    app: Arc<A>,
    shutdown: CancellationToken,
    metrics: Option<Arc<Metrics>>,
) where
    A: AsRef<CronTrigger> + Send + Sync + 'static,
{
    let mut tasks = tokio::task::JoinSet::new();
    for job in 0..(*app).as_ref().jobs.len() {
        let (app, shutdown, metrics) = (app.clone(), shutdown.clone(), metrics.clone());
        tasks.spawn(async move {
            let trigger: &CronTrigger = (*app).as_ref();
            let cron = &trigger.jobs[job];
            let id = trigger.runtime.id(cron.component).to_owned();
            while let Some(next) = cron.schedule.upcoming(Utc).next() {
                let wait = (next - Utc::now()).to_std().unwrap_or_default();
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.cancelled() => return,
                }
                let start = Instant::now();
                let result = run_component(trigger, cron.component, next.timestamp() as u64).await;
                if let Some(metrics) = &metrics {
                    metrics.cron_run(&id, result.is_ok(), start.elapsed());
                }
                if let Err(e) = result {
                    tracing::error!(component = %id, expression = %cron.expression, "cron run failed: {e:#}");
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// Runs the cron export of the component with id `component` once, now.
pub async fn run_once(app: &impl AsRef<CronTrigger>, component: &str) -> Result<()> {
    let trigger: &CronTrigger = app.as_ref();
    let c = trigger
        .runtime
        .find(component)
        .ok_or_else(|| anyhow!("no component `{component}`"))?;
    run_component(trigger, c, Utc::now().timestamp() as u64).await
}

async fn run_component(trigger: &CronTrigger, c: usize, timestamp: u64) -> Result<()> {
    let pre = trigger.handlers[c]
        .as_ref()
        .ok_or_else(|| anyhow!("component `{}` has no cron export", trigger.runtime.id(c)))?;
    let _slot = trigger.runtime.cron_slots().acquire().await?;
    let mut store = trigger.runtime.store(c);
    let instance = pre.instantiate_async(&mut store).await?;
    match instance
        .call_handle_cron_event(&mut store, Metadata { timestamp })
        .await?
    {
        Ok(()) => Ok(()),
        Err(Error::Other(msg)) => Err(anyhow!("component returned an error: {msg}")),
    }
}
