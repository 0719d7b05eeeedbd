//! Closed-loop rows over one endpoint of the host, shared by the parts of the suite.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Result;
use seckill_domain::event::EventId;
use seckill_testkit::RedisServer;

use crate::fixture::{Buyer, open_event, prepare_buyers};
use crate::load::{Call, Calls, Report, closed_loop, per_request};
use crate::options::SuiteArgs;
use crate::table::Row;

/// Zeroes Redis's command statistics, so that the next count covers one run only.
pub fn reset_stats(redis: &RedisServer) -> Result<()> {
    redis.take_script_calls().map(drop)
}

/// `GET path` in a closed loop.
pub async fn get_loop(addr: SocketAddr, path: &'static str, args: &SuiteArgs) -> Result<Report> {
    let calls: Calls = Arc::new(move |_| Some(Call::get(path, None)));
    closed_loop(addr, args.connections, args.duration(), calls).await
}

/// Buyer `i` buys once from `event`; the run ends with the buyers.
pub fn buys(event: &EventId, buyers: Vec<Buyer>) -> Calls {
    let path = format!("/api/events/{}/buy", event.as_str());
    Arc::new(move |i: u64| {
        let b = buyers.get(i as usize)?;
        Some(Call::buy(&path, &b.jwt, &b.token))
    })
}

/// A closed-loop row for one endpoint, with the Redis scripts it ran per request
/// (`INFO commandstats`: EVALSHA calls per request; EVAL only after NOSCRIPT).
pub async fn endpoint_row(
    name: &str,
    addr: SocketAddr,
    redis: &RedisServer,
    args: &SuiteArgs,
    calls: Calls,
) -> Result<Row> {
    reset_stats(redis)?;
    let report = closed_loop(addr, args.connections, args.duration(), calls).await?;
    let (evalsha, eval) = redis.take_script_calls()?;
    let note = format!(
        "Redis scripts per request: {:.3} EVALSHA, {eval} EVAL in all;",
        per_request(evalsha as f64, report.requests)
    );
    Ok(Row::measured(name, report, note))
}

/// The buy row: each prepared buyer buys once.
pub async fn buy_row(
    name: &str,
    addr: SocketAddr,
    redis: &RedisServer,
    buyers: Vec<Buyer>,
    event: &EventId,
    args: &SuiteArgs,
) -> Result<Row> {
    endpoint_row(name, addr, redis, args, buys(event, buyers)).await
}

/// The buy row on a new event `id` of its own, with `args.users` buyers prepared for it.
pub async fn fresh_buy_row(
    name: &str,
    addr: SocketAddr,
    redis: &RedisServer,
    id: &str,
    args: &SuiteArgs,
) -> Result<Row> {
    let event = open_event(redis, id, 10_000_000)?;
    let buyers = prepare_buyers(redis, &event, args.users, id)?;
    buy_row(name, addr, redis, buyers, &event, args).await
}
