//! Events spread over several Redis nodes: each event lives on the node the placement rule
//! names, the jobs walk every node, health tells a dead node, and a dead node stops only its own
//! events; a stuck event does not starve the release of the others. These tests place events by
//! URL, which the REST facades change: each keeps `three_redis_nodes` or `stuck_event` in its
//! name, for the filters that leave them out of the REST run.

use std::time::Duration;

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{PgServer, RedisServer, TestApp, events_per_node, over_nodes};
use serde_json::json;

use crate::{assert_books, drain_all, job, sell, vars};

/// Three Redis nodes, a migrated Postgres, the app over all three nodes, and one event per node
/// (element `i` lives on node `i`), named as the placement rule puts them.
async fn three_nodes() -> Result<(Vec<RedisServer>, PgServer, TestApp, Vec<String>)> {
    let nodes = vec![
        RedisServer::start()?,
        RedisServer::start()?,
        RedisServer::start()?,
    ];
    let pg = PgServer::start()?;
    pg.migrate().await?;
    let refs: Vec<&RedisServer> = nodes.iter().collect();
    let mut v = vars(&nodes[0], &pg, &[]);
    over_nodes(&mut v, &refs);
    let app = TestApp::start(seckill_testkit::product_manifest(), &v).await?;
    let events: Vec<String> = events_per_node("multi", &refs, 1)
        .into_iter()
        .flatten()
        .collect();
    Ok((nodes, pg, app, events))
}

/// Sells each event out (30 units, 45 buyers, 1 s to pay); returns each one's accepted orders.
async fn sell_out_each(app: &TestApp, events: &[String]) -> Result<Vec<Vec<(String, String)>>> {
    let mut sold = Vec::new();
    for event in events {
        let accepted = sell(app, event, 30, 45, json!({ "payment_timeout_s": 1 })).await?;
        assert_eq!(accepted.len(), 30, "{event} sells out exactly");
        sold.push(accepted);
    }
    Ok(sold)
}

/// Each event's keys live on one node only, the one the rule named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_spread_over_three_redis_nodes_live_on_the_node_the_rule_names() -> Result<()> {
    let (nodes, _pg, app, events) = three_nodes().await?;
    sell_out_each(&app, &events).await?;
    for (at, event) in events.iter().enumerate() {
        for (n, node) in nodes.iter().enumerate() {
            let mut conn = node.client().get_connection()?;
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{{sk:{event}}}*"))
                .query(&mut conn)?;
            assert_eq!(
                !keys.is_empty(),
                n == at,
                "{event} keys on node {n}: {keys:?}"
            );
        }
    }
    Ok(())
}

/// The jobs walk every node: every order lands, every unpaid unit goes back to its own node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_spread_over_three_redis_nodes_are_drained_and_released_on_every_node() -> Result<()>
{
    let (_nodes, pg, app, events) = three_nodes().await?;
    let sold = sell_out_each(&app, &events).await?;
    drain_all(&app).await?;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let (status, report) = job(&app, "timeout-release").await?;
    assert_eq!(
        (status, report["expired"].as_u64()),
        (200, Some(90)),
        "{report}"
    );
    for (event, accepted) in events.iter().zip(&sold) {
        assert_eq!(app.status(event).await?["stock_left"], 30, "{event}");
        assert_books(&app, &pg, event, 30, accepted).await?;
    }
    Ok(())
}

/// Health over three nodes: `ok`; then node 2 dies: `degraded` for the public, and the
/// operators' health names the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_over_three_redis_nodes_is_ok_then_degraded_naming_a_dead_node() -> Result<()> {
    let (mut nodes, _pg, app, _events) = three_nodes().await?;
    let (status, health) = app.get_json("/api/health").await?;
    assert_eq!((status, &health["redis"]), (200, &json!("ok")), "{health}");
    drop(nodes.pop());
    let (_, health) = app.get_json("/api/health").await?;
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

/// Node 2 dies: its event is unavailable, the others sell on, and the jobs skip only node 2
/// (every order of the live nodes lands, the books balance).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_one_of_three_redis_nodes_stops_only_its_own_events() -> Result<()> {
    let (mut nodes, pg, app, events) = three_nodes().await?;
    // 20 of 30 units each, so the live nodes have stock left to sell after the death.
    let mut sold = Vec::new();
    for event in &events {
        sold.push(sell(&app, event, 30, 20, json!({ "payment_timeout_s": 1 })).await?);
    }
    drop(nodes.pop());
    let token = app
        .admit_and_precheck(&events[0], "late")
        .await?
        .expect("a live node sells on");
    let (status, body) = app.buy(&events[0], "late", &token).await?;
    assert_eq!(status, 202, "{body}");
    sold[0].push(("late".into(), body["order_id"].as_str().unwrap().to_owned()));
    let refused = app.admit_and_precheck(&events[2], "late").await?;
    assert_eq!(
        refused.err().map(|(s, b)| (s, b["error"]["code"].clone())),
        Some((503, json!("unavailable")))
    );
    let (status, report) = job(&app, "drain").await?;
    assert_eq!(
        (status, report["unreachable_nodes"].as_u64()),
        (200, Some(1)),
        "{report}"
    );
    drain_all(&app).await?;
    let (status, report) = job(&app, "timeout-release").await?;
    assert_eq!(status, 200, "{report}");
    for (event, accepted) in events.iter().zip(&sold).take(2) {
        assert_books(&app, &pg, event, 30, accepted).await?;
    }
    Ok(())
}

/// Timeout release gives units back per event, up to `release_batch` each: an event with many
/// expired orders whose Redis node is down must not starve the events after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stuck_event_does_not_starve_the_release_of_the_others() -> Result<()> {
    let mut nodes = vec![RedisServer::start()?, RedisServer::start()?];
    let pg = PgServer::start()?;
    pg.migrate().await?;
    let refs: Vec<&RedisServer> = nodes.iter().collect();
    let mut v = vars(&nodes[0], &pg, &[("release_batch", "10")]);
    over_nodes(&mut v, &refs);
    let app = TestApp::start(seckill_testkit::product_manifest(), &v).await?;
    let per_node = events_per_node("starve", &refs, 1);
    let (a, b) = (per_node[0][0].clone(), per_node[1][0].clone());
    // The stuck event is the one the old query (ORDER BY event_id LIMIT n) always took first.
    let (stuck, live, stuck_node) = if a < b { (a, b, 0) } else { (b, a, 1) };
    // The stuck event sells first, so its orders are also the first to expire.
    sell(&app, &stuck, 20, 20, json!({ "payment_timeout_s": 1 })).await?;
    let live_sold = sell(&app, &live, 20, 20, json!({ "payment_timeout_s": 1 })).await?;
    drain_all(&app).await?;
    drop(nodes.remove(stuck_node));
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let mut waiting = 0;
    for _ in 0..6 {
        let (status, report) = job(&app, "timeout-release").await?;
        assert_eq!(status, 200, "{report}");
        waiting = report["waiting_for_redis"].as_u64().unwrap_or(0);
        if let Some(errors) = report["event_errors"].as_object() {
            assert!(errors.keys().all(|e| *e == stuck), "{report}");
        }
    }
    assert_eq!(waiting, 10, "the stuck event waits, {} per run", 10);
    assert_eq!(
        app.status(&live).await?["stock_left"],
        20,
        "every unpaid unit of the live event is back on sale"
    );
    assert_books(&app, &pg, &live, 20, &live_sold).await
}
