//! Before the sale: the servers (Redis with an fsync'd append-only file, Postgres, the host with
//! its cron triggers) and the event.

use std::net::SocketAddr;

use anyhow::Result;
use bytes::Bytes;
use http::Method;
use seckill_testkit::rest_facade::RestFacade;
use seckill_testkit::{ADMIN_TOKEN, PgServer, RedisServer, TestCa};
use serde_json::{Value, json};

use super::{DemoArgs, EVENT};
use crate::load::{Call, once};
use crate::server::{HostProcess, point_redis_at};

/// The demo's servers, alive for the whole run (and dropped in this order: the host first).
pub struct Servers {
    pub host: HostProcess,
    /// In front of Redis with `--rest`.
    _facade: Option<RestFacade>,
    _ca: TestCa,
    pub pg: PgServer,
    _redis: RedisServer,
}

impl Servers {
    /// Starts Redis and Postgres (migrated), then the host on them, reaching Redis through a
    /// REST facade when `rest` is set.
    pub async fn start(rest: bool) -> Result<Self> {
        let redis = RedisServer::start_durable()?;
        let pg = PgServer::start()?;
        pg.migrate().await?;
        let mut vars = seckill_testkit::app_vars(&redis, &pg);
        vars.push(("settings", "drain_reclaim_idle_ms=2000".into()));
        let ca = TestCa::new()?;
        let (host, facade) = if rest {
            let facade = RestFacade::start(&redis.url(), &ca, "demo-token").await?;
            point_redis_at(&mut vars, facade.url(), facade.origin());
            eprintln!("Redis over REST: {}", facade.host());
            let tls_ca = ca.path("ca.pem");
            let host =
                HostProcess::launch("spin.toml", &vars, false, true, &["--tls-ca", &tls_ca])?;
            (host, Some(facade))
        } else {
            (
                HostProcess::start_app("spin.toml", &vars, false, true)?,
                None,
            )
        };
        Ok(Servers {
            host,
            _facade: facade,
            _ca: ca,
            pg,
            _redis: redis,
        })
    }
}

/// Creates and warms up the event, to open 3 s from now (server time); returns its start.
pub async fn create_event(addr: SocketAddr, args: &DemoArgs) -> Result<u64> {
    let start_ms = server_now_ms(addr).await? + 3_000;
    let config = json!({
        "sku": "demo-phone", "stock": args.stock, "shards": args.shards, "start_ms": start_ms,
        "end_ms": start_ms + 600_000, "payment_timeout_s": args.payment_timeout_s,
        "user_rate": 2.0, "user_burst": 5,
    });
    let create = Call {
        method: Method::PUT,
        path: format!("/admin/events/{EVENT}"),
        bearer: Some(ADMIN_TOKEN.into()),
        body: Bytes::from(config.to_string()),
    };
    let (status, body) = once(addr, create).await?;
    anyhow::ensure!(status == 201, "create: {status} {body:?}");
    let warmup = Call::post(
        format!("/admin/events/{EVENT}/warmup"),
        Some(ADMIN_TOKEN.into()),
        &json!({}),
    );
    once(addr, warmup).await?;
    Ok(start_ms)
}

/// The server's clock (`GET /api/time`), in ms; 0 if the answer has none.
pub async fn server_now_ms(addr: SocketAddr) -> Result<u64> {
    let (_, t) = once(addr, Call::get("/api/time", None)).await?;
    Ok(serde_json::from_slice::<Value>(&t)?["now_ms"]
        .as_u64()
        .unwrap_or(0))
}
