//! What the rows run against, set up natively (the domain's operations straight on Redis, no
//! host): open events and buyers holding purchase tokens.

use std::sync::Arc;

use anyhow::Result;
use seckill_domain::event::{EventConfig, EventId};
use seckill_domain::nodes::Nodes;
use seckill_domain::store::Store;
use seckill_domain::{admin, sale};
use seckill_native::NativeStore;
use seckill_testkit::{RedisServer, jwt_for};
use serde_json::json;

use crate::load::{Call, Calls};

/// The shards of the events the rows open.
pub const SHARDS: u32 = 8;

/// A buyer ready to buy once: a shop JWT and a purchase token.
#[derive(Clone)]
pub struct Buyer {
    pub jwt: String,
    pub token: String,
}

/// `buyers` (who bought) poll for their order, round after round.
pub fn polls(event: &EventId, buyers: &[Buyer]) -> Calls {
    let jwts: Vec<String> = buyers.iter().map(|b| b.jwt.clone()).collect();
    let path = format!("/api/events/{}/orders/me", event.as_str());
    Arc::new(move |i: u64| {
        let jwt = &jwts[(i as usize) % jwts.len()];
        Some(Call::get(path.clone(), Some(jwt.clone())))
    })
}

/// Creates and warms up event `id` with `stock` units over [`SHARDS`] shards, open since a
/// second ago for an hour.
pub fn open_event(redis: &RedisServer, id: &str, stock: u64) -> Result<EventId> {
    open_event_with(redis, id, stock, SHARDS)
}

/// [`open_event`] with `shards` shards.
pub fn open_event_with(redis: &RedisServer, id: &str, stock: u64, shards: u32) -> Result<EventId> {
    let store = NativeStore::new(redis.client().get_connection()?);
    open_event_on(&Nodes::one(store), id, stock, shards)
}

/// [`open_event_with`] over `nodes`: its shards where `redis_url` places them.
pub fn open_event_on<S: Store>(
    nodes: &Nodes<S>,
    id: &str,
    stock: u64,
    shards: u32,
) -> Result<EventId> {
    let event = EventId::parse(id).map_err(|e| anyhow::anyhow!("{e}"))?;
    let now = seckill_domain::clock::now_ms();
    let config: EventConfig = serde_json::from_value(json!({
        "sku": "bench", "unit_amount": 1999, "currency": "eur", "stock": stock, "shards": shards,
        "start_ms": now - 1000, "end_ms": now + 3_600_000,
        // The load comes from one address and measures the sale's path: no per-user or
        // per-address limit, no proof of work (its check costs the guest one SHA-256).
        "user_rate": 0, "admission_multiplier": 10, "admission_addr_rate": 0, "pow_difficulty": 0,
    }))?;
    admin::upsert_event(nodes, &event, &config).map_err(|e| anyhow::anyhow!("{e}"))?;
    admin::warm_up(nodes, &event).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(event)
}

/// `redis_url` for `servers`: every node, comma-separated (as `seckill_testkit::over_nodes`
/// sets it).
pub fn redis_url(servers: &[&RedisServer]) -> String {
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    urls.join(",")
}

/// The nodes of `redis_url`, each connected the first time it is needed.
pub fn connect(redis_url: &str) -> Nodes<NativeStore<redis::Connection>> {
    Nodes::open(redis_url, |url| {
        redis::Client::open(url)?
            .get_connection()
            .map(NativeStore::new)
    })
}

/// `users` buyers named `{prefix}{i}`, through admission and precheck straight on Redis.
pub fn prepare_buyers(
    redis: &RedisServer,
    event: &EventId,
    users: usize,
    prefix: &str,
) -> Result<Vec<Buyer>> {
    let nodes = Nodes::one(NativeStore::new(redis.client().get_connection()?));
    let secret = seckill_testkit::ADMISSION_SECRET.as_bytes();
    (0..users)
        .map(|i| {
            let user = format!("{prefix}{i}");
            let now = seckill_domain::clock::now_ms();
            let admitted = sale::issue_token(
                &nodes,
                &sale::AdmissionRequest {
                    event,
                    shards: SHARDS,
                    user: &user,
                    client: Some("127.0.0.1"),
                    solution: None,
                },
                secret,
                now,
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            let sale::Admission::Admitted { admission_token } = admitted else {
                anyhow::bail!("{user} was not admitted: {admitted:?}");
            };
            let token = sale::precheck(
                &nodes,
                &sale::PrecheckRequest {
                    event,
                    shards: SHARDS,
                    user: &user,
                    client: "127.0.0.1".parse().ok(),
                    admission_token: &admission_token,
                },
                secret,
                now,
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok(Buyer {
                jwt: jwt_for(&user),
                token: token.purchase_token,
            })
        })
        .collect()
}
