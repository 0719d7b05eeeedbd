//! The spike: a crowd arriving at about three times what the host sustains, each request on a
//! connection of its own (as a crowd of browsers arrives), at a fixed arrival rate for a couple
//! of seconds. What a buyer in it gets: answered (and how fast), shed (`503` with
//! `Retry-After` because no instance slot came free within the host's instance wait, and how
//! fast that came), or nothing (the connection dropped without a response: the goal is none).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Result;

use seckill_host::http_trigger::SHED_MESSAGE;
use seckill_testkit::{RedisServer, jwt_for};

use crate::fixture::{Buyer, open_event, polls};
use crate::load::{Calls, percentile, send};
use crate::measure::endpoint_row;
use crate::options::SuiteArgs;
use crate::server::HostProcess;
use crate::table::Row;

/// The spike's arrival rate over what the host sustains.
const OVERLOAD: f64 = 3.0;
/// How long the crowd keeps arriving.
const SPIKE: Duration = Duration::from_secs(2);
/// At most this many requests (each a connection: the client's ports are finite).
const MAX_REQUESTS: f64 = 15_000.0;
/// How long a client waits for an answer before it counts as dropped.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// What became of one request of the spike.
enum Fate {
    Answered(Duration),
    Shed(Duration),
    Dropped,
}

/// Whether a `503`'s body is the host's shed answer.
fn is_shed(body: &[u8]) -> bool {
    std::str::from_utf8(body).is_ok_and(|b| b.contains(SHED_MESSAGE))
}

/// The poll's rows on a host of its own (`--only spike`): its sustained rate in closed loop,
/// then the spike at [`OVERLOAD`] × that.
pub async fn rows(
    redis: &RedisServer,
    vars: &[(&'static str, String)],
    args: &SuiteArgs,
) -> Result<Vec<Row>> {
    let host = HostProcess::start("spin.toml", vars, false)?;
    let event = open_event(redis, "spike", 1_000_000)?;
    let buyers: Vec<Buyer> = (0..10_000)
        .map(|i| Buyer {
            jwt: jwt_for(&format!("s{i}")),
            token: String::new(),
        })
        .collect();
    let calls = polls(&event, &buyers);
    let sustained = endpoint_row("poll end to end", host.addr, redis, args, calls.clone()).await?;
    let rps = sustained.rps();
    Ok(vec![sustained, row("poll", host.addr, calls, rps).await?])
}

/// The spike row: `calls` arriving at [`OVERLOAD`] × `sustained_rps` on the host at `addr`.
pub async fn row(name: &str, addr: SocketAddr, calls: Calls, sustained_rps: f64) -> Result<Row> {
    let rate = (sustained_rps * OVERLOAD).max(1.0);
    let total = (rate * SPIKE.as_secs_f64()).min(MAX_REQUESTS) as u64;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    for i in 0..total {
        let Some(call) = calls(i) else { break };
        let due = start + interval.mul_f64(i as f64);
        tokio::time::sleep_until(due.into()).await;
        tasks.push(tokio::spawn(async move {
            match tokio::time::timeout(CLIENT_TIMEOUT, send(addr, call)).await {
                Ok(Ok(answer)) if answer.status == 503 && is_shed(&answer.body) => {
                    Fate::Shed(due.elapsed())
                }
                Ok(Ok(_)) => Fate::Answered(due.elapsed()),
                _ => Fate::Dropped,
            }
        }));
    }
    let (mut answered, mut shed, mut dropped) = (Vec::new(), Vec::new(), 0u64);
    for t in tasks {
        match t.await? {
            Fate::Answered(d) => answered.push(d),
            Fate::Shed(d) => shed.push(d),
            Fate::Dropped => dropped += 1,
        }
    }
    let sent = (answered.len() + shed.len()) as u64 + dropped;
    answered.sort_unstable();
    shed.sort_unstable();
    let ms = |v: &[Duration], p: f64| percentile(v, p).map_or(0.0, |d| d.as_secs_f64() * 1e3);
    let share = |n: usize| n as f64 * 100.0 / sent.max(1) as f64;
    Ok(Row::noted(
        format!(
            "{name}: spike at {OVERLOAD:.0}× sustained ({rate:.0} arrivals/s for {:.0} s, a connection each)",
            SPIKE.as_secs_f64()
        ),
        format!(
            "answered {:.1} % (p50 {:.0} ms, p99 {:.0} ms); shed 503 + Retry-After {:.1} % (p50 {:.0} ms, p99 {:.0} ms); dropped without a response {dropped} of {sent}; latency from each request's due time;",
            share(answered.len()),
            ms(&answered, 0.5),
            ms(&answered, 0.99),
            share(shed.len()),
            ms(&shed, 0.5),
            ms(&shed, 0.99),
        ),
    ))
}
