//! Orders into Postgres under faults: the drain, payment and timeout release, with real Redis,
//! real Postgres and the real host. After each test the books must balance: orders in Postgres
//! = units sold, no duplicates, stock never negative, nothing accepted missing.
//!
//! One binary (`binary(orders)`), one module per concern, one behaviour per test:
//! - `drain` — every order lands once; leases, the consumer group, the stream's length;
//! - `dead_letters` — a duplicate delivery, a malformed entry, an entry Postgres refuses;
//! - `pay` — paying, and paying racing timeout release;
//! - `checkout` — paying through the provider's checkout sessions (the kit's Stripe sandbox);
//! - `reconcile` — drift and the orders behind it;
//! - `failures` — Postgres stopped, drains that die, Redis restarted, a broken event;
//! - `multi_node` — one event's shards spread over several Redis nodes (these tests start their
//!   own nodes and place shards by URL, so no later run repeats them).
//!
//! A test whose outcome the manifest, the transport or the node count can change lives in a
//! module named for the later runs of `scripts/test.sh` that repeat it (`over_rest`,
//! `over_nodes`, `over_rest_and_nodes`, `over_http_manifest`), beside the others of its concern.

use std::collections::HashSet;

use anyhow::Result;
use futures::{StreamExt, stream};
use reqwest::Method;
use seckill_testkit::{PgServer, RedisServer, TestApp, app_vars};
use serde_json::{Value, json};

mod checkout;
mod dead_letters;
mod drain;
mod failures;
mod multi_node;
mod pay;
mod reconcile;

/// Drain tuning for tests: small batches, short lease and reclaim times.
fn vars(
    redis: &RedisServer,
    pg: &PgServer,
    extra: &[(&'static str, &str)],
) -> Vec<(&'static str, String)> {
    let mut v = app_vars(redis, pg);
    v.extend([
        ("drain_batch", "50".to_owned()),
        ("drain_lease_ms", "500".to_owned()),
        ("drain_reclaim_idle_ms", "200".to_owned()),
        ("drain_max_deliveries", "2".to_owned()),
    ]);
    v.extend(extra.iter().map(|(k, val)| (*k, val.to_string())));
    v
}

async fn start(extra: &[(&'static str, &str)]) -> Result<(RedisServer, PgServer, TestApp)> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let app = TestApp::start(
        seckill_testkit::product_manifest(),
        &vars(&redis, &pg, extra),
    )
    .await?;
    Ok((redis, pg, app))
}

/// `users` buyers for `stock` units; returns the accepted (user, order id) pairs.
async fn sell(
    app: &TestApp,
    event: &str,
    stock: u64,
    users: usize,
    config: Value,
) -> Result<Vec<(String, String)>> {
    let mut cfg = json!({ "stock": stock, "shards": 4 });
    for (k, v) in config.as_object().cloned().unwrap_or_default() {
        cfg[k] = v;
    }
    app.open_event(event, cfg).await?;
    let results: Vec<Option<(String, String)>> =
        stream::iter((0..users).map(|i| format!("{event}-u{i}")))
            .map(|user| async move {
                let Ok(token) = app.admit_and_precheck(event, &user).await? else {
                    return anyhow::Ok(None);
                };
                let (status, body) = app.buy_until_answered(event, &user, &token).await?;
                Ok((status == 202).then(|| {
                    (
                        user,
                        body["order_id"].as_str().unwrap_or_default().to_owned(),
                    )
                }))
            })
            .buffer_unordered(64)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_>>()?;
    Ok(results.into_iter().flatten().collect())
}

async fn job(app: &TestApp, name: &str) -> Result<(u16, Value)> {
    app.admin(Method::POST, &format!("/admin/jobs/{name}"), None)
        .await
}

/// Drains until nothing is left in flight (bounded).
async fn drain_all(app: &TestApp) -> Result<()> {
    for _ in 0..50 {
        let (status, report) = job(app, "drain").await?;
        anyhow::ensure!(status == 200, "drain: {status} {report}");
        if report["inserted"] == 0
            && report["confirmed"] == 0
            && report["busy"].as_array().is_none_or(|b| b.is_empty())
        {
            return Ok(());
        }
    }
    anyhow::bail!("the drain did not settle")
}

/// The invariants: every accepted order is in Postgres exactly once, the ledger balances and
/// never went negative, and reconcile finds no drift.
async fn assert_books(
    app: &TestApp,
    pg: &PgServer,
    event: &str,
    stock: i64,
    accepted: &[(String, String)],
) -> Result<()> {
    let db = pg.client().await?;
    let rows = db
        .query(
            "SELECT order_id, user_id FROM orders WHERE event_id = $1",
            &[&event],
        )
        .await?;
    let in_pg: HashSet<(String, String)> = rows.iter().map(|r| (r.get(1), r.get(0))).collect();
    assert_eq!(rows.len(), in_pg.len(), "no duplicate rows");
    let want: HashSet<(String, String)> = accepted.iter().cloned().collect();
    assert_eq!(
        in_pg.len(),
        want.len(),
        "as many orders in Postgres as accepted"
    );
    assert!(
        in_pg == want,
        "Postgres holds exactly the accepted orders: missing {:?}, extra {:?}",
        want.difference(&in_pg).collect::<Vec<_>>(),
        in_pg.difference(&want).collect::<Vec<_>>()
    );
    let ledger = db
        .query_one(
            "SELECT available, held, released FROM stock_ledger WHERE event_id = $1",
            &[&event],
        )
        .await?;
    let (available, held, released): (i64, i64, i64) =
        (ledger.get(0), ledger.get(1), ledger.get(2));
    let live: i64 = db
        .query_one("SELECT count(*) FROM orders WHERE event_id = $1 AND status IN ('pending_payment', 'paid')", &[&event])
        .await?
        .get(0);
    assert_eq!(held, live, "ledger held = pending + paid");
    assert_eq!(available + held, stock, "ledger balances");
    let expired: i64 = db
        .query_one(
            "SELECT count(*) FROM orders WHERE event_id = $1 AND status = 'expired'",
            &[&event],
        )
        .await?
        .get(0);
    assert_eq!(released, expired, "every expired unit released once");
    let (status, books) = app
        .admin(
            Method::POST,
            &format!("/admin/jobs/reconcile?event={event}"),
            None,
        )
        .await?;
    assert_eq!(status, 200, "{books}");
    let b = &books["events"][0];
    assert_eq!(
        (b["drift"].as_i64(), b["ledger_drift"].as_i64()),
        (Some(0), Some(0)),
        "{b}"
    );
    Ok(())
}
