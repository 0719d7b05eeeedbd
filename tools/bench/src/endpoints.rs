//! The rest of the sale's endpoints end to end, on the buy part's host: poll for the buyers who
//! bought (and a spike of polls and buys at three times its rate, `crate::spike`), admission
//! for fresh users, precheck for others.

use std::sync::Arc;

use anyhow::Result;
use seckill_domain::auth;
use seckill_testkit::{RedisServer, jwt_for};
use serde_json::json;

use crate::buy::Sale;
use crate::fixture::polls;
use crate::load::{Call, Calls};
use crate::measure::endpoint_row;
use crate::options::SuiteArgs;
use crate::table::Row;
use seckill_domain::event::EventId;

/// The poll, admission and precheck rows; the buy part's host stops with them.
pub async fn rows(sale: Sale, redis: &RedisServer, args: &SuiteArgs) -> Result<Vec<Row>> {
    let addr = sale.host.addr;
    let event = sale.event.as_str();
    let polls = polls(&sale.event, &sale.buyers[..sale.bought.max(1)]);
    let poll_row = endpoint_row("poll end to end", addr, redis, args, polls.clone()).await?;
    let poll_rps = poll_row.rps();
    let mut rows = vec![poll_row];
    rows.extend(crate::spike::runs(addr, redis, &sale.event, polls, poll_rps).await?);
    rows.extend([
        endpoint_row(
            "admission end to end",
            addr,
            redis,
            args,
            admission(event, args),
        )
        .await?,
        endpoint_row(
            "precheck end to end",
            addr,
            redis,
            args,
            precheck(&sale.event, redis, args)?,
        )
        .await?,
    ]);
    Ok(rows)
}

/// Fresh users ask for admission, each once.
pub(crate) fn admission(event: &str, args: &SuiteArgs) -> Calls {
    let jwts: Vec<String> = (0..args.users).map(|i| jwt_for(&format!("a{i}"))).collect();
    let path = format!("/api/events/{event}/admission");
    Arc::new(move |i: u64| {
        Some(Call::post(
            path.clone(),
            Some(jwts.get(i as usize)?.clone()),
            &json!({}),
        ))
    })
}

/// Other users precheck, each once; their admission tokens are computed here from the event's
/// terms, as checking one needs no Redis.
pub(crate) fn precheck(event: &EventId, redis: &RedisServer, args: &SuiteArgs) -> Result<Calls> {
    let secret = seckill_testkit::ADMISSION_SECRET.as_bytes();
    let nodes = seckill_domain::nodes::Nodes::one(seckill_native::NativeStore::new(
        redis.client().get_connection()?,
    ));
    let terms =
        seckill_domain::sale::admission_terms(&nodes, event).map_err(|e| anyhow::anyhow!("{e}"))?;
    let fresh: Vec<(String, String)> = (0..args.users)
        .map(|i| {
            let user = format!("p{i}");
            let token = auth::admission_token(secret, event.as_str(), &user, &terms);
            (jwt_for(&user), token)
        })
        .collect();
    let path = format!("/api/events/{}/precheck", event.as_str());
    Ok(Arc::new(move |i: u64| {
        let (jwt, adm) = fresh.get(i as usize)?;
        Some(Call::post(
            path.clone(),
            Some(jwt.clone()),
            &json!({ "admission_token": adm }),
        ))
    }))
}
