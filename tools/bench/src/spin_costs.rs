//! The `spin-costs` part: what one request of each hot route would cost real Spin 3.6.3 in work
//! our host does once at startup — variable lookups, outbound opens, allowed-host entries
//! parsed — as the host counts it (`seckill_host::factors::spin_costs`, which cites Spin's files). These
//! are counts, not timings, and the same for every request of a route: one buyer's walk through
//! the sale (`seckill_testkit::walk_costs`) on a host in this process gives them exactly, over `redis://` and over REST.
//! `tests/tests/spin_costs.rs` pins them.

use anyhow::{Result, ensure};
use seckill_host::SpinCosts;
use seckill_testkit::{Costed, TestApp, walk_costs};
use serde_json::json;

use crate::table::Row;

/// One row per step of a buyer's walk: its costs over `redis://`, then over REST.
pub async fn rows(vars: &[(&'static str, String)]) -> Result<Vec<Row>> {
    let redis = per_step("spin.toml", vars, false).await?;
    let rest = per_step("spin.toml", vars, true).await?;
    ensure!(
        redis.len() == rest.len(),
        "the walks differ: {redis:?} {rest:?}"
    );
    Ok(redis
        .iter()
        .zip(&rest)
        .map(|(redis, rest)| {
            let rest = match rest.totals == redis.totals {
                true => "the same".to_owned(),
                false => describe(&rest.totals.costs),
            };
            Row::noted(
                format!(
                    "Spin's costs per request: {} ({})",
                    redis.step.name(),
                    redis.component
                ),
                format!("redis://: {}; REST: {rest};", describe(&redis.totals.costs)),
            )
        })
        .collect())
}

/// `manifest` served in this process, over REST or not: each step's costs per request, in
/// the walk's order.
async fn per_step(
    manifest: &str,
    vars: &[(&'static str, String)],
    rest: bool,
) -> Result<Vec<Costed>> {
    let mut builder = TestApp::builder(manifest).vars(vars);
    if rest {
        builder = builder.over_rest();
    }
    let app = builder.start().await?;
    ensure!(
        app.facades.is_empty() != rest,
        "SECKILL_TRANSPORT=rest: the redis:// figures would be REST's"
    );
    let event = if rest {
        "spin-costs-rest"
    } else {
        "spin-costs"
    };
    app.open_event(event, json!({ "stock": 10 })).await?;
    // The first buyer loads the scripts (over REST, EVALSHA → NOSCRIPT → EVAL: two requests).
    walk_costs(&app, event, "warm-up").await?;
    walk_costs(&app, event, "buyer").await
}

/// `19 variable lookups (3 gets), 1 outbound open, 4 allowed-host entries parsed`.
fn describe(c: &SpinCosts) -> String {
    format!(
        "{} variable lookups ({} gets), {} outbound open{}, {} allowed-host entries parsed",
        c.variable_lookups,
        c.variable_gets,
        c.outbound_opens,
        if c.outbound_opens == 1 { "" } else { "s" },
        c.allowed_host_entries_parsed
    )
}
