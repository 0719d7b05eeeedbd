//! The `buy` part: `GET /api/time`, the buy end to end on a pooled Redis connection, the same at
//! half of its peak in open loop, then the same buy over each other way of reaching Redis
//! ([`transport`]).

mod transport;

use std::net::SocketAddr;

use anyhow::Result;
use seckill_domain::event::EventId;
use seckill_testkit::{RedisServer, TestCa};

use crate::fixture::{Buyer, open_event, prepare_buyers};
use crate::load::open_loop;
use crate::measure::{buy_row, buys, get_loop};
use crate::options::SuiteArgs;
use crate::server::HostProcess;
use crate::table::Row;

/// What the buy part leaves for the endpoint rows: its host, still running, and its buyers.
pub struct Sale {
    pub host: HostProcess,
    pub event: EventId,
    /// Every buyer prepared; the first `bought` of them bought.
    pub buyers: Vec<Buyer>,
    pub bought: usize,
    /// The pooled buy's req/s.
    pub rps: f64,
}

/// The buy rows; `hello_rps` is the hello component's req/s, the buy's yardstick.
pub async fn rows(
    redis: &RedisServer,
    ca: &TestCa,
    vars: &[(&'static str, String)],
    hello_rps: f64,
    args: &SuiteArgs,
) -> Result<(Vec<Row>, Sale)> {
    let host = HostProcess::start("spin.toml", vars, false)?;
    let time = get_loop(host.addr, "/api/time", args).await?;
    let mut rows = vec![Row::measured("host: GET /api/time", time, "")];

    let event = open_event(redis, "bench", 10_000_000)?;
    eprintln!("preparing {} buyers…", args.users);
    let buyers = prepare_buyers(redis, &event, args.users, "b")?;
    let (mut row, cpu) = host
        .measured(buy_row(
            "buy end to end (pooled Redis connection)",
            host.addr,
            redis,
            buyers.clone(),
            &event,
            args,
        ))
        .await?;
    let (rps, bought) = (row.rps(), row.requests() as usize);
    row.add_note(&format!("{:.2}× hello;", rps / hello_rps));
    rows.push(row);
    rows.push(half_peak(host.addr, redis, rps / 2.0, args).await?);
    rows.extend(transport::rows(redis, ca, vars, (rps, cpu), args).await?);
    let sale = Sale {
        host,
        event,
        buyers,
        bought,
        rps,
    };
    Ok((rows, sale))
}

/// The buy at a fixed arrival rate (open loop): the latency buyers see when the host is not
/// saturated.
async fn half_peak(
    addr: SocketAddr,
    redis: &RedisServer,
    rate: f64,
    args: &SuiteArgs,
) -> Result<Row> {
    let event = open_event(redis, "halfpeak", 10_000_000)?;
    let n = (rate * args.seconds as f64) as usize + 1;
    let buyers = prepare_buyers(redis, &event, n, "h")?;
    let connections = args.connections * 2;
    let report = open_loop(
        addr,
        connections,
        rate,
        args.duration(),
        buys(&event, buyers),
    )
    .await?;
    Ok(Row::measured(
        format!("buy at half of peak, open loop ({rate:.0} arrivals/s)"),
        report,
        "latency from each request's due time;",
    ))
}
