//! The budget of the sale's hot routes on real Spin 3.6.3: what each request would pay in Spin
//! for work our host does once at startup, as the host counts it (`host/src/factors/spin_costs.rs`,
//! which cites the Spin files). Real Spin is not installed here, so this is where a change that
//! adds a variable read or an outbound open is caught.
//!
//! Today's figures, per request (`spin.toml`; `spin.http.toml` has the same variables and hosts),
//! and before the variable diet (16 application variables, each tuning knob one of them):
//!
//! | route | component | variable lookups | of which from `get`s | `get`s | outbound opens | allowed-host entries parsed | before: lookups, entries |
//! |---|---|---:|---:|---:|---:|---:|---:|
//! | `POST …/admission/challenge` | `issue-token` | 15 = 12 + 3 | 3 | 3 | 1 | 1 | – |
//! | `POST …/admission` | `issue-token` | 16 = 12 + 4 | 4 | 4 | 1 | 1 | 19, 3 |
//! | `POST …/precheck` | `precheck` | 16 = 12 + 4 | 4 | 4 | 1 | 1 | 19, 3 |
//! | `POST …/buy` | `buy` | 14 = 12 + 2 | 2 | 2 | 1 | 1 | 18, 3 |
//! | `GET …/orders/me` (poll) | `poll` | 14 = 12 + 2 | 2 | 3 | 1 | 2 | 19, 4 |
//!
//! - **12**: `spin.toml`'s `[variables]`: where Redis and Postgres are (`redis_url`,
//!   `redis_origin`, `pg_url`, `pg_host`), the five secrets (the payment provider's webhook
//!   secrets among them: only its webhook reads them, every instance resolves them), the
//!   payment provider's API (`payment_api_url`, which `allowed_outbound_hosts` of the pay route
//!   and the jobs names, and `payment_api_key`: two variables, as Redis's URL and origin are,
//!   because an allowed host is a whole variable), and `settings`, the optional knobs in one
//!   variable. The first allowed-hosts check of an instance resolves every application
//!   variable (`crates/factor-outbound-networking/src/lib.rs`, `prepare`;
//!   `crates/expressions/src/lib.rs`, `ProviderResolver::prepare`), whichever it needs.
//! - **`get`s**, one lookup per `{{ variable }}` of the component variable's template:
//!   `jwt_secret` (the buyer's JWT, `crates/spin-edge/src/http.rs`), `redis_url`
//!   (`store::for_event`), then `admission_secret` and `settings` for admission and precheck
//!   (the trusted proxies, to know the client's address); poll's third
//!   `get`, `poll_drain_ms`, is a literal of the manifest (`"0"` in `spin.toml`) and looks up
//!   nothing. The poll-carried drain is off, so poll never reads `settings` or `pg_url`.
//! - **1 open**: `store::for_event` opens the event's Redis node once (`redis://`: a Redis
//!   `open`; over REST, each command is an outbound HTTP request: one EVALSHA once the script
//!   is loaded).
//! - **Entries**: the component's `allowed_outbound_hosts`, all parsed on that first check
//!   (`crates/outbound-networking-config/src/allowed_hosts.rs`, `AllowedHostsConfig::parse`):
//!   `{{ redis_origin }}`, one entry whose template is resolved whole before it is parsed, so
//!   its scheme is the deployment's (before: `redis://`, `rediss://` and `https://` of
//!   `{{ redis_host }}`), plus `postgres://{{ pg_host }}` for poll.
//!
//! A request that opens nothing pays only its `get`s: `GET /api/time` pays nothing, a poll with
//! a forged JWT one lookup (`jwt_secret`).

use std::future::Future;

use anyhow::Result;
use reqwest::Method;
use seckill_host::{SpinCostTotals, SpinCosts};
use seckill_testkit::walk::Step;
use seckill_testkit::{PgServer, RedisServer, TestApp, app_vars, product_manifest, walk_costs};
use serde_json::{Value, json};

/// The application variables `spin.toml` declares: every instance's first open resolves them.
const APP_VARIABLES: u64 = 12;

/// Per request: `gets` variable reads naming `templated` application variables between them,
/// so [`APP_VARIABLES`] + `templated` lookups; one open; `entries` hosts parsed.
const fn budget(gets: u64, templated: u64, entries: u64) -> SpinCosts {
    SpinCosts {
        variable_lookups: APP_VARIABLES + templated,
        variable_gets: gets,
        outbound_opens: 1,
        allowed_host_entries_parsed: entries,
    }
}

/// The steps of a buyer's walk through the sale, their components and their budgets.
const BUDGETS: [(Step, &str, SpinCosts); 5] = [
    (Step::Challenge, "issue-token", budget(3, 3, 1)),
    (Step::Admission, "issue-token", budget(4, 4, 1)),
    (Step::Precheck, "precheck", budget(4, 4, 1)),
    (Step::Buy, "buy", budget(2, 2, 1)),
    (Step::Poll, "poll", budget(3, 2, 2)),
];

/// Runs `request` alone and returns its status and what its one instance would cost Spin,
/// checking that no other component ran meanwhile.
async fn measured(
    app: &TestApp,
    component: &str,
    request: impl Future<Output = Result<(u16, Value)>>,
) -> Result<(u16, Value, SpinCostTotals)> {
    app.app.reset_spin_costs();
    let (status, body) = request.await?;
    for (id, totals) in app.app.spin_costs() {
        if id != component {
            assert_eq!(
                totals,
                SpinCostTotals::default(),
                "{id} ran for {component}"
            );
        }
    }
    let totals = app.app.spin_costs_of(component).expect("a component");
    Ok((status, body, totals))
}

/// Each budgeted step's second buyer pays exactly its budget (the first one loads the
/// scripts: over REST, EVALSHA → NOSCRIPT → EVAL is two requests).
async fn assert_budgets(app: &TestApp) -> Result<()> {
    app.open_event("costs", json!({ "stock": 10 })).await?;
    walk_costs(app, "costs", "warm-up").await?;
    let walked = walk_costs(app, "costs", "buyer").await?;
    for (step, component, budget) in BUDGETS {
        let costed = walked
            .iter()
            .find(|c| c.step == step)
            .unwrap_or_else(|| panic!("the walk has no {step:?}: {walked:?}"));
        assert!(
            [200, 202].contains(&costed.status),
            "{step:?}: {} (the walk through the sale failed)",
            costed.status
        );
        assert_eq!(costed.component, component, "{step:?}");
        assert_eq!(
            costed.totals,
            SpinCostTotals {
                instances: 1,
                costs: budget
            },
            "{step:?} ({component}): Spin's costs per request changed"
        );
    }
    Ok(())
}

/// The hot routes over the manifest's own transport.
#[tokio::test(flavor = "multi_thread")]
async fn each_hot_route_pays_its_spin_budget() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = TestApp::start(product_manifest(), &app_vars(&redis, &pg)).await?;
    assert_budgets(&app).await?;

    // No open, no resolution: a request pays its gets only.
    let (status, _, time) = measured(&app, "server-time", async {
        let (status, body) = app.get("/api/time").await?;
        Ok((status, Value::String(body)))
    })
    .await?;
    assert_eq!((status, time.instances), (200, 1));
    assert_eq!(time.costs, SpinCosts::default(), "GET /api/time");
    let forged = measured(
        &app,
        "poll",
        app.call(
            Method::GET,
            "/api/events/costs/orders/me",
            Some("not-a-jwt"),
            None,
        ),
    )
    .await?;
    assert_eq!(forged.0, 401, "{}", forged.1);
    let one_get = SpinCosts {
        variable_lookups: 1,
        variable_gets: 1,
        ..SpinCosts::default()
    };
    assert_eq!(forged.2.costs, one_get, "a poll with a forged JWT");
    Ok(())
}

/// The same budgets over the Upstash REST transport: an outbound HTTP request is an open too.
#[tokio::test(flavor = "multi_thread")]
async fn the_rest_transport_pays_the_same_budget() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = TestApp::builder(product_manifest())
        .vars(&app_vars(&redis, &pg))
        .over_rest()
        .start()
        .await?;
    assert_budgets(&app).await
}
