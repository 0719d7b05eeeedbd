//! The sale path end to end: the real functions in the real host over HTTP, real Redis.
//! Every test that changes state asserts the invariants afterwards ([`assert_sold_exactly`]):
//! exactly the stock sold, nobody twice, no shard below zero; a refusal changes nothing
//! ([`snapshot`] before and after).
//!
//! One binary (`binary(sale)`), one module per concern, one behaviour per test:
//! - `sell_out` — spikes of buyers sell exactly the stock, whatever the shards and the users;
//! - `tokens` — identities, purchase and admission tokens, one order per user;
//! - `gate` — admission: its proof of work and opening time, the per-address bucket, admission
//!   tokens that die with their event's admission;
//! - `windows` — when admission and precheck are open: before the start, after the end, sold out;
//! - `input` — requests the API cannot take: event ids, bodies, methods, a 64 MiB body;
//! - `operators` — the admin token, event configuration, changes to a warmed-up event;
//! - `archive` — an ended event archived and back, recorded; refusals change nothing;
//! - `limits` — the per-user and the event-wide rate limits;
//! - `redis_budget` — what a request costs Redis: commands, AOF writes;
//! - `poll`, `lottery`, `pause_and_deny` — the poll's states, the lottery, pause and deny lists;
//! - `errors` — a script failing on the data, an unreachable Redis;
//! - `config_center` — versions and rollback, the gray release, the global bucket, shadow mode,
//!   the metrics;
//! - `dashboard` — the Grafana dashboard against the metrics a running app exports.
//!
//! A test whose outcome the manifest, the transport or the node count can change lives in a
//! module named for the later runs of `scripts/test.sh` that repeat it (`over_rest`,
//! `over_nodes`, `over_rest_and_nodes`, `over_http_manifest`), beside the others of its concern.

use std::collections::{HashMap, HashSet};

use anyhow::Result;
use seckill_testkit::{PgServer, RedisServer, TestApp, app_vars};
use serde_json::{Value, json};

mod archive;
mod config_center;
mod dashboard;
mod errors;
mod gate;
mod input;
mod limits;
mod lottery;
mod operators;
mod pause_and_deny;
mod poll;
mod redis_budget;
mod sell_out;
mod tokens;
mod windows;

async fn start() -> Result<(RedisServer, PgServer, TestApp)> {
    let (redis, pg) = (RedisServer::start()?, PgServer::start()?);
    let app = TestApp::start(seckill_testkit::product_manifest(), &app_vars(&redis, &pg)).await?;
    Ok((redis, pg, app))
}

fn code(body: &Value) -> &str {
    body["error"]["code"]
        .as_str()
        .or(body.as_str())
        .unwrap_or("<no error code>")
}

/// Milliseconds since the Unix epoch.
fn epoch_ms() -> Result<u64> {
    Ok(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64)
}

/// Every shard's `bought` hash (user → order id), merged: one order per user is one entry over
/// all of them, since a user only ever buys at their home shard.
async fn bought(app: &TestApp, event: &str, status: &Value) -> Result<HashMap<String, String>> {
    let id = seckill_domain::event::EventId::parse(event)?;
    let shards = status["stock_by_shard"].as_array().map_or(0, Vec::len) as u32;
    let mut all = HashMap::new();
    for s in 0..shards {
        let mut conn = app
            .shard_client(event, s)
            .get_multiplexed_async_connection()
            .await?;
        let key = seckill_domain::keys::ShardKeys::new(&id, s).bought();
        let part: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(key)
            .query_async(&mut conn)
            .await?;
        for (user, order) in part {
            assert!(
                all.insert(user.clone(), order).is_none(),
                "{user} bought on two shards"
            );
        }
    }
    Ok(all)
}

/// What a refused request must leave untouched.
async fn snapshot(app: &TestApp, event: &str) -> Result<Value> {
    let status = app.status(event).await?;
    let bought = bought(app, event, &status).await?.len();
    Ok(
        json!({ "stock": status["stock_by_shard"], "sold": status["sold"], "queued": status["queued"], "bought": bought }),
    )
}

/// Checks the end state of a sale: `sold` units sold exactly once each, shards never negative.
async fn assert_sold_exactly(app: &TestApp, event: &str, stock: i64, sold: i64) -> Result<()> {
    let status = app.status(event).await?;
    let shards: Vec<i64> = serde_json::from_value(status["stock_by_shard"].clone())?;
    assert!(
        shards.iter().all(|s| *s >= 0),
        "a shard went negative: {shards:?}"
    );
    assert_eq!(shards.iter().sum::<i64>(), stock - sold, "stock left");
    assert_eq!(status["sold"], sold, "{status}");
    assert_eq!(
        status["queued"], sold,
        "every accepted order is in the queue: {status}"
    );
    let bought = bought(app, event, &status).await?;
    assert_eq!(bought.len() as i64, sold, "one order per buying user");
    let orders: HashSet<&String> = bought.values().collect();
    assert_eq!(orders.len() as i64, sold, "order ids are unique");
    Ok(())
}
