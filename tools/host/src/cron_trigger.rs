//! The cron trigger, as the spin-trigger-cron plugin runs it: each `[[trigger.cron]]` fires its
//! component on a seconds-first cron expression, in a fresh instance, with
//! `metadata.timestamp` = the firing time in Unix seconds. Runs of one trigger never overlap: a run
//! that outlasts its period makes the next firing wait, rather than piling up instances.

use std::sync::Arc;

use anyhow::{Result, anyhow};
use chrono::Utc;

use crate::app::App;
use crate::bindings::cron::fermyon::spin_cron::cron_types::{Error, Metadata};

/// Runs every cron trigger of `app` until the returned future is dropped.
pub async fn run_schedules(app: Arc<App>) {
    let mut tasks = tokio::task::JoinSet::new();
    for job in 0..app.crons.len() {
        let app = app.clone();
        tasks.spawn(async move {
            let cron = &app.crons[job];
            let id = app.components[cron.component].config.id.clone();
            while let Some(next) = cron.schedule.upcoming(Utc).next() {
                let wait = (next - Utc::now()).to_std().unwrap_or_default();
                tokio::time::sleep(wait).await;
                if let Err(e) = run_component(&app, cron.component, next.timestamp() as u64).await {
                    tracing::error!(component = %id, expression = %cron.expression, "cron run failed: {e:#}");
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// Runs the cron export of the component with id `component` once, now.
pub async fn run_once(app: &App, component: &str) -> Result<()> {
    let c = app
        .components
        .iter()
        .position(|c| c.config.id == component)
        .ok_or_else(|| anyhow!("no component `{component}`"))?;
    run_component(app, c, Utc::now().timestamp() as u64).await
}

async fn run_component(app: &App, c: usize, timestamp: u64) -> Result<()> {
    let pre = app.components[c].cron.as_ref().ok_or_else(|| {
        anyhow!(
            "component `{}` has no cron export",
            app.components[c].config.id
        )
    })?;
    let _slot = app.slots.acquire().await?;
    let mut store = app.store(c);
    let instance = pre.instantiate_async(&mut store).await?;
    match instance
        .call_handle_cron_event(&mut store, Metadata { timestamp })
        .await?
    {
        Ok(()) => Ok(()),
        Err(Error::Other(msg)) => Err(anyhow!("component returned an error: {msg}")),
    }
}
