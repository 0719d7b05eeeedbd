//! The Upstash REST transport (`crates/spin-edge/src/rest.rs`) against the REST facade in front of a
//! real `redis-server`, over the host's pooled outbound HTTPS. A representative sale and order
//! subset also runs over it (`SECKILL_TRANSPORT=rest` in the test command); this file checks what only
//! this transport has: pooled connections, the token, the allowed hosts, the health probe.

use anyhow::Result;
use reqwest::Method;
use seckill_testkit::{PgServer, RedisServer, TestApp, app_vars, jwt_for};
use serde_json::json;

/// 100 buyers: every buy is one REST request (one EVALSHA on Redis), the facade sees a handful
/// of kept-alive connections for hundreds of requests, every order lands once, and health
/// pings the REST node. Each script's first use, and its first use after Redis forgets its
/// scripts halfway (as after a failover), falls back to EVAL: a request carrying its source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_over_rest_reuses_pooled_connections() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let app =
        TestApp::start_rest(seckill_testkit::product_manifest(), &app_vars(&redis, &pg)).await?;
    assert!(
        app.facades[0]
            .url()
            .starts_with("https://token0@localhost:")
    );
    // More units than buyers: no home shard runs dry, so each buy is one script at home.
    app.open_event("rest", json!({ "stock": 200 })).await?;
    let mut client = redis.client().get_connection()?;
    redis.take_script_calls()?;
    let mut requests = 0;
    for i in 0..100 {
        if i == 50 {
            redis::cmd("SCRIPT").arg("FLUSH").exec(&mut client)?;
        }
        let user = format!("r{i}");
        let token = app
            .admit_and_precheck("rest", &user)
            .await?
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let (status, body) = app.buy("rest", &user, &token).await?;
        assert_eq!(status, 202, "{body}");
        requests += 4;
    }
    assert_eq!(
        redis.take_script_calls()?,
        (requests, 8),
        "one EVALSHA per admission challenge, admission, precheck and buy; EVAL for each script \
         on its first use and again after the flush"
    );
    let (status, report) = app.admin(Method::POST, "/admin/jobs/drain", None).await?;
    assert_eq!(
        (status, &report["inserted"]),
        (200, &json!(100)),
        "{report}"
    );
    let (status, polled) = app
        .call(
            Method::GET,
            "/api/events/rest/orders/me",
            Some(&jwt_for("r7")),
            None,
        )
        .await?;
    assert_eq!(
        (status, &polled["state"]),
        (200, &json!("confirmed")),
        "{polled}"
    );
    let (status, health) = app.get_json("/api/health").await?;
    assert_eq!((status, &health["redis"]), (200, &json!("ok")), "{health}");

    let connections = app.facades[0].connections();
    println!(
        "{requests} REST script calls (and the jobs and health) over {connections} connections"
    );
    assert!(
        connections <= 16,
        "outbound HTTP should reuse its connections: {connections} for {requests} requests"
    );
    Ok(())
}

/// A wrong token is what a refused AUTH is over `rediss://`, and a REST host missing from
/// `allowed_outbound_hosts` is refused before any connection: both are a clean 503
/// `unavailable` that changes nothing, and health says which dependency is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_or_a_host_not_allowed_is_a_clean_503() -> Result<()> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    pg.migrate().await?;
    let app =
        TestApp::start_rest(seckill_testkit::product_manifest(), &app_vars(&redis, &pg)).await?;
    app.open_event("token", json!({ "stock": 1 })).await?;
    let facade = &app.facades[0];
    let wrong_token = facade.url().replace("token0@", "wrong@");
    for (url, allowed, case, refused_before_connecting) in [
        (wrong_token, facade.origin(), "a wrong token", false),
        (
            facade.url(),
            "https://localhost:1".to_owned(),
            "a host not allowed",
            true,
        ),
    ] {
        let vars: Vec<(&str, String)> = app_vars(&redis, &pg)
            .into_iter()
            .map(|(k, v)| match k {
                "redis_url" => (k, url.clone()),
                "redis_origin" => (k, allowed.clone()),
                _ => (k, v),
            })
            .collect();
        // The same facade, its CA trusted.
        let other_app = TestApp::start_trusting(
            seckill_testkit::product_manifest(),
            &vars,
            seckill_host::ConnectionMode::Pooled,
            app.facade_trust().expect("a REST app"),
        )
        .await?;
        let connections = facade.connections();
        let (status, err) = other_app
            .call(
                Method::POST,
                "/api/events/token/admission",
                Some(&jwt_for("u")),
                None,
            )
            .await?;
        assert_eq!(
            (status, &err["error"]["code"]),
            (503, &json!("unavailable")),
            "{case}: {err}"
        );
        let (status, health) = other_app.get_json("/api/health").await?;
        assert_eq!(
            (status, &health["redis"]),
            (503, &json!("degraded")),
            "{case}: {health}"
        );
        if refused_before_connecting {
            assert_eq!(facade.connections(), connections, "no connection was made");
        }
    }
    let admitted: u64 = redis::cmd("SCARD")
        .arg("{sk:token}:admitted")
        .query(&mut redis.client().get_connection()?)?;
    assert_eq!(admitted, 0, "nothing changed");
    Ok(())
}
