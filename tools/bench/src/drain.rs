//! The `drain` part: a backlog of accepted orders drained into Postgres through the host's
//! `POST /admin/jobs/drain`, until none is left.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use anyhow::Result;
use seckill_domain::event::EventId;
use seckill_domain::keys::ShardKeys;
use seckill_domain::scripts::buy::{self, Back, Outcome};
use seckill_domain::scripts::precheck;
use seckill_native::NativeStore;
use seckill_testkit::{PgServer, RedisServer};

use crate::fixture::{SHARDS, open_event};
use crate::load::{Call, once};
use crate::server::HostProcess;
use crate::table::Row;

/// Threads (each with its Redis connection) that sell the backlog.
const WRITERS: usize = 4;

/// The drain row: `n` orders sold, then drained.
pub async fn row(
    redis: &RedisServer,
    pg: &PgServer,
    vars: &[(&str, String)],
    n: usize,
) -> Result<Row> {
    pg.migrate().await?;
    let event = open_event(redis, "backlog", backlog_stock(n))?;
    eprintln!("selling a backlog of {n} orders through the real scripts…");
    sell_backlog(redis, &event, n)?;
    let host = HostProcess::start("spin.toml", vars, false)?;
    let start = Instant::now();
    let inserted = drain_all(host.addr).await?;
    let elapsed = start.elapsed().as_secs_f64();
    let db = pg.client().await?;
    let rows: i64 = db
        .query_one(
            "SELECT count(*) FROM orders WHERE event_id = 'backlog'",
            &[],
        )
        .await?
        .get(0);
    Ok(Row::noted(
        format!("drain into Postgres ({n}-order backlog, 500 per transaction)"),
        format!(
            "{:.0} orders/s ({inserted} inserted in {elapsed:.2} s; {rows} rows in Postgres)",
            inserted as f64 / elapsed,
        ),
    ))
}

/// The stock the backlog's event holds: more than its `n` orders, since buyers hash to their
/// home shards unevenly and a stock of exactly `n` would run some home dry before its last
/// buyer (whose buy then goes to the tail, not sold at home).
fn backlog_stock(n: usize) -> u64 {
    n as u64 + n as u64 / 4 + 64 * u64::from(SHARDS)
}

/// The backlog's buyer `i`.
fn buyer(i: usize) -> String {
    format!("d{i}")
}

/// Sells `n` orders through precheck.lua and buy.lua themselves, so that the backlog has
/// exactly the data layout a sale leaves, whatever that layout becomes.
fn sell_backlog(redis: &RedisServer, event: &EventId, n: usize) -> Result<()> {
    let nodes =
        seckill_domain::nodes::Nodes::one(NativeStore::new(redis.client().get_connection()?));
    let terms =
        seckill_domain::sale::admission_terms(&nodes, event).map_err(|e| anyhow::anyhow!("{e}"))?;
    let version = terms.version.as_str();
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..WRITERS)
            .map(|w| {
                scope.spawn(move || -> Result<()> {
                    let store = NativeStore::new(redis.client().get_connection()?);
                    let now = seckill_domain::clock::now_ms();
                    let client = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
                    for i in (w..n).step_by(WRITERS) {
                        let (user, token) = (buyer(i), format!("t{i}"));
                        let hash = seckill_domain::ids::home_hash(event.as_str(), &user);
                        let home = seckill_domain::ids::home_shard(event.as_str(), &user, SHARDS);
                        let k = &ShardKeys::new(event, home);
                        let order = format!("{now:012x}{i:016x}");
                        let gray = seckill_domain::ids::gray_bucket(event.as_str(), &user);
                        let bought =
                            precheck::run(&store, k, &user, client, version, &token, (hash, gray))
                                .and_then(|_| {
                                    buy::run(
                                        &store,
                                        k,
                                        &user,
                                        &token,
                                        hash,
                                        &order,
                                        &Back::default(),
                                    )
                                })
                                .map_err(|e| anyhow::anyhow!("backlog order {i}: {e}"))?;
                        anyhow::ensure!(
                            matches!(bought, Outcome::Bought(_)),
                            "backlog order {i}: its home shard ran dry"
                        );
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("a backlog writer panicked"))??;
        }
        Ok(())
    })
}

/// Runs the drain job until a run inserts nothing; returns the orders inserted.
async fn drain_all(addr: SocketAddr) -> Result<u64> {
    let mut inserted = 0u64;
    loop {
        let job = Call::empty(
            http::Method::POST,
            "/admin/jobs/drain",
            Some(seckill_testkit::ADMIN_TOKEN.into()),
        );
        let (status, body) = once(addr, job).await?;
        let report: serde_json::Value = serde_json::from_slice(&body)?;
        anyhow::ensure!(status == 200, "drain: {status} {report}");
        let n = report["inserted"].as_u64().unwrap_or(0);
        eprintln!("drain run: {report}");
        if n == 0 {
            return Ok(inserted);
        }
        inserted += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every buyer of the backlog finds a unit at home: each shard's part of the stock (as
    /// warm-up splits it) covers the buyers homed there.
    #[test]
    fn the_backlog_stock_leaves_no_home_shard_dry() {
        for n in [1_000, 200_000] {
            let stock = backlog_stock(n);
            let mut homed = vec![0u64; SHARDS as usize];
            for i in 0..n {
                homed[seckill_domain::ids::home_shard("backlog", &buyer(i), SHARDS) as usize] += 1;
            }
            for (s, users) in homed.iter().enumerate() {
                let part =
                    stock / u64::from(SHARDS) + u64::from((s as u64) < stock % u64::from(SHARDS));
                assert!(
                    part >= *users,
                    "n {n}: shard {s} holds {part} for {users} buyers"
                );
            }
        }
    }
}
