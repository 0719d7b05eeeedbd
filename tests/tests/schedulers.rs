//! Orders reach Postgres in seconds where the platform's scheduler is coarse (issue 12): the
//! cron-free manifest (`spin.http.toml`) served with no cron at all, and a simulated platform
//! scheduler. Two mechanisms, each tested with a control that shows it is what lands the orders:
//!
//! - the poll-carried drain: the buyers waiting in the queue carry it (`poll_drain_ms`);
//! - a job route with a time budget (`GET /admin/jobs/drain?for_ms=N&key=…`, the way Akamai's
//!   `spin aka cron` can call it: a path and query, no header) called once per period.
//!
//! The delay of an order is Postgres's own record of it: `confirmed_ms − created_ms` (drain time
//! minus the buy's Redis time). Each test prints its figures.

use std::time::{Duration, Instant};

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{
    ADMIN_TOKEN, OPERATOR, PgServer, RedisServer, SCHEDULER, SCHEDULER_TOKEN, ShopReceiver,
    TestApp, TestCa, VIEWER_TOKEN, app_vars, derived_from, jwt_for,
};
use serde_json::json;

/// The scheduler's key in these tests (`job_key`).
const JOB_KEY: &str = "test-job-key";

/// `spin.http.toml`, the cron-free manifest, with `extra` variables on top of the test ones.
async fn start(extra: &[(&'static str, &str)]) -> Result<(RedisServer, PgServer, TestApp)> {
    start_on("spin.http.toml", extra).await
}

/// `spin.http.toml` with the poll-carried drain off: only the scheduler drains.
fn without_poll_drain() -> Result<String> {
    derived_from(
        "spin.http.toml",
        "http-no-poll-drain.toml",
        &[("\npoll_drain_ms = \"1000\"\n", "\npoll_drain_ms = \"0\"\n")],
    )
}

async fn start_on(
    manifest: &str,
    extra: &[(&'static str, &str)],
) -> Result<(RedisServer, PgServer, TestApp)> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let mut vars = app_vars(&redis, &pg);
    vars.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    let app = TestApp::start(manifest, &vars).await?;
    Ok((redis, pg, app))
}

/// Admission, precheck and buy for `user`; the buy must be accepted.
async fn buy(app: &TestApp, event: &str, user: &str) -> Result<()> {
    let token = app
        .admit_and_precheck(event, user)
        .await?
        .map_err(|e| anyhow::anyhow!("{user}: {e:?}"))?;
    let (status, body) = app.buy_until_answered(event, user, &token).await?;
    anyhow::ensure!(status == 202, "{user}: {status} {body}");
    Ok(())
}

/// Each order's delay from its buy to its row in Postgres, in ms, sorted.
async fn delays(pg: &PgServer, event: &str) -> Result<Vec<i64>> {
    let client = pg.client().await?;
    let rows = client
        .query(
            "SELECT confirmed_ms - created_ms FROM orders WHERE event_id = $1 ORDER BY 1",
            &[&event],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The books of `event` balance: nothing drifts, nothing is dead-lettered.
async fn balanced(app: &TestApp, event: &str) -> Result<()> {
    let (status, books) = app
        .admin(
            Method::POST,
            &format!("/admin/jobs/reconcile?event={event}"),
            None,
        )
        .await?;
    let book = &books["events"][0];
    anyhow::ensure!(
        status == 200 && book["drift"] == 0 && book["dead_letters"] == 0,
        "{books}"
    );
    Ok(())
}

/// A buyer polling every second, as the storefront does, until their order is confirmed.
/// Returns how long that took.
async fn poll_until_confirmed(app: &TestApp, event: &str, user: &str) -> Result<Duration> {
    let started = Instant::now();
    let jwt = jwt_for(user);
    while started.elapsed() < Duration::from_secs(30) {
        let (status, polled) = app
            .call(
                Method::GET,
                &format!("/api/events/{event}/orders/me"),
                Some(&jwt),
                None,
            )
            .await?;
        anyhow::ensure!(status == 200, "{user}: {status} {polled}");
        if polled["state"] == "confirmed" {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    anyhow::bail!("{user}: not confirmed after 30 s")
}

/// No scheduler at all (Fermyon Cloud has none; between two `spin aka cron` runs is 5
/// minutes): while nobody polls, nothing drains; once the buyers poll, as the storefront does
/// every 1–3 s, every order lands within seconds, with no job route called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_buyers_carry_the_drain_when_no_scheduler_runs() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    let event = "carried";
    app.open_event(event, json!({ "stock": 40 })).await?;
    let users: Vec<String> = (0..40).map(|i| format!("buyer-{i:02}")).collect();
    for user in &users {
        buy(&app, event, user).await?;
    }

    // Control: no poll, no scheduler, nothing reaches Postgres. Nor can a scheduler's key
    // run a job while no `job_key` is set.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(delays(&pg, event).await?.is_empty(), "nothing should drain");
    let (status, _) = app
        .call(Method::GET, "/admin/jobs/drain?key=guess", None, None)
        .await?;
    assert_eq!(status, 401);

    let waits = futures::future::try_join_all(
        users
            .iter()
            .map(|user| poll_until_confirmed(&app, event, user)),
    )
    .await?;
    let slowest = waits.iter().max().copied().unwrap_or_default();
    let landed = delays(&pg, event).await?;
    println!(
        "poll-carried drain, polls every 1 s, poll_drain_ms 1000: 40 orders confirmed, \
         slowest buyer waited {slowest:?} once polling began"
    );
    assert_eq!(landed.len(), 40);
    // One nudge per second per event and one poll per second per buyer: a couple of seconds.
    assert!(slowest <= Duration::from_secs(5), "{waits:?}");
    balanced(&app, event).await
}

/// A coarse scheduler (scaled down: every 10 s instead of every 5 minutes) calling the drain
/// route with a budget of most of its period: orders bought while the route runs land within
/// its 200 ms pause, those bought in the gap wait for the next call. Control: the same
/// scheduler without a budget leaves an order bought just after its call waiting a whole period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coarse_scheduler_with_a_budget_keeps_orders_flowing() -> Result<()> {
    const PERIOD: Duration = Duration::from_secs(10);
    const BUDGET_MS: u64 = 8_000;
    let (_redis, pg, app) = start_on(&without_poll_drain()?, &[("job_key", JOB_KEY)]).await?;
    let event = "scheduled";
    app.open_event(event, json!({ "stock": 31 })).await?;
    for bad in ["60001", "-1", "8s", ""] {
        let path = format!("/admin/jobs/drain?for_ms={bad}");
        let (status, body) = app.admin(Method::POST, &path, None).await?;
        assert_eq!(
            (status, &body["error"]["code"]),
            (400, &json!("bad_query")),
            "{bad}"
        );
    }
    let keyed = format!("/admin/jobs/drain?key={JOB_KEY}");
    for (method, path, want) in [
        (Method::GET, "/admin/jobs/drain?key=wrong", 401),
        (Method::GET, "/admin/jobs/drain", 401),
        (Method::DELETE, keyed.as_str(), 405),
    ] {
        let (status, body) = app.call(method, path, None, None).await?;
        assert_eq!(status, want, "{path}: {body}");
    }

    let scheduler = async {
        for _ in 0..2 {
            let fired = Instant::now();
            let path = format!("/admin/jobs/drain?for_ms={BUDGET_MS}&key={JOB_KEY}");
            let (status, report) = app.call(Method::GET, &path, None, None).await?;
            anyhow::ensure!(
                status == 200 && report["runs"].as_u64() > Some(1),
                "{report}"
            );
            tokio::time::sleep(PERIOD.saturating_sub(fired.elapsed())).await;
        }
        anyhow::Ok(())
    };
    let buyers = async {
        // One buyer every 600 ms over the first 18 s: across both runs and both gaps.
        for i in 0..30 {
            buy(&app, event, &format!("buyer-{i:02}")).await?;
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        anyhow::Ok(())
    };
    tokio::try_join!(scheduler, buyers)?;
    // Orders bought in the last gap: the next call takes them.
    let (status, _) = app.admin(Method::POST, "/admin/jobs/drain", None).await?;
    assert_eq!(status, 200);

    let landed = delays(&pg, event).await?;
    assert_eq!(landed.len(), 30);
    let in_runs: Vec<i64> = landed.iter().copied().filter(|d| *d <= 1_000).collect();
    let slowest = *landed.last().unwrap_or(&0);
    println!(
        "drain?for_ms={BUDGET_MS} every {PERIOD:?}: {} of 30 orders landed within 1 s, \
         slowest {slowest} ms (the gap is {} ms); delays {landed:?}",
        in_runs.len(),
        PERIOD.as_millis() as u64 - BUDGET_MS,
    );
    // Bought during a run (8 s of each 10 s): within the pause plus a batch.
    assert!(in_runs.len() >= 20, "{landed:?}");
    // Bought in a gap: at most the gap, plus a little (the last gap's orders are excepted, a
    // final call drained them after the buyers finished).
    let gap = (PERIOD.as_millis() as u64 - BUDGET_MS) as i64;
    assert!(
        landed.iter().filter(|d| **d > gap + 1_000).count() <= 2,
        "{landed:?}"
    );

    balanced(&app, event).await?;

    // Control: the same call without a budget runs once and returns; an order bought right
    // after it waits for the next call, however long the period.
    let (status, report) = app.admin(Method::POST, "/admin/jobs/drain", None).await?;
    assert_eq!((status, &report["runs"]), (200, &json!(1)), "{report}");
    buy(&app, event, "late-buyer").await?;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        delays(&pg, event).await?.len(),
        30,
        "nothing drains between calls"
    );
    Ok(())
}

/// A scheduler's credential (the `scheduler` role) runs the jobs and nothing else; a viewer
/// runs none. Every run a person starts is in the audit, and a scheduler credential's first.
/// One run of a job at a time across the fleet: while one holds the job's lease, another is
/// `409 conflict`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_runs_the_jobs_and_nothing_else_one_run_at_a_time() -> Result<()> {
    let (_redis, pg, app) = start(&[]).await?;
    app.open_event("ticked", json!({ "stock": 2 })).await?;
    for _ in 0..3 {
        let (status, body) = app
            .call(
                Method::POST,
                "/admin/jobs/reconcile",
                Some(SCHEDULER_TOKEN),
                None,
            )
            .await?;
        assert_eq!(status, 200, "{body}");
    }
    for (method, path) in [
        (Method::GET, "/admin/events"),
        (Method::GET, "/admin/events/ticked"),
        (Method::POST, "/admin/events/ticked/warmup"),
        (Method::GET, "/admin/audit"),
        (Method::GET, "/admin/health"),
        (Method::GET, "/admin/whoami"),
    ] {
        let (status, body) = app.call(method, path, Some(SCHEDULER_TOKEN), None).await?;
        assert_eq!(
            (status, &body["error"]["code"]),
            (403, &json!("forbidden")),
            "{path}: {body}"
        );
    }
    let (status, body) = app
        .call(Method::POST, "/admin/jobs/drain", Some(VIEWER_TOKEN), None)
        .await?;
    assert_eq!(status, 403, "a viewer runs no job: {body}");
    for _ in 0..2 {
        let (status, body) = app
            .call(
                Method::POST,
                "/admin/jobs/reconcile",
                Some(ADMIN_TOKEN),
                None,
            )
            .await?;
        assert_eq!(status, 200, "{body}");
    }
    let db = pg.client().await?;
    let runs: Vec<(String, String, i64)> = db
        .query(
            "SELECT operator, role, count(*) FROM operator_audit
                 WHERE path LIKE '/admin/jobs/%' GROUP BY operator, role ORDER BY operator",
            &[],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        runs,
        [
            (OPERATOR.to_owned(), "operator".to_owned(), 2),
            (SCHEDULER.to_owned(), "scheduler".to_owned(), 1)
        ]
    );
    // A release running for 3 s holds the lease: a second run meanwhile is refused, and one
    // after it runs. (The drain's leases are per shard.)
    let long = app.call(
        Method::POST,
        "/admin/jobs/timeout-release?for_ms=3000",
        Some(SCHEDULER_TOKEN),
        None,
    );
    let meanwhile = async {
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        app.call(
            Method::POST,
            "/admin/jobs/timeout-release",
            Some(SCHEDULER_TOKEN),
            None,
        )
        .await
    };
    let ((first, report), (second, refused)) = tokio::try_join!(long, meanwhile)?;
    assert_eq!(first, 200, "{report}");
    assert_eq!(
        (second, &refused["error"]["code"]),
        (409, &json!("conflict")),
        "{refused}"
    );
    let (status, body) = app
        .call(
            Method::POST,
            "/admin/jobs/timeout-release",
            Some(SCHEDULER_TOKEN),
            None,
        )
        .await?;
    assert_eq!(status, 200, "the lease was handed back: {body}");
    Ok(())
}

/// The shop's public name in the delivery test: its certificate names it, and the host
/// resolves it to the kit's receiver (`--resolve`, the test's DNS record).
const SHOP: &str = "shop.seckill.test";
/// The loopback address the shop listens on.
const SHOP_ADDRESS: &str = "127.0.0.2";

/// `spin.http.toml` with Spin's runtime configuration `config` (written at `path`), the shop's
/// name resolved to its address.
async fn with_runtime_config(
    redis: &RedisServer,
    pg: &PgServer,
    path: &std::path::Path,
    config: &str,
) -> Result<TestApp> {
    std::fs::write(path, config)?;
    TestApp::builder("spin.http.toml")
        .vars(&app_vars(redis, pg))
        .runtime_config_file(path)
        .resolve(SHOP, SHOP_ADDRESS.parse()?)
        .start()
        .await
}

/// The scheduler's run of the delivery job.
async fn deliver_events(app: &TestApp) -> Result<(u16, serde_json::Value)> {
    app.call(
        Method::POST,
        "/admin/jobs/deliver-events",
        Some(SCHEDULER_TOKEN),
        None,
    )
    .await
}

/// Order events reach the shop on the cron-free manifest: the scheduler's call to
/// `/admin/jobs/deliver-events` (the `deliver-events` component's own route) sends them over
/// the host's outbound HTTPS, trusting the shop's CA as Spin's `[[client_tls]]` says for that
/// component and host, to the kit's receiver, which verifies each with the Standard Webhooks
/// library. With the shop's address in `block_networks`, the next run reaches nothing: the
/// endpoint is failing, the refusal in its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_events_reach_the_shop_over_https_from_the_job_route() -> Result<()> {
    let ca = TestCa::for_names(&[SHOP])?;
    let shop = ShopReceiver::start_tls(SHOP_ADDRESS, &ca)?;
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let dir = tempfile::tempdir()?;
    let client_tls = format!(
        "[[client_tls]]\ncomponent_ids = [\"deliver-events\"]\nhosts = [\"{SHOP}\"]\nca_roots_file = {:?}\n",
        ca.path("ca.pem")
    );
    let received = || tokio::task::block_in_place(|| shop.received());

    let app = with_runtime_config(&redis, &pg, &dir.path().join("tls.toml"), &client_tls).await?;
    let url = shop.endpoint(SHOP, "/orders/events")?;
    let (status, made) = app
        .admin(
            Method::POST,
            "/admin/webhooks",
            Some(&json!({ "url": url })),
        )
        .await?;
    assert_eq!(status, 201, "{made}");
    let secret = made["secret"].as_str().expect("a secret");
    tokio::task::block_in_place(|| shop.hold_secrets(&[secret]))?;
    let event = "delivered";
    app.open_event(event, json!({ "stock": 5 })).await?;
    for user in ["buyer-a", "buyer-b"] {
        buy(&app, event, user).await?;
    }
    let (status, drained) = app.admin(Method::POST, "/admin/jobs/drain", None).await?;
    assert_eq!(
        (status, &drained["inserted"]),
        (200, &json!(2)),
        "{drained}"
    );
    let (status, report) = deliver_events(&app).await?;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        (&report["delivered"], &report["failed"]),
        (&json!(2), &json!(0)),
        "{report}"
    );
    let got = received()?;
    assert_eq!(got.len(), 2, "{got:?}");
    for delivery in &got {
        assert!(delivery.verified, "{delivery:?}");
        assert_eq!(
            delivery.kind.as_deref(),
            Some("order.landed"),
            "{delivery:?}"
        );
        assert!(
            delivery
                .id
                .as_deref()
                .is_some_and(|id| id.starts_with("msg_"))
        );
    }
    let (_, again) = deliver_events(&app).await?;
    assert_eq!(again["delivered"], 0, "delivered once each: {again}");
    let id = made["endpoint"]["endpoint_id"].as_str().expect("an id");
    let (_, log) = app
        .admin(
            Method::GET,
            &format!("/admin/webhooks/{id}/deliveries"),
            None,
        )
        .await?;
    let log = log["deliveries"].as_array().cloned().unwrap_or_default();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(
        log.iter()
            .all(|d| d["type"] == "order.landed" && d["status"] == 204),
        "{log:?}"
    );
    drop(app);

    // The shop's address blocked: the delivery never connects.
    let blocked =
        format!("[outbound_networking]\nblock_networks = [\"{SHOP_ADDRESS}/32\"]\n{client_tls}");
    let app = with_runtime_config(&redis, &pg, &dir.path().join("blocked.toml"), &blocked).await?;
    buy(&app, event, "buyer-c").await?;
    let (status, _) = app.admin(Method::POST, "/admin/jobs/drain", None).await?;
    assert_eq!(status, 200);
    let (status, report) = deliver_events(&app).await?;
    assert_eq!(
        (status, &report["delivered"], &report["failed"]),
        (200, &json!(0), &json!(1)),
        "{report}"
    );
    assert_eq!(received()?.len(), 2, "nothing reached the blocked address");
    let (_, listed) = app.admin(Method::GET, "/admin/webhooks", None).await?;
    assert_eq!(listed["backlog"][0]["pending"], 1, "{listed}");
    let endpoint = &listed["endpoints"][0];
    assert!(
        endpoint["failing_since_ms"].as_i64() > Some(0),
        "{endpoint}"
    );
    let error = endpoint["last_error"].as_str().unwrap_or_default();
    assert!(
        error.to_ascii_lowercase().contains("prohibited"),
        "{endpoint}"
    );
    Ok(())
}
