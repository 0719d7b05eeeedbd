//! The drain: every accepted order lands in Postgres once and poll shows it; one drainer works
//! an event at a time and the consumer group keeps one consumer; the stream holds only what the
//! drain still needs, and `queued` counts exactly that.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::jwt_for;
use serde_json::{Value, json};

use crate::{assert_books, drain_all, job, sell, start};

/// Only the lease holder reads the stream, so however often the drain runs, the consumer group
/// keeps one consumer: runs do not pile up consumers (one a second per event, forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_keeps_one_consumer_however_often_it_runs() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let mut accepted = Vec::new();
    for round in 0..3 {
        let (status, _) = app
            .admin(
                Method::PUT,
                "/admin/events/consumers",
                Some(&json!({ "sku": "c", "unit_amount": 100, "currency": "eur", "pow_difficulty": 0, "admission_addr_rate": 0, "stock": 30, "shards": 2,
                    "start_ms": 0, "end_ms": 4_000_000_000_000u64 })),
            )
            .await?;
        assert!(status == 200 || status == 201);
        if round == 0 {
            app.admin(Method::POST, "/admin/events/consumers/warmup", None)
                .await?;
        }
        for i in 0..10 {
            let user = format!("consumer-{round}-{i}");
            let token = app
                .admit_and_precheck("consumers", &user)
                .await?
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            let (status, body) = app.buy_until_answered("consumers", &user, &token).await?;
            assert_eq!(status, 202, "{body}");
            accepted.push((user, body["order_id"].as_str().unwrap().to_owned()));
        }
        for _ in 0..3 {
            job(&app, "drain").await?;
        }
    }
    for shard in 0..2 {
        let mut conn = app
            .shard_client("consumers", shard)
            .get_multiplexed_async_connection()
            .await?;
        let consumers: Vec<redis::Value> = redis::cmd("XINFO")
            .arg("CONSUMERS")
            .arg(format!("{{sk:consumers/{shard}}}:queue"))
            .arg("drain")
            .query_async(&mut conn)
            .await?;
        assert_eq!(
            consumers.len(),
            1,
            "9 drain runs, one consumer on shard {shard}'s stream: {consumers:?}"
        );
    }
    assert_books(&app, &pg, "consumers", 30, &accepted).await
}

/// `queued` counts the orders on their way to Postgres: all of a sale before the drain, none
/// after it, sale after sale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_counts_the_orders_on_their_way_to_postgres() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let mut accepted = Vec::new();
    for round in 0..3 {
        let event = format!("long{round}");
        let sold = sell(&app, &event, 100, 100, json!({})).await?;
        let status = app.status(&event).await?;
        assert_eq!(status["queued"], 100, "{status}");
        drain_all(&app).await?;
        let status = app.status(&event).await?;
        assert_eq!(status["queued"], 0, "all drained: {status}");
        accepted.push((event, sold));
    }
    for (event, sold) in &accepted {
        assert_books(&app, &pg, event, 100, sold).await?;
    }
    Ok(())
}

/// The order stream holds what the drain still needs, not every order ever accepted: once
/// drained, acknowledged entries are trimmed, sale after sale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_order_stream_stays_bounded() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let mut accepted = Vec::new();
    for round in 0..3 {
        let event = format!("long{round}");
        let sold = sell(&app, &event, 100, 100, json!({})).await?;
        drain_all(&app).await?;
        let status = app.status(&event).await?;
        // Each of the 4 shards' streams keeps at most its last delivered entry.
        assert!(
            status["stream_length"].as_i64().unwrap_or(i64::MAX) <= 4,
            "acknowledged entries are trimmed: {status}"
        );
        accepted.push((event, sold));
    }
    for (event, sold) in &accepted {
        assert_books(&app, &pg, event, 100, sold).await?;
    }
    Ok(())
}

/// The drain's knobs come from the one `settings` variable (the test kit folds the tests'
/// `drain_batch=50` and `drain_max_batches=1` into it): one run moves one batch per shard (one
/// shard here). A name that is not a setting fails the run loudly instead of being ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settings_variable_bounds_each_drain_run_and_refuses_unknown_names() -> Result<()> {
    let (_redis, pg, app) = start(&[("drain_max_batches", "1")]).await?;
    let accepted = sell(&app, "knobs", 120, 120, json!({ "shards": 1 })).await?;
    let (status, report) = job(&app, "drain").await?;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        report["confirmed"], 50,
        "one batch of drain_batch=50: {report}"
    );
    drain_all(&app).await?;
    assert_books(&app, &pg, "knobs", 120, &accepted).await?;

    let (_redis, _pg, app) = start(&[("drain_bach", "50")]).await?;
    let (status, body) = job(&app, "drain").await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (500, Some("internal")),
        "{body}"
    );
    Ok(())
}

/// Run again over the REST transport and over three Redis nodes (`scripts/test.sh`): what
/// how Redis is reached and how its shards are laid out can change.
mod over_rest_and_nodes {
    use super::*;

    /// Run again over `spin.http.toml` too (`scripts/test.sh`): a sale's order path and every
    /// script, through the job routes instead of the cron triggers.
    mod over_http_manifest {
        use super::*;

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn the_drain_lands_every_order_once_and_poll_shows_it() -> Result<()> {
            let (_redis, pg, app) = start(&[]).await?;
            let accepted = sell(&app, "land", 120, 150, json!({})).await?;
            assert_eq!(accepted.len(), 120);
            drain_all(&app).await?;
            drain_all(&app).await?; // again: nothing moves
            assert_books(&app, &pg, "land", 120, &accepted).await?;
            let (user, order) = &accepted[0];
            let (_, polled) = app
                .call(
                    Method::GET,
                    "/api/events/land/orders/me",
                    Some(&jwt_for(user)),
                    None,
                )
                .await?;
            assert_eq!(
                (polled["status"].as_str(), polled["state"].as_str()),
                (Some("order"), Some("confirmed")),
                "{polled}"
            );
            assert_eq!(polled["order_id"], order.as_str());
            Ok(())
        }
    }
}

/// Run again over three Redis nodes (`scripts/test.sh`): what the layout of the shards over
/// the nodes can change.
mod over_nodes {
    use super::*;

    /// Two drains at once over one event: each shard has its own lease, so one drainer finds
    /// the shards the other holds taken (`busy`) and no shard is taken from both.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_drainers_at_once_take_each_shard_in_turn() -> Result<()> {
        // A lease that outlives any delay between the two drainers' starts on a busy machine.
        let (_redis, pg, app) = start(&[("drain_lease_ms", "5000")]).await?;
        let accepted = sell(&app, "pair", 150, 150, json!({})).await?;
        // Both run while the orders table is locked, so the one holding the lease waits on Postgres
        // and the other meets the lease, however fast a drain is (unlocked, one drain could finish
        // before the other starts). The first to answer is the one that met it; then the other
        // may write.
        let locker = pg.client().await?;
        locker
            .batch_execute("BEGIN; LOCK TABLE orders IN EXCLUSIVE MODE")
            .await?;
        let answered = tokio::sync::Notify::new();
        let drainer = || async {
            let report = job(&app, "drain").await;
            answered.notify_one();
            report
        };
        let unlock = async {
            let _ = tokio::time::timeout(Duration::from_secs(20), answered.notified()).await;
            locker.batch_execute("COMMIT").await
        };
        let (a, b, unlocked) = tokio::join!(drainer(), drainer(), unlock);
        unlocked?;
        let (a, b) = (a?.1, b?.1);
        // Each shard has its own lease: a shard one of them found taken, the other held.
        let busy = |r: &Value| -> HashSet<String> {
            r["busy"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| {
                    e.as_str()
                        .filter(|e| e.starts_with("pair/"))
                        .map(str::to_owned)
                })
                .collect()
        };
        assert!(
            !busy(&a).is_empty() || !busy(&b).is_empty(),
            "one of them found a shard's lease taken: {a} / {b}"
        );
        assert!(
            busy(&a).is_disjoint(&busy(&b)),
            "and the other held it: {a} / {b}"
        );
        tokio::time::sleep(Duration::from_millis(600)).await;
        drain_all(&app).await?;
        assert_books(&app, &pg, "pair", 150, &accepted).await
    }
}
