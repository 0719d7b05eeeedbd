//! Faults: Postgres stopped mid-drain, a drain that dies between commit and acknowledgement or
//! inside its transaction, Redis killed and restarted, one event's data broken. Nothing
//! accepted is lost, nothing lands twice, nothing paid is sold again, and the rest goes on.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::Result;
use futures::{StreamExt, stream};
use reqwest::Method;
use seckill_testkit::{PgServer, RedisServer, TestApp, faulty_manifest, jwt_for};
use serde_json::{Value, json};

use crate::{assert_books, drain_all, job, sell, start, vars};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stopped_mid_drain_then_everything_lands_once() -> Result<()> {
    // One batch of 50 per run (one shard), so the sale drains over several runs.
    let (_redis, mut pg, app) = start(&[("drain_max_batches", "1")]).await?;
    let accepted = sell(&app, "pgdown", 200, 200, json!({ "shards": 1 })).await?;
    let (status, first) = job(&app, "drain").await?;
    assert_eq!(
        (status, first["inserted"].as_u64()),
        (200, Some(50)),
        "{first}"
    );
    // Postgres goes away while the next run is under way.
    let (during, ()) = tokio::join!(job(&app, "drain"), async { pg.stop() });
    let (status, report) = during?;
    assert!(status == 200 || status == 503, "{status} {report}");
    let (status, _) = job(&app, "drain").await?;
    assert_eq!(
        status, 503,
        "Postgres down: the drain reports it and acknowledges nothing"
    );
    pg.restart()?;
    tokio::time::sleep(Duration::from_millis(600)).await; // lease and reclaim time pass
    drain_all(&app).await?;
    assert_books(&app, &pg, "pgdown", 200, &accepted).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_dies_between_commit_and_ack_duplicates_nothing() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let crashing = TestApp::start(
        &faulty_manifest()?,
        &vars(&redis, &pg, &[("fault_injection", "trap_after_commit")]),
    )
    .await?;
    // One shard: the first batch is the one that commits before the trap.
    let accepted = sell(&crashing, "crash", 80, 80, json!({ "shards": 1 })).await?;
    let (status, _) = job(&crashing, "drain").await?;
    assert_eq!(status, 500, "the drain trapped after its commit");
    let db = pg.client().await?;
    let landed: i64 = db
        .query_one("SELECT count(*) FROM orders", &[])
        .await?
        .get(0);
    assert_eq!(landed, 50, "one batch committed, none acknowledged");
    drop(crashing);

    let app = TestApp::start(seckill_testkit::product_manifest(), &vars(&redis, &pg, &[])).await?;
    tokio::time::sleep(Duration::from_millis(600)).await;
    drain_all(&app).await?;
    assert_books(&app, &pg, "crash", 80, &accepted).await?;
    let status = app.status("crash").await?;
    assert_eq!(
        status["drained"], 80,
        "the drained counter moved once per order"
    );
    Ok(())
}

/// A `redis-server` with the AOF fsynced on every write, a migrated Postgres and the app.
async fn start_with_aof_always() -> Result<(RedisServer, PgServer, TestApp)> {
    let redis = RedisServer::start_durable()?;
    let pg = PgServer::start()?;
    pg.migrate().await?;
    let app = TestApp::start(seckill_testkit::product_manifest(), &vars(&redis, &pg, &[])).await?;
    Ok((redis, pg, app))
}

/// Whether a job's report says it reached every node and every event.
fn reached_everything(report: &Value) -> bool {
    report["unreachable_nodes"].as_u64().unwrap_or(0) == 0
        && report["event_errors"]
            .as_object()
            .is_none_or(|errors| errors.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarted_with_aof_always_loses_no_accepted_order() -> Result<()> {
    let (mut redis, pg, app) = start_with_aof_always().await?;
    let accepted = sell(&app, "aof", 100, 60, json!({})).await?;
    redis.crash_and_restart()?; // SIGKILL: only what was fsynced survives
    // Runs in the moment of the restart meet the old connection and are retried, as a
    // scheduler would.
    let mut reached = false;
    for _ in 0..40 {
        let (status, report) = job(&app, "drain").await?;
        assert!(status == 200 || status == 503, "{status} {report}");
        if status == 200 && reached_everything(&report) {
            reached = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(reached, "the drain reached Redis again after the restart");
    drain_all(&app).await?;
    assert_books(&app, &pg, "aof", 100, &accepted).await
}

/// The host's shared connection reconnects by itself after Redis is killed and restarted: the
/// sale goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sale_goes_on_after_a_redis_restart() -> Result<()> {
    let (mut redis, pg, app) = start_with_aof_always().await?;
    app.open_event("aof", json!({ "stock": 100, "shards": 4 }))
        .await?;
    redis.crash_and_restart()?;
    let mut more = Vec::new();
    for i in 0..40 {
        let user = format!("aof-late{i}");
        // Requests in the moment of the restart get 503 and are retried, as a client would.
        for _ in 0..40 {
            if let Ok(Ok(token)) = app.admit_and_precheck("aof", &user).await {
                let (status, body) = app.buy("aof", &user, &token).await?;
                if status == 202 {
                    more.push((
                        user.clone(),
                        body["order_id"].as_str().unwrap_or_default().to_owned(),
                    ));
                    break;
                }
                assert_eq!(status, 503, "only unavailability is retried: {body}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(more.len(), 40, "the sale continued after the restart");
    drain_all(&app).await?;
    assert_books(&app, &pg, "aof", 100, &more).await
}

/// The abandoned transaction: a drain dies between BEGIN and COMMIT (and a client gives up on
/// a drain mid-run), then buyers pay on the same connection pool, then the host dies, then
/// timeout release runs. Every payment answered 200 must be `paid` in Postgres and Redis, and
/// no paid unit may be sold again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_transaction_never_swallows_a_payment() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    // Redelivered entries must not be dead-lettered by the trapping runs. Both hosts are up
    // before the sale starts (a host takes seconds to compile its components).
    let patient = [("drain_max_deliveries", "50")];
    let app = TestApp::start(
        seckill_testkit::product_manifest(),
        &vars(&redis, &pg, &patient),
    )
    .await?;
    let faulty = TestApp::start(
        &faulty_manifest()?,
        &vars(
            &redis,
            &pg,
            &[patient[0], ("fault_injection", "trap_in_transaction")],
        ),
    )
    .await?;
    let first = sell(&app, "leak", 60, 30, json!({ "payment_timeout_s": 6 })).await?;
    drain_all(&app).await?;
    let deadline = std::time::Instant::now() + Duration::from_millis(6_500);

    // The faulty host's drain traps inside its transaction; the same host takes the payments.
    let more = stream::iter(30..45)
        .map(|i| {
            let faulty = &faulty;
            async move {
                let user = format!("leak-late{i}");
                let token = faulty.admit_and_precheck("leak", &user).await?.ok();
                let (status, body) = faulty
                    .buy("leak", &user, &token.unwrap_or_default())
                    .await?;
                anyhow::ensure!(status == 202, "{status} {body}");
                Ok((
                    user,
                    body["order_id"].as_str().unwrap_or_default().to_owned(),
                ))
            }
        })
        .buffered(4)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    for _ in 0..3 {
        let (status, _) = job(&faulty, "drain").await?;
        assert_eq!(status, 500, "the drain trapped inside its transaction");
        tokio::time::sleep(Duration::from_millis(600)).await; // the dead drainer's lease ends
    }
    // A caller that gives up on a drain while it runs.
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(5))
        .build()?;
    let _ = impatient
        .post(format!("{}/admin/jobs/drain", faulty.base_url))
        .bearer_auth(seckill_testkit::ADMIN_TOKEN)
        .send()
        .await;
    let pays = stream::iter(first.clone())
        .map(|(user, order)| {
            let faulty = &faulty;
            async move {
                let (status, body) = faulty.pay("leak", &user, &order).await?;
                anyhow::Ok((order, status, body))
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    let paid: HashSet<String> = pays
        .iter()
        .filter(|(_, status, body)| *status == 200 && body["outcome"] == "paid")
        .map(|(order, _, _)| order.clone())
        .collect();
    assert_eq!(paid.len(), first.len(), "every payment answered: {pays:?}");
    // What the trapped drains wrote was never committed, so nobody else's COMMIT may land it.
    let db = pg.client().await?;
    let late: Vec<String> = more.iter().map(|(_, order)| order.clone()).collect();
    let landed: i64 = db
        .query_one(
            "SELECT count(*) FROM orders WHERE order_id = ANY($1)",
            &[&late],
        )
        .await?
        .get(0);
    assert_eq!(landed, 0, "half a trapped transaction became visible");
    // The host dies: whatever it had not committed is gone.
    drop(faulty);

    tokio::time::sleep_until(deadline.into()).await; // past every paid order's deadline
    drain_all(&app).await?;
    let (status, report) = job(&app, "timeout-release").await?;
    assert_eq!(status, 200, "{report}");
    for order in &paid {
        let state: String = db
            .query_one("SELECT status FROM orders WHERE order_id = $1", &[order])
            .await?
            .get(0);
        assert_eq!(state, "paid", "order {order} was answered 200");
    }
    for (user, order) in &first {
        let (_, polled) = app
            .call(
                Method::GET,
                "/api/events/leak/orders/me",
                Some(&jwt_for(user)),
                None,
            )
            .await?;
        assert_eq!(polled["state"], "paid", "{order}: {polled}");
    }
    // Nothing paid went back on sale: only expired (unpaid, late) units did.
    let expired: i64 = db
        .query_one(
            "SELECT count(*) FROM orders WHERE event_id = 'leak' AND status = 'expired'",
            &[],
        )
        .await?
        .get(0);
    let status = app.status("leak").await?;
    assert_eq!(status["stock_left"], 60 - 45 + expired, "{status}");
    let all: Vec<(String, String)> = first.iter().chain(&more).cloned().collect();
    assert_books(&app, &pg, "leak", 60, &all).await
}

/// Three events of 10 units (one shard each) sold; then `broken-b`'s queue is no longer a
/// stream: every script touching it fails.
async fn three_sales_one_broken(
    app: &TestApp,
) -> Result<Vec<(&'static str, Vec<(String, String)>)>> {
    let mut sold = Vec::new();
    for event in ["broken-a", "broken-b", "broken-c"] {
        sold.push((
            event,
            sell(app, event, 10, 10, json!({ "shards": 1 })).await?,
        ));
    }
    let mut conn = app
        .shard_client("broken-b", 0)
        .get_multiplexed_async_connection()
        .await?;
    redis::pipe()
        .cmd("DEL")
        .arg("{sk:broken-b/0}:queue")
        .cmd("SET")
        .arg("{sk:broken-b/0}:queue")
        .arg("not a stream")
        .query_async::<()>(&mut conn)
        .await?;
    Ok(sold)
}

/// Reconcile reports the broken event and still checks every other event's books.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_broken_event_fails_alone_in_reconcile() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let sold = three_sales_one_broken(&app).await?;
    drain_all(&app).await?;
    let (status, books) = job(&app, "reconcile").await?;
    assert_eq!(status, 200, "{books}");
    assert_eq!(
        books["event_errors"]
            .as_object()
            .map(|e| e.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["broken-b".to_owned()]),
        "{books}"
    );
    assert_eq!(books["events"].as_array().map(Vec::len), Some(2), "{books}");
    for (event, accepted) in [&sold[0], &sold[2]] {
        assert_books(&app, &pg, event, 10, accepted).await?;
    }
    Ok(())
}

/// Run again over the REST transport and over three Redis nodes (`scripts/test.sh`): what
/// how Redis is reached and how its shards are laid out can change.
mod over_rest_and_nodes {
    use super::*;

    /// The drain reports the broken event's shard, with Redis's reason, and still lands every other
    /// event's orders.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_broken_event_fails_alone_in_the_drain() -> Result<()> {
        let (_redis, pg, app) = start(&[]).await?;
        let sold = three_sales_one_broken(&app).await?;
        let (status, report) = job(&app, "drain").await?;
        assert_eq!(status, 200, "{report}");
        assert_eq!(
            report["event_errors"]
                .as_object()
                .map(|e| e.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["broken-b/0".to_owned()]),
            "{report}"
        );
        assert!(
            report["event_errors"]["broken-b/0"]
                .as_str()
                .is_some_and(|e| e.contains("WRONGTYPE")),
            "the operator sees why: {report}"
        );
        drain_all(&app).await?;
        for (event, accepted) in [&sold[0], &sold[2]] {
            assert_books(&app, &pg, event, 10, accepted).await?;
        }
        Ok(())
    }
}
