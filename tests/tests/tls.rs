//! TLS to Redis and Postgres, as Spin does it (`host/src/factors/tls.rs`): `rediss://` and any
//! Postgres `sslmode` but `disable` verify the certificate chain and the host name against the
//! system's roots plus the operator's CA. A real `redis-server` with `tls-port` and a real
//! PostgreSQL with `ssl = on`, both with a certificate from a test CA for `localhost` only.

use anyhow::Result;
use reqwest::Method;
use seckill_host::ConnectionMode;
use seckill_testkit::{PgServer, RedisServer, TestApp, TestCa, app_vars};
use serde_json::json;

/// The app's variables pointing at the TLS ports, under the names the certificate has or not.
fn tls_vars(
    redis: &RedisServer,
    pg: &PgServer,
    redis_name: &str,
    pg_name: &str,
) -> Vec<(&'static str, String)> {
    let mut vars = app_vars(redis, pg);
    let redis_port = redis.tls_port.expect("TLS");
    for (k, v) in vars.iter_mut() {
        *v = match *k {
            "redis_url" => redis.tls_url(redis_name),
            "redis_origin" => format!("rediss://{redis_name}:{redis_port}"),
            "pg_url" => format!(
                "postgres://postgres@{pg_name}:{}/postgres?sslmode=require",
                pg.port
            ),
            "pg_host" => format!("{pg_name}:{}", pg.port),
            _ => continue,
        };
    }
    vars
}

async fn servers(ca: &TestCa) -> Result<(RedisServer, PgServer)> {
    let (redis, pg) = (RedisServer::start_tls(ca)?, PgServer::start_tls(ca)?);
    pg.migrate().await?;
    Ok((redis, pg))
}

/// A whole sale — admission, precheck, buy, drain, poll, pay — over `rediss://` and
/// `sslmode=require`, trusting the test CA; Postgres confirms the app's connections are
/// encrypted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_runs_over_tls_trusting_the_operators_ca() -> Result<()> {
    let ca = TestCa::new()?;
    let (redis, pg) = servers(&ca).await?;
    let vars = tls_vars(&redis, &pg, "localhost", "localhost");
    // Both connection modes: pooled, and a new TLS connection per request as Spin opens them.
    for mode in [ConnectionMode::Pooled, ConnectionMode::SpinFaithful] {
        let app = TestApp::start_trusting(
            seckill_testkit::product_manifest(),
            &vars,
            mode,
            ca.trust()?,
        )
        .await?;
        let event = format!("tls-{mode:?}").to_lowercase();
        app.open_event(&event, json!({ "stock": 2 })).await?;
        let token = app
            .admit_and_precheck(&event, "tess")
            .await?
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        let (status, bought) = app.buy(&event, "tess", &token).await?;
        assert_eq!(status, 202, "{bought}");
        let (status, report) = app.admin(Method::POST, "/admin/jobs/drain", None).await?;
        assert_eq!((status, &report["inserted"]), (200, &json!(1)), "{report}");
        let order = bought["order_id"].as_str().unwrap_or_default();
        let (status, paid) = app.pay(&event, "tess", order).await?;
        assert_eq!((status, &paid["outcome"]), (200, &json!("paid")), "{paid}");
        // The app's pooled connections are still open: Postgres says they are encrypted.
        let encrypted: i64 = pg
            .client()
            .await?
            .query_one("SELECT count(*) FROM pg_stat_ssl WHERE ssl", &[])
            .await?
            .get(0);
        assert!(encrypted >= 1, "the app's Postgres connections use TLS");
    }
    Ok(())
}

/// Verification is real: without the CA, Redis over TLS is unavailable; with it, a Postgres
/// host name the certificate does not name is refused, `sslmode=require` included (libpq would
/// accept it; Spin does not). Each is a clean 503 `unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_are_verified_and_a_failure_is_a_clean_503() -> Result<()> {
    let ca = TestCa::new()?;
    let (redis, pg) = servers(&ca).await?;
    let body = json!({ "sku": "s", "unit_amount": 100, "currency": "eur", "pow_difficulty": 0, "admission_addr_rate": 0, "stock": 1, "start_ms": 0, "end_ms": 4_000_000_000_000u64 });

    // The system's roots only: the test CA is unknown.
    let vars = tls_vars(&redis, &pg, "localhost", "localhost");
    let app = TestApp::start_with(
        seckill_testkit::product_manifest(),
        &vars,
        ConnectionMode::Pooled,
    )
    .await?;
    let (status, err) = app
        .admin(Method::PUT, "/admin/events/untrusted", Some(&body))
        .await?;
    assert_eq!(
        (status, &err["error"]["code"]),
        (503, &json!("unavailable")),
        "{err}"
    );
    drop(app);

    // The CA trusted, but Postgres reached as 127.0.0.1, which its certificate does not name.
    let vars = tls_vars(&redis, &pg, "localhost", "127.0.0.1");
    let app = TestApp::start_trusting(
        seckill_testkit::product_manifest(),
        &vars,
        ConnectionMode::Pooled,
        ca.trust()?,
    )
    .await?;
    app.open_event("misnamed", json!({ "stock": 1 })).await?;
    let (status, err) = app.admin(Method::POST, "/admin/jobs/drain", None).await?;
    assert_eq!(
        (status, &err["error"]["code"]),
        (503, &json!("unavailable")),
        "{err}"
    );
    Ok(())
}
