//! One event over several Redis nodes: each of its shards lives on the node the placement rule
//! names (and its own slot, the master configuration, on the node the event id names), the jobs
//! walk every node, health tells a dead node, and a dead node stops only the shards it holds:
//! buyers homed elsewhere buy on, the drain and the release do every other shard. These tests
//! place shards by URL, which the REST facades change: each keeps `three_redis_nodes` or
//! `stuck_event` in its name, for the filters that leave them out of the REST run.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::Result;
use reqwest::Method;
use seckill_domain::ids::home_shard;
use seckill_testkit::{PgServer, RedisServer, TestApp, over_nodes, placement};
use serde_json::{Value, json};

use crate::{assert_books, drain_all, job, sell, vars};

/// Shards of the events here: enough that each event has shards on every node.
const SHARDS: u32 = 12;

/// `n` Redis nodes, a migrated Postgres and the app over all of them (`extra` settings).
async fn nodes(
    n: usize,
    extra: &[(&'static str, &str)],
) -> Result<(Vec<RedisServer>, PgServer, TestApp)> {
    let nodes: Vec<RedisServer> = (0..n)
        .map(|_| RedisServer::start())
        .collect::<Result<_>>()?;
    let pg = PgServer::start()?;
    pg.migrate().await?;
    let refs: Vec<&RedisServer> = nodes.iter().collect();
    let mut v = vars(&nodes[0], &pg, extra);
    over_nodes(&mut v, &refs);
    let app = TestApp::start(seckill_testkit::product_manifest(), &v).await?;
    Ok((nodes, pg, app))
}

/// The first event `prefix<i>` whose own slot is on node `master` and whose shards use every
/// node; with its shards' nodes.
fn event_placed(prefix: &str, nodes: &[RedisServer], master: usize) -> (String, Vec<usize>) {
    let refs: Vec<&RedisServer> = nodes.iter().collect();
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find_map(|name| {
            let (m, shards) = placement(&name, SHARDS, &refs);
            let used: HashSet<usize> = shards.iter().copied().collect();
            (m == master && used.len() == nodes.len()).then_some((name, shards))
        })
        .expect("some name places so")
}

/// Sells `event` (`stock` units over [`SHARDS`], 1 s to pay) to `users` buyers.
async fn sell_sharded(
    app: &TestApp,
    event: &str,
    stock: u64,
    users: usize,
) -> Result<Vec<(String, String)>> {
    let config = json!({ "shards": SHARDS, "payment_timeout_s": 1, "admission_multiplier": 20 });
    sell(app, event, stock, users, config).await
}

/// Each shard's keys live on the node the rule names, and only there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_over_three_redis_nodes_keeps_each_shard_on_the_node_the_rule_names() -> Result<()>
{
    let (nodes, _pg, app) = nodes(3, &[]).await?;
    let (event, at) = event_placed("multi", &nodes, 0);
    assert_eq!(sell_sharded(&app, &event, 60, 90).await?.len(), 60);
    for (s, &home_node) in at.iter().enumerate() {
        for (n, node) in nodes.iter().enumerate() {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{{sk:{event}/{s}}}*"))
                .query(&mut node.client().get_connection()?)?;
            assert_eq!(
                !keys.is_empty(),
                n == home_node,
                "shard {s}'s keys on node {n}: {keys:?}"
            );
        }
    }
    Ok(())
}

/// The jobs walk every node: every order lands, every unpaid unit goes back to its shard,
/// wherever that shard lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_over_three_redis_nodes_is_drained_and_released_on_every_node() -> Result<()> {
    let (nodes, pg, app) = nodes(3, &[]).await?;
    let (event, _) = event_placed("multi", &nodes, 1);
    let sold = sell_sharded(&app, &event, 60, 90).await?;
    assert_eq!(sold.len(), 60, "sells out exactly");
    drain_all(&app).await?;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let (status, report) = job(&app, "timeout-release").await?;
    assert_eq!(
        (
            status,
            report["expired"].as_u64(),
            report["released"].as_u64()
        ),
        (200, Some(60), Some(60)),
        "{report}"
    );
    assert_eq!(app.status(&event).await?["stock_left"], 60);
    assert_books(&app, &pg, &event, 60, &sold).await
}

/// Health over three nodes: `ok`; then node 2 dies: `degraded` for the public, and the
/// operators' health names the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_over_three_redis_nodes_is_ok_then_degraded_naming_a_dead_node() -> Result<()> {
    let (mut nodes, _pg, app) = nodes(3, &[]).await?;
    let (status, health) = app.get_json("/api/health").await?;
    assert_eq!((status, &health["redis"]), (200, &json!("ok")), "{health}");
    drop(nodes.pop());
    // The public summary is shared for a short window: asked again until it is probed afresh.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let health = loop {
        let (_, health) = app.get_json("/api/health").await?;
        if health["redis"] != "ok" || std::time::Instant::now() > deadline {
            break health;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(health["redis"], "degraded", "{health}");
    let (_, health) = app.admin(Method::GET, "/admin/health", None).await?;
    assert_eq!(health["redis"]["ok"], false, "{health}");
    assert!(
        health["redis"]["error"]
            .as_str()
            .unwrap_or("")
            .starts_with("node 2"),
        "{health}"
    );
    Ok(())
}

/// Node 2 dies mid-sale: buyers homed on its shards hear 503, the others buy on; the drain
/// reports the shards it could not reach and lands every order of the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_one_of_three_redis_nodes_stops_only_the_shards_it_holds() -> Result<()> {
    let (mut nodes, pg, app) = nodes(3, &[]).await?;
    let (event, at) = event_placed("dying", &nodes, 0);
    // 40 of 120 units: every shard keeps stock to sell after the death.
    let mut sold = sell_sharded(&app, &event, 120, 40).await?;
    assert_eq!(sold.len(), 40);
    drop(nodes.pop());
    let node_of = |user: &String| at[home_shard(&event, user, SHARDS) as usize];
    let users: Vec<String> = (0..).map(|i| format!("late{i}")).take(200).collect();
    let alive = users
        .iter()
        .find(|u| node_of(u) == 0)
        .expect("a user homed on node 0");
    let token = app
        .admit_and_precheck(&event, alive)
        .await?
        .expect("a live node sells on");
    let (status, body) = app.buy(&event, alive, &token).await?;
    assert_eq!(status, 202, "{body}");
    sold.push((alive.clone(), body["order_id"].as_str().unwrap().to_owned()));
    let stranded = users
        .iter()
        .find(|u| node_of(u) == 2)
        .expect("a user homed on node 2");
    let refused = app.admit_and_precheck(&event, stranded).await?;
    assert_eq!(
        refused.err().map(|(s, b)| (s, b["error"]["code"].clone())),
        Some((503, json!("unavailable")))
    );
    let (status, report) = job(&app, "drain").await?;
    assert_eq!(status, 200, "{report}");
    let dead: HashSet<String> = (0..SHARDS)
        .filter(|&s| at[s as usize] == 2)
        .map(|s| format!("{event}/{s}"))
        .collect();
    let failed: HashSet<String> = report["event_errors"]
        .as_object()
        .map(|e| e.keys().cloned().collect())
        .unwrap_or_default();
    assert_eq!(failed, dead, "exactly the dead node's shards: {report}");
    drain_all(&app).await.ok(); // the dead shards keep failing; the others settle
    let landed = orders_in_postgres(&pg, &event).await?;
    for (user, order) in &sold {
        let alive = at[home_shard(&event, user, SHARDS) as usize] != 2;
        assert_eq!(landed.contains(order), alive, "{user}'s order {order}");
    }
    Ok(())
}

/// Timeout release gives units back per shard, up to `release_batch` each: a shard with many
/// expired orders whose node is down must not starve the shards after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stuck_event_shard_does_not_starve_the_release_of_the_others() -> Result<()> {
    let (mut nodes, pg, app) = nodes(2, &[("release_batch", "10")]).await?;
    let (event, at) = event_placed("starve", &nodes, 0);
    let sold = sell_sharded(&app, &event, 60, 60).await?;
    drain_all(&app).await?;
    drop(nodes.remove(1));
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let on_dead = |user: &String| at[home_shard(&event, user, SHARDS) as usize] == 1;
    let (stuck, live): (Vec<_>, Vec<_>) = sold.iter().partition(|(u, _)| on_dead(u));
    // Each run expires up to 10 orders, then gives back up to 10 per shard: 6 runs expire
    // all 60, and a few more give back what the live shards are owed.
    let mut report = Value::Null;
    for _ in 0..9 {
        let (status, r) = job(&app, "timeout-release").await?;
        assert_eq!(status, 200, "{r}");
        report = r;
    }
    let waiting = report["waiting_for_redis"].as_u64().unwrap_or(0) as usize;
    let stuck_shards = at.iter().filter(|&&n| n == 1).count();
    assert!(
        waiting <= 10 * stuck_shards && (stuck.is_empty() || waiting > 0),
        "the stuck shards wait, at most 10 each per run: {report}"
    );
    let status = app.status(&event).await;
    // The status walks every shard, so it fails while one is down: count on the live node.
    assert!(status.is_err(), "{status:?}");
    let db = pg.client().await?;
    let released: i64 = db
        .query_one(
            "SELECT count(*) FROM orders WHERE event_id = $1 AND released_in_redis",
            &[&event],
        )
        .await?
        .get(0);
    assert_eq!(
        released as usize,
        live.len(),
        "every unpaid unit of the live shards is back on sale"
    );
    Ok(())
}

/// The order ids of `event` in Postgres.
async fn orders_in_postgres(pg: &PgServer, event: &str) -> Result<HashSet<String>> {
    let db = pg.client().await?;
    let rows = db
        .query("SELECT order_id FROM orders WHERE event_id = $1", &[&event])
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}
