//! The `spin-costs` part: what one request of each hot route would cost real Spin 3.6.3 in work
//! our host does once at startup — variable lookups, outbound opens, allowed-host entries
//! parsed — as the host counts it (`seckill_host::spin_costs`, which cites Spin's files). These
//! are counts, not timings, and the same for every request of a route: one buyer's way through
//! the sale on a host in this process gives them exactly, over `redis://` and over REST.
//! `tests/tests/spin_costs.rs` pins them.

use std::future::Future;

use anyhow::{Result, bail, ensure};
use reqwest::Method;
use seckill_host::{SpinCostTotals, SpinCosts};
use seckill_testkit::{TestApp, jwt_for};
use serde_json::{Value, json};

use crate::table::Row;

/// The routes measured, with the component each names.
const ROUTES: [(&str, &str); 4] = [
    ("admission", "issue-token"),
    ("precheck", "precheck"),
    ("buy", "buy"),
    ("poll", "poll"),
];

/// One row per route: its costs over `redis://`, then over REST.
pub async fn rows(vars: &[(&'static str, String)]) -> Result<Vec<Row>> {
    let redis = per_route("spin.toml", vars, false).await?;
    let rest = per_route("spin.toml", vars, true).await?;
    Ok(ROUTES
        .iter()
        .zip(redis.iter().zip(&rest))
        .map(|((route, component), (redis, rest))| {
            let rest = match rest == redis {
                true => "the same".to_owned(),
                false => describe(rest),
            };
            Row::noted(
                format!("Spin's costs per request: {route} ({component})"),
                format!("redis://: {}; REST: {rest};", describe(redis)),
            )
        })
        .collect())
}

/// `manifest` served in this process, over REST or not: each route's costs per request, in
/// [`ROUTES`] order.
async fn per_route(
    manifest: &str,
    vars: &[(&'static str, String)],
    rest: bool,
) -> Result<Vec<SpinCosts>> {
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
    buyer(&app, event, "warm-up").await?;
    buyer(&app, event, "buyer").await
}

/// `user`'s way through the sale, each route run alone: what its one instance cost, in
/// [`ROUTES`] order.
async fn buyer(app: &TestApp, event: &str, user: &str) -> Result<Vec<SpinCosts>> {
    let jwt = jwt_for(user);
    let path = |route: &str| format!("/api/events/{event}/{route}");
    let (admission, body) = measured(
        app,
        "issue-token",
        app.call(Method::POST, &path("admission"), Some(&jwt), None),
    )
    .await?;
    let admission_token = json!({ "admission_token": body["admission_token"] });
    let (precheck, body) = measured(
        app,
        "precheck",
        app.call(
            Method::POST,
            &path("precheck"),
            Some(&jwt),
            Some(&admission_token),
        ),
    )
    .await?;
    let token = body["purchase_token"].as_str().unwrap_or_default();
    let (buy, _) = measured(app, "buy", app.buy(event, user, token)).await?;
    let (poll, _) = measured(
        app,
        "poll",
        app.call(Method::GET, &path("orders/me"), Some(&jwt), None),
    )
    .await?;
    Ok(vec![admission, precheck, buy, poll])
}

/// Runs `request` alone: what its one instance of `component` cost, and its body.
async fn measured(
    app: &TestApp,
    component: &str,
    request: impl Future<Output = Result<(u16, Value)>>,
) -> Result<(SpinCosts, Value)> {
    app.app.reset_spin_costs();
    let (status, body) = request.await?;
    ensure!([200, 202].contains(&status), "{component}: {status} {body}");
    let instances: u64 = app.app.spin_costs().iter().map(|(_, t)| t.instances).sum();
    match app.app.spin_costs_of(component) {
        Some(SpinCostTotals {
            instances: 1,
            costs,
        }) if instances == 1 => Ok((costs, body)),
        totals => bail!("{component}: {totals:?}, {instances} instances in all (one expected)"),
    }
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
