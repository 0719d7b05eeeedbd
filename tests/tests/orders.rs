//! Orders into Postgres under faults: the drain, payment and timeout release, with real Redis,
//! real Postgres and the real host. After each test the books must balance: orders in Postgres
//! = units sold, no duplicates, stock never negative, nothing accepted missing.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::Result;
use futures::{StreamExt, stream};
use reqwest::Method;
use seckill_testkit::{
    PgServer, RedisServer, TestApp, app_vars, events_per_node, faulty_manifest, jwt_for, over_nodes,
};
use serde_json::{Value, json};

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
    let app = TestApp::start(seckill_testkit::product_manifest(), &vars(&redis, &pg, extra)).await?;
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
                let (status, body) = app.buy(event, &user, &token).await?;
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

    // Paying: once, again (idempotent), by someone else (not theirs); poll follows.
    let pay = format!("/api/events/land/orders/{order}/pay");
    for _ in 0..2 {
        let (status, body) = app
            .call(Method::POST, &pay, Some(&jwt_for(user)), None)
            .await?;
        assert_eq!(
            (status, body["status"].as_str()),
            (200, Some("paid")),
            "{body}"
        );
    }
    let (status, body) = app
        .call(Method::POST, &pay, Some(&jwt_for("stranger")), None)
        .await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("order_not_found"))
    );
    let (status, body) = app
        .call(
            Method::POST,
            "/api/events/land/orders/not-hex/pay",
            Some(&jwt_for(user)),
            None,
        )
        .await?;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_order_id"))
    );
    let (_, polled) = app
        .call(
            Method::GET,
            "/api/events/land/orders/me",
            Some(&jwt_for(user)),
            None,
        )
        .await?;
    assert_eq!(polled["state"], "paid", "{polled}");
    assert_books(&app, &pg, "land", 120, &accepted).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stopped_mid_drain_then_everything_lands_once() -> Result<()> {
    // One batch of 50 per run, so the sale drains over several runs.
    let (_redis, mut pg, app) = start(&[("drain_max_batches", "1")]).await?;
    let accepted = sell(&app, "pgdown", 200, 200, json!({})).await?;
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
    let accepted = sell(&crashing, "crash", 80, 80, json!({})).await?;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_are_harmless_and_poison_goes_to_dead_letters() -> Result<()> {
    let (redis, pg, app) = start(&[]).await?;
    let accepted = sell(&app, "poison", 30, 30, json!({})).await?;
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    let queue = "{sk:poison}:queue";
    // The same intent delivered twice (a copy of the first entry), a malformed entry, and one
    // Postgres refuses (a NUL byte in a text column).
    let first: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg(queue)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(1)
        .query_async(&mut conn)
        .await?;
    let _: String = redis::cmd("XADD")
        .arg(queue)
        .arg("*")
        .arg(&first[0].1)
        .query_async(&mut conn)
        .await?;
    let _: String = redis::cmd("XADD")
        .arg(queue)
        .arg("*")
        .arg(&["order", "bad", "user", "x", "shard", "not-a-number"])
        .query_async(&mut conn)
        .await?;
    let _: String = redis::cmd("XADD")
        .arg(queue)
        .arg("*")
        .arg(&[
            "order",
            "feed",
            "user",
            "nul\0user",
            "shard",
            "0",
            "seq",
            "999",
            "created_ms",
            "1",
        ])
        .query_async(&mut conn)
        .await?;
    for _ in 0..4 {
        job(&app, "drain").await?;
        tokio::time::sleep(Duration::from_millis(600)).await; // reclaim the failed entry again
    }
    drain_all(&app).await?;
    assert_books(&app, &pg, "poison", 30, &accepted).await?;
    let dead: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg("{sk:poison}:dead")
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await?;
    assert_eq!(dead.len(), 2, "{dead:?}");
    let reasons: Vec<String> = dead
        .iter()
        .map(|(_, f)| {
            f.chunks(2)
                .find(|kv| kv[0] == "reason")
                .map(|kv| kv[1].clone())
                .unwrap_or_default()
        })
        .collect();
    assert!(
        reasons.iter().any(|r| r == "malformed entry"),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("delivered") && r.contains("0x00")),
        "the last error is kept: {reasons:?}"
    );
    let pending: Vec<redis::Value> = redis::cmd("XPENDING")
        .arg(queue)
        .arg("drain")
        .query_async(&mut conn)
        .await?;
    assert_eq!(
        pending.first(),
        Some(&redis::Value::Int(0)),
        "nothing left unacknowledged"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payment_racing_timeout_release_never_both() -> Result<()> {
    let (redis, pg, app) = start(&[]).await?;
    let (mut all, mut paid) = (Vec::new(), 0);
    for round in 0..3 {
        let event = format!("race{round}");
        // 3 s to pay: the sale and the drain (on a busy machine) must fit before the deadlines.
        let accepted = sell(&app, &event, 40, 40, json!({ "payment_timeout_s": 3 })).await?;
        drain_all(&app).await?;
        // Each payment is sent right at its order's deadline, half 50 ms before and half 50 ms
        // after, while timeout release runs every 20 ms: both outcomes race at every deadline.
        let db = pg.client().await?;
        let mut deadlines = std::collections::HashMap::new();
        for row in db
            .query(
                "SELECT order_id, pay_deadline_ms FROM orders WHERE event_id = $1",
                &[&event],
            )
            .await?
        {
            deadlines.insert(row.get::<_, String>(0), row.get::<_, i64>(1));
        }
        let epoch_ms = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64)
        };
        let pays =
            futures::future::join_all(accepted.iter().enumerate().map(|(i, (user, order))| {
                let (app, event) = (&app, &event);
                let at = deadlines[order] + if i % 2 == 0 { -50 } else { 50 };
                async move {
                    tokio::time::sleep(Duration::from_millis((at - epoch_ms()).max(0) as u64))
                        .await;
                    app.call(
                        Method::POST,
                        &format!("/api/events/{event}/orders/{order}/pay"),
                        Some(&jwt_for(user)),
                        None,
                    )
                    .await
                }
            }));
        let last = deadlines.values().max().copied().unwrap_or(0) + 300;
        let releases = async {
            while epoch_ms() < last {
                let _ = job(&app, "timeout-release").await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let (pays, ()) = tokio::join!(pays, releases);
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        job(&app, "timeout-release").await?;
        let mut paid_here = 0;
        for ((user, order), pay) in accepted.iter().zip(&pays) {
            let (status, body) = pay.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
            let row = db
                .query_one("SELECT status FROM orders WHERE order_id = $1", &[order])
                .await?;
            let state: String = row.get(0);
            match *status {
                200 => {
                    assert_eq!(state, "paid", "{user}: paid answer, {state} in Postgres");
                    paid_here += 1;
                }
                409 => assert_eq!(
                    (body["error"]["code"].as_str(), state.as_str()),
                    (Some("order_expired"), "expired")
                ),
                other => panic!("{user}: unexpected {other} {body}"),
            }
        }
        paid += paid_here;
        let status = app.status(&event).await?;
        let shards: i64 = status["stock_left"].as_i64().unwrap_or(-1);
        let expired: i64 = db
            .query_one(
                "SELECT count(*) FROM orders WHERE event_id = $1 AND status = 'expired'",
                &[&event],
            )
            .await?
            .get(0);
        assert_eq!(
            shards, expired,
            "exactly the expired units are back in Redis"
        );
        assert_eq!(
            (status["paid"].as_i64(), status["expired"].as_i64()),
            (Some(paid_here), Some(expired)),
            "the console's counts agree with Postgres: {status}"
        );
        assert_books(&app, &pg, &event, 40, &accepted).await?;
        all.push(expired);
    }
    let _ = redis;
    eprintln!("expired per round: {all:?}, paid in all: {paid}");
    assert!(
        paid > 0 && all.iter().sum::<i64>() > 0,
        "the race had both outcomes: {paid} paid, {all:?} expired"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_drainers_at_once_one_works_per_event() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = sell(&app, "pair", 150, 150, json!({})).await?;
    let (a, b) = tokio::join!(job(&app, "drain"), job(&app, "drain"));
    let (a, b) = (a?.1, b?.1);
    let busy = |r: &Value| {
        r["busy"]
            .as_array()
            .is_some_and(|v| v.iter().any(|e| e == "pair"))
    };
    assert!(
        busy(&a) || busy(&b),
        "one of them found the lease taken: {a} / {b}"
    );
    assert!(!(busy(&a) && busy(&b)), "and the other worked: {a} / {b}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    drain_all(&app).await?;
    assert_books(&app, &pg, "pair", 150, &accepted).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarted_with_aof_always_loses_no_accepted_order() -> Result<()> {
    let mut redis = RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
    ])?;
    let pg = PgServer::start()?;
    pg.migrate().await?;
    let app = TestApp::start(seckill_testkit::product_manifest(), &vars(&redis, &pg, &[])).await?;
    let mut accepted = sell(&app, "aof", 100, 60, json!({})).await?;
    redis.crash_and_restart()?; // SIGKILL: only what was fsynced survives
    // The host's shared connection reconnects by itself; the sale goes on.
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
    accepted.extend(more);
    drain_all(&app).await?;
    assert_books(&app, &pg, "aof", 100, &accepted).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_names_the_orders_behind_a_drift() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let accepted = sell(&app, "books", 20, 20, json!({})).await?;
    drain_all(&app).await?;
    assert_books(&app, &pg, "books", 20, &accepted).await?;
    // Postgres loses one row (as with synchronous_commit = off and a crash).
    let db = pg.client().await?;
    let lost = &accepted[0].1;
    db.execute("DELETE FROM orders WHERE order_id = $1", &[lost])
        .await?;
    let (status, books) = app
        .admin(Method::POST, "/admin/jobs/reconcile?event=books", None)
        .await?;
    assert_eq!(status, 200, "{books}");
    let b = &books["events"][0];
    assert_eq!(b["drift"], 1, "{b}");
    assert_eq!(b["missing_in_postgres"], json!([lost]), "{b}");
    assert_eq!(b["unknown_to_redis"], json!([]), "{b}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_spread_over_three_redis_nodes_sell_release_and_land_exactly() -> Result<()> {
    let mut nodes = vec![
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
    // One event per node, named as the placement rule puts them.
    let events: Vec<String> = events_per_node("multi", &refs, 1)
        .into_iter()
        .flatten()
        .collect();
    let mut sold = Vec::new();
    for event in &events {
        let accepted = sell(&app, event, 30, 45, json!({ "payment_timeout_s": 1 })).await?;
        assert_eq!(accepted.len(), 30, "{event} sells out exactly");
        sold.push(accepted);
    }
    // Each event's keys live on one node only, the one the rule named.
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
    // The jobs walk every node: every order lands, every unpaid unit goes back to its own node.
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
    let (status, health) = app.get_json("/api/health").await?;
    assert_eq!((status, &health["redis"]), (200, &json!("ok")), "{health}");

    // Node 2 dies: its event is unavailable, the others sell on, the jobs skip only node 2.
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
    let token = app
        .admit_and_precheck(&events[0], "late")
        .await?
        .expect("a live node sells on (the released units)");
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
    let (status, report) = job(&app, "timeout-release").await?;
    assert_eq!(status, 200, "{report}");
    for (event, accepted) in events.iter().zip(&sold).take(2) {
        assert_books(&app, &pg, event, 30, accepted).await?;
    }
    Ok(())
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
                let (status, body) = faulty
                    .call(
                        Method::POST,
                        &format!("/api/events/leak/orders/{order}/pay"),
                        Some(&jwt_for(&user)),
                        None,
                    )
                    .await?;
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
        .filter(|(_, status, _)| *status == 200)
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

/// The order stream holds what the drain still needs, not every order ever accepted; `queued`
/// counts orders on their way to Postgres.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_order_stream_stays_bounded_and_queued_means_queued() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let mut accepted = Vec::new();
    for round in 0..3 {
        let mut sold = sell(&app, &format!("long{round}"), 100, 100, json!({})).await?;
        let status = app.status(&format!("long{round}")).await?;
        assert_eq!(status["queued"], 100, "{status}");
        drain_all(&app).await?;
        let status = app.status(&format!("long{round}")).await?;
        assert_eq!(status["queued"], 0, "all drained: {status}");
        assert!(
            status["stream_length"].as_i64().unwrap_or(i64::MAX) <= 1,
            "acknowledged entries are trimmed: {status}"
        );
        accepted.push((format!("long{round}"), std::mem::take(&mut sold)));
    }
    for (event, sold) in &accepted {
        assert_books(&app, &pg, event, 100, sold).await?;
    }
    Ok(())
}

/// A sold order that Postgres refuses for good ends in the dead letters; reconcile reports it
/// as drift for an operator instead of calling the books balanced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lettered_order_is_drift_for_an_operator() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let db = pg.client().await?;
    db.batch_execute("ALTER TABLE orders ADD CONSTRAINT refuse_one CHECK (user_id <> 'dead-u3')")
        .await?;
    let accepted = sell(&app, "dead", 10, 10, json!({})).await?;
    assert_eq!(accepted.len(), 10);
    for _ in 0..4 {
        job(&app, "drain").await?;
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    drain_all(&app).await?;
    let (status, books) = app
        .admin(Method::POST, "/admin/jobs/reconcile?event=dead", None)
        .await?;
    assert_eq!(status, 200, "{books}");
    let b = &books["events"][0];
    assert_eq!(
        (
            b["dead_letters"].as_i64(),
            b["dead_orders"].as_i64(),
            b["drift"].as_i64()
        ),
        (Some(1), Some(1), Some(1)),
        "{b}"
    );
    let status = app.status("dead").await?;
    assert_eq!(
        (status["queued"].as_i64(), status["dead_letters"].as_i64()),
        (Some(0), Some(1))
    );
    Ok(())
}

/// Only the lease holder reads the stream, so however often the drain runs, the consumer group
/// keeps one consumer: runs do not pile up consumers (one a second per event, forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_keeps_one_consumer_however_often_it_runs() -> Result<()> {
    let (redis, pg, app) = start(&[]).await?;
    let mut accepted = Vec::new();
    for round in 0..3 {
        let (status, _) = app
            .admin(
                Method::PUT,
                "/admin/events/consumers",
                Some(&json!({ "sku": "c", "stock": 30, "shards": 2,
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
            let (status, body) = app.buy("consumers", &user, &token).await?;
            assert_eq!(status, 202, "{body}");
            accepted.push((user, body["order_id"].as_str().unwrap().to_owned()));
        }
        for _ in 0..3 {
            job(&app, "drain").await?;
        }
    }
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    let consumers: Vec<redis::Value> = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg("{sk:consumers}:queue")
        .arg("drain")
        .query_async(&mut conn)
        .await?;
    assert_eq!(
        consumers.len(),
        1,
        "9 drain runs, one consumer: {consumers:?}"
    );
    assert_books(&app, &pg, "consumers", 30, &accepted).await
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

/// One event whose Redis data is broken fails alone: the drain and reconcile report it and
/// still do every other event's work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_broken_event_fails_alone_in_the_jobs() -> Result<()> {
    let (redis, pg, app) = start(&[]).await?;
    let mut sold = Vec::new();
    for event in ["broken-a", "broken-b", "broken-c"] {
        sold.push((event, sell(&app, event, 10, 10, json!({})).await?));
    }
    // broken-b's queue is no longer a stream: every script touching it fails.
    let mut conn = redis.client().get_multiplexed_async_connection().await?;
    redis::pipe()
        .cmd("DEL")
        .arg("{sk:broken-b}:queue")
        .cmd("SET")
        .arg("{sk:broken-b}:queue")
        .arg("not a stream")
        .query_async::<()>(&mut conn)
        .await?;
    let (status, report) = job(&app, "drain").await?;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        report["event_errors"]
            .as_object()
            .map(|e| e.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["broken-b".to_owned()]),
        "{report}"
    );
    assert!(
        report["event_errors"]["broken-b"]
            .as_str()
            .is_some_and(|e| e.contains("WRONGTYPE")),
        "the operator sees why: {report}"
    );
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
