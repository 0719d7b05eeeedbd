//! The app's basics through the whole chain (the real `spin.toml`, the real functions, real
//! Redis and Postgres, over HTTP): the server clock, health, and manifest errors.

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{PgServer, RedisServer, TestApp, app_vars};

async fn app(redis: &RedisServer, pg: &PgServer) -> Result<TestApp> {
    TestApp::start(seckill_testkit::product_manifest(), &app_vars(redis, pg)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_is_the_server_clock_in_ms() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = app(&redis, &pg).await?;
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    let (status, body) = app.get_json("/api/time").await?;
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    assert_eq!(status, 200);
    let now = body["now_ms"].as_u64().expect("now_ms");
    assert!(
        before <= now && now <= after,
        "{before} <= {now} <= {after}"
    );

    let resp = app
        .http
        .post(format!("{}/api/time", app.base_url))
        .send()
        .await?;
    assert_eq!(resp.status(), 405);
    let err: serde_json::Value = resp.json().await?;
    assert_eq!(err["error"]["code"], "method_not_allowed");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_says_ok_or_degraded_and_details_are_for_operators() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = app(&redis, &pg).await?;
    let (status, body) = app.get_json("/api/health").await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        serde_json::json!({ "ok": true, "redis": "ok", "postgres": "ok" })
    );

    // Postgres down: 503, Redis still fine, once the shared summary's window has passed. The
    // public answer names no error (error texts can name hosts or carry a stack trace); the
    // operators' route has the detail.
    drop(pg);
    let degraded = serde_json::json!({ "ok": false, "redis": "ok", "postgres": "degraded" });
    let (status, body) = public_health_until(&app, &degraded).await?;
    assert_eq!((status, &body), (503, &degraded));
    let (status, detail) = app.admin(Method::GET, "/admin/health", None).await?;
    assert_eq!(status, 503, "{detail}");
    assert_eq!(
        (&detail["redis"]["ok"], &detail["postgres"]["ok"]),
        (&serde_json::json!(true), &serde_json::json!(false))
    );
    assert!(detail["postgres"]["error"].is_string(), "{detail}");
    let (status, refused) = app.call(Method::GET, "/admin/health", None, None).await?;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (401, &serde_json::json!("unauthorized"))
    );
    Ok(())
}

/// The public health answer, asked again (a public summary is shared for a short window) until
/// it is `expected` or a minute has passed.
async fn public_health_until(
    app: &TestApp,
    expected: &serde_json::Value,
) -> Result<(u16, serde_json::Value)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (status, body) = app.get_json("/api/health").await?;
        if &body == expected || std::time::Instant::now() > deadline {
            return Ok((status, body));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// A flood of public health checks costs a round trip each, not a probe of every node and
/// Postgres: the first probe's summary is kept on the first node for the window, and every
/// instance answers it, even a summary that disagrees with a fresh probe (written here by
/// hand); the operators' health always probes afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_health_is_probed_once_per_window_and_shared() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = app(&redis, &pg).await?;
    let (status, body) = app.get_json("/api/health").await?;
    assert_eq!(status, 200, "{body}");
    let key = seckill_domain::keys::Registry.health();
    let mut conn = redis.client().get_connection()?;
    let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut conn)?;
    let window = seckill_spin_edge::health::PUBLIC_WINDOW_MS as i64;
    assert!(0 < ttl && ttl <= window, "PTTL {ttl}");
    let stored = serde_json::json!({ "ok": false, "redis": "degraded", "postgres": "ok" });
    let () = redis::cmd("SET")
        .arg(&key)
        .arg(stored.to_string())
        .arg("PX")
        .arg(60_000)
        .query(&mut conn)?;
    let (status, body) = app.get_json("/api/health").await?;
    assert_eq!((status, &body), (503, &stored));
    let (status, detail) = app.admin(Method::GET, "/admin/health", None).await?;
    assert_eq!(
        (status, &detail["ok"]),
        (200, &serde_json::json!(true)),
        "{detail}"
    );
    // Once the summary expires, the next check probes and shares its own again.
    let () = redis::cmd("DEL").arg(&key).query(&mut conn)?;
    let (status, body) = app.get_json("/api/health").await?;
    assert_eq!(
        (status, body),
        (
            200,
            serde_json::json!({ "ok": true, "redis": "ok", "postgres": "ok" })
        )
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifest_errors_name_the_line() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let write = |text: &str| {
        let path = dir.path().join("spin.toml");
        std::fs::write(&path, text).unwrap();
        path
    };
    let hello = seckill_testkit::repo_root().join("target/wasm32-wasip2/release/hello.wasm");
    let head = format!(
        "spin_manifest_version = 2\n[application]\nname = \"t\"\n[component.hello]\nsource = {:?}\n",
        hello.display().to_string()
    );
    let load = |text: String| {
        seckill_host::App::load(&write(&text), Default::default())
            .err()
            .expect("must fail")
            .to_string()
    };
    let err = load(format!(
        "{head}[[trigger.http]]\nroute = \"/a\"\ncomponent = \"nope\"\n"
    ));
    assert!(
        err.contains("spin.toml:8:") && err.contains("no component `nope`"),
        "{err}"
    );
    let err = load(format!(
        "{head}[[trigger.cron]]\ncomponent = \"hello\"\ncron_expression = \"* * *\"\n"
    ));
    assert!(
        err.contains("spin.toml:7:") && err.contains("handle-cron-event"),
        "{err}"
    );
    let err = load(format!(
        "{head}[[trigger.http]]\nroute = \"/a/:\"\ncomponent = \"hello\"\n"
    ));
    assert!(
        err.contains("spin.toml:7:") && err.contains("params must be named"),
        "{err}"
    );
    let err = load(format!(
        "{head}allowed_outbound_hosts = [\"redis://{{{{ nope }}}}\"]\n"
    ));
    assert!(
        err.contains("spin.toml:6:") && err.contains("`nope`"),
        "{err}"
    );
    let err = load(head.replace("hello.wasm", "missing.wasm"));
    assert!(
        err.contains("spin.toml:5:") && err.contains("does not exist"),
        "{err}"
    );
    Ok(())
}

/// Fault injection is the tests' own build: the deployed components carry neither the variable
/// nor the code that traps on it.
#[test]
fn no_product_component_carries_fault_injection() -> Result<()> {
    let root = seckill_testkit::repo_root();
    let manifest = std::fs::read_to_string(root.join("spin.toml"))?;
    assert!(!manifest.contains("fault_injection"));
    let wasm = |name: &str| std::fs::read(root.join("target/wasm32-wasip2/release").join(name));
    let carries = |bytes: &[u8]| bytes.windows(15).any(|w| w == b"fault injection");
    for component in ["jobs.wasm", "drain.wasm"] {
        assert!(
            !carries(&wasm(component)?),
            "{component} carries fault injection"
        );
    }
    assert!(
        carries(&wasm("faulty_jobs.wasm")?),
        "the tests' build does (so the check above can fail)"
    );
    Ok(())
}

/// Platforms without the cron plugin (SpinKube, Akamai Functions, Fermyon Cloud) get
/// `spin.http.toml`: exactly what `scripts/manifests.py` makes of `spin.toml` (so the two never
/// drift), HTTP triggers only, and it serves a whole sale whose orders the jobs route drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cron_free_manifest_is_derived_and_serves_a_sale() -> Result<()> {
    let root = seckill_testkit::repo_root();
    let check = std::process::Command::new("python3")
        .arg(root.join("scripts/manifests.py"))
        .arg("--check")
        .status()?;
    assert!(
        check.success(),
        "spin.http.toml is stale: run scripts/manifests.py"
    );
    let manifest = std::fs::read_to_string(root.join("spin.http.toml"))?;
    assert!(!manifest.contains("[[trigger.cron]]"));

    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let app = TestApp::start("spin.http.toml", &app_vars(&redis, &pg)).await?;
    let ids: Vec<&str> = app.app.component_ids().collect();
    assert!(!ids.contains(&"drain") && ids.contains(&"jobs"), "{ids:?}");
    app.open_event("http-only", serde_json::json!({ "stock": 3 }))
        .await?;
    let token = app
        .admit_and_precheck("http-only", "carol")
        .await?
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let (status, body) = app.buy("http-only", "carol", &token).await?;
    assert_eq!(status, 202, "{body}");
    let (status, report) = app.admin(Method::POST, "/admin/jobs/drain", None).await?;
    assert_eq!(
        (status, &report["inserted"]),
        (200, &serde_json::json!(1)),
        "{report}"
    );
    let (status, polled) = app
        .call(
            Method::GET,
            "/api/events/http-only/orders/me",
            Some(&seckill_testkit::jwt_for("carol")),
            None,
        )
        .await?;
    assert_eq!(
        (status, &polled["state"]),
        (200, &serde_json::json!("confirmed")),
        "{polled}"
    );
    Ok(())
}

/// Under a flood of polls that takes every slot reads may take, the order chain still runs as
/// the host runs in production (its default queue control): the provider's webhook, a drain
/// and the load balancer's health check are answered, never shed, and buys are served while
/// polls are being shed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_polls_is_shed_and_the_order_chain_is_not() -> Result<()> {
    use seckill_host::runtime::overload::QueueControl;
    use seckill_host::trigger::http::SHED_MESSAGE;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    const FLOODERS: usize = 96;
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = Arc::new(
        TestApp::builder(seckill_testkit::product_manifest())
            .vars(&app_vars(&redis, &pg))
            .max_instances(4)
            .queue_control(QueueControl::DEFAULT)
            .start()
            .await?,
    );
    app.open_event("flood", serde_json::json!({ "stock": 50 }))
        .await?;
    let mut tokens = Vec::new();
    for i in 0..4 {
        let user = format!("buyer{i}");
        let token = app
            .admit_and_precheck("flood", &user)
            .await?
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        tokens.push((user, token));
    }
    let shed = |status: u16, body: &serde_json::Value| status == 503 && body == SHED_MESSAGE;

    let stop = Arc::new(AtomicBool::new(false));
    let (polls_shed, polls_answered) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let flood: Vec<_> = (0..FLOODERS)
        .map(|i| {
            let (app, stop) = (app.clone(), stop.clone());
            let (polls_shed, polls_answered) = (polls_shed.clone(), polls_answered.clone());
            tokio::spawn(async move {
                let jwt = seckill_testkit::jwt_for(&format!("reader{i}"));
                while !stop.load(Ordering::Relaxed) {
                    let path = "/api/events/flood/orders/me";
                    let Ok((status, body)) = app.call(Method::GET, path, Some(&jwt), None).await
                    else {
                        continue;
                    };
                    let counter = if shed(status, &body) {
                        &polls_shed
                    } else {
                        &polls_answered
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // The flood is an overload once the host sheds polls.
    let waited = std::time::Instant::now();
    while polls_shed.load(Ordering::Relaxed) == 0 {
        assert!(
            waited.elapsed().as_secs() < 60,
            "the flood never overloaded the host"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let provider = app.provider();
    for (user, token) in &tokens {
        let (_, event) = provider.succeeded_event("pay_unknown", 1999, "eur");
        let (status, body) = provider
            .attempt(&event, seckill_testkit::provider::unix_s())
            .await?;
        assert!(!shed(status, &body), "webhook shed: {body}");
        let (status, body) = app.admin(Method::POST, "/admin/jobs/drain", None).await?;
        assert_eq!(status, 200, "drain: {body}");
        let (status, body) = app.get("/.well-known/spin/health").await?;
        assert_eq!((status, body.as_str()), (200, "OK"));
        let (status, body) = app.buy("flood", user, token).await?;
        assert_eq!(status, 202, "buy under the flood: {body}");
    }
    let shed_before = polls_shed.load(Ordering::Relaxed);
    stop.store(true, Ordering::Relaxed);
    for task in flood {
        task.await?;
    }
    assert!(shed_before > 0 && polls_answered.load(Ordering::Relaxed) > 0);
    Ok(())
}
