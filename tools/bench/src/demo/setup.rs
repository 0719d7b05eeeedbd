//! Before the sale: the servers (Redis nodes with an fsync'd append-only file each, Postgres,
//! the host with its cron triggers, the shop's order events endpoint) and the event.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use bytes::Bytes;
use http::Method;
use seckill_testkit::rest_facade::RestFacade;
use seckill_testkit::stripe::RESTRICTED_KEY;
use seckill_testkit::{
    ADMIN_TOKEN, PAYMENT_WEBHOOK_SECRET, PgServer, RedisServer, StripeSandbox, TestCa,
};
use serde_json::{Value, json};

use super::shop::Shop;
use super::{DemoArgs, EVENT};
use crate::load::{Call, once};
use crate::server::{HostProcess, point_redis_at};

/// The demo's servers, alive for the whole run (and dropped in this order: the host first).
pub struct Servers {
    pub host: HostProcess,
    /// The payment provider (the kit's Stripe sandbox): checkout sessions, the hosted page,
    /// signed events to the host's webhook with Stripe's retries.
    pub provider: StripeSandbox,
    /// In front of Redis with `--rest`.
    _facade: Option<RestFacade>,
    _ca: TestCa,
    /// The shop's order events endpoint.
    pub shop: Shop,
    pub pg: PgServer,
    /// The Redis nodes, in `redis_url`'s order (the script sampler holds them too).
    pub redis: Arc<Vec<RedisServer>>,
}

impl Servers {
    /// Starts `nodes` Redis nodes and Postgres (migrated), then the host on them (the event's
    /// shards spread over the nodes), reaching Redis through a REST facade when `rest` is set
    /// (one node only).
    pub async fn start(args: &DemoArgs, host_log: &std::path::Path) -> Result<Self> {
        let (rest, nodes) = (args.rest, args.nodes);
        let max_instances = args.max_instances.map(|n| n.to_string());
        // Every answer says how long it took at the host, so the report can tell the host's
        // time from the buyers' machine's (one machine here).
        let mut extra: Vec<&str> = vec!["--server-timing"];
        if let Some(n) = &max_instances {
            extra.extend(["--max-instances", n]);
        }
        anyhow::ensure!(nodes >= 1, "--nodes must be 1 or more");
        anyhow::ensure!(!rest || nodes == 1, "--rest runs on one Redis node");
        let redis: Vec<RedisServer> = (0..nodes)
            .map(|_| RedisServer::start_durable())
            .collect::<Result<_>>()?;
        let pg = PgServer::start()?;
        pg.migrate().await?;
        let provider = StripeSandbox::start().await?;
        // Stripe's default live-mode limit: every payer's session is one request.
        provider.rate_limit_per_second(Some(PROVIDER_REQUESTS_PER_S));
        let mut vars = seckill_testkit::app_vars(&redis[0], &pg);
        vars.push(("payment_api_url", provider.url().to_owned()));
        vars.push(("payment_api_key", RESTRICTED_KEY.to_owned()));
        if nodes > 1 {
            seckill_testkit::over_nodes(&mut vars, &redis.iter().collect::<Vec<_>>());
            eprintln!("{nodes} Redis nodes: {}", vars_value(&vars, "redis_url"));
        }
        vars.push(("settings", "drain_reclaim_idle_ms=2000".into()));
        let ca = TestCa::for_names(&["localhost", super::shop::NAME])?;
        let (shop, shop_args) = Shop::start(&ca, host_log.parent().unwrap_or(Path::new(".")))?;
        extra.extend(shop_args.iter().map(String::as_str));
        let (host, facade) = if rest {
            let facade = RestFacade::start(&redis[0].url(), &ca, "demo-token").await?;
            point_redis_at(&mut vars, facade.url(), facade.origin());
            eprintln!("Redis over REST: {}", facade.host());
            let tls_ca = ca.path("ca.pem");
            extra.extend(["--tls-ca", &tls_ca]);
            (host(&vars, &extra, host_log)?, Some(facade))
        } else {
            (host(&vars, &extra, host_log)?, None)
        };
        provider.add_webhook_endpoint(
            &format!("http://{}/api/payments/webhook", host.addr),
            &[PAYMENT_WEBHOOK_SECRET],
            &["*"],
        );
        Ok(Servers {
            host,
            provider,
            _facade: facade,
            _ca: ca,
            shop,
            pg,
            redis: Arc::new(redis),
        })
    }
}

/// API requests a second the provider takes (Stripe's default in live mode; 25 in test mode).
const PROVIDER_REQUESTS_PER_S: u32 = 100;

/// The host with its cron triggers, its log (the guests' lines about each 5xx among it) in
/// `log` rather than among the demo's story.
fn host(vars: &[(&str, String)], extra: &[&str], log: &std::path::Path) -> Result<HostProcess> {
    let (mut cmd, addr) = HostProcess::command(super::MANIFEST, vars, false, true, extra)?;
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    cmd.stderr(std::fs::File::create(log)?);
    HostProcess::spawn(cmd, addr)
}

/// The value of variable `name` in `vars` (empty if it has none).
fn vars_value<'a>(vars: &'a [(&str, String)], name: &str) -> &'a str {
    vars.iter()
        .find(|(k, _)| *k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// The demo event's proof of work: 2^8 hashes per buyer, so one machine can solve for all.
const DEMO_POW_DIFFICULTY: u32 = 8;

/// Creates and warms up the event, to open 3 s from now (server time); returns its start.
pub async fn create_event(addr: SocketAddr, args: &DemoArgs) -> Result<u64> {
    let start_ms = server_now_ms(addr).await? + 3_000;
    let config = json!({
        "sku": "demo-phone", "unit_amount": 79_900, "currency": "eur",
        "stock": args.stock, "shards": args.shards, "start_ms": start_ms,
        "end_ms": start_ms + 600_000, "payment_timeout_s": args.payment_timeout_s,
        "user_rate": 2.0, "user_burst": 5,
        // This machine solves every buyer's proof of work (each solves their own in a browser,
        // 2^18 hashes by default), and they all come from one address.
        "pow_difficulty": DEMO_POW_DIFFICULTY, "admission_addr_rate": 0,
    });
    let create = Call {
        method: Method::PUT,
        path: format!("/admin/events/{EVENT}"),
        bearer: Some(ADMIN_TOKEN.into()),
        body: Bytes::from(config.to_string()),
        headers: Vec::new(),
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
