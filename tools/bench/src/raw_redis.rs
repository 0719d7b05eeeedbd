//! The floor: `redis-benchmark` against the suite's Redis, no host in between.

use std::process::Command;

use anyhow::{Context, Result};
use seckill_testkit::RedisServer;

use crate::fixture::open_event_with;
use crate::table::Row;

/// The raw Redis rows: a one-key decrement script, then `buy.lua` itself.
pub fn rows(redis: &RedisServer) -> Result<Vec<Row>> {
    let rows = vec![evalsha_decrement(redis)?, evalsha_buy_script(redis)?];
    eprintln!("{}\n{}", rows[0].note, rows[1].note);
    Ok(rows)
}

/// Runs `redis-benchmark` (50 clients) with `command`; returns its requests per second.
fn redis_benchmark(redis: &RedisServer, extra: &[&str], command: &[&str]) -> Result<String> {
    let port = redis.port.to_string();
    let out = Command::new("redis-benchmark")
        .args(["-p", &port, "-c", "50", "-q"])
        .args(extra)
        .args(command)
        .output()
        .context("redis-benchmark")?;
    Ok(last_rps(&String::from_utf8_lossy(&out.stdout)))
}

/// The figure before the last "requests" in `redis-benchmark -q`'s output (whose last report
/// line reads "EVALSHA ...: 95102.00 requests per second, p50=…"); the whole output, trimmed,
/// when there is none (an error message, say).
fn last_rps(text: &str) -> String {
    text.split_whitespace()
        .zip(text.split_whitespace().skip(1))
        .filter(|(_, next)| *next == "requests")
        .last()
        .map(|(n, _)| {
            n.trim_start_matches(|c: char| !c.is_ascii_digit())
                .to_owned()
        })
        .unwrap_or_else(|| text.trim().to_owned())
}

/// `redis-benchmark` of EVALSHA on a one-key decrement script.
fn evalsha_decrement(redis: &RedisServer) -> Result<Row> {
    let mut conn = redis.client().get_connection()?;
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg("local v = redis.call('DECR', KEYS[1]) if v < 0 then redis.call('INCR', KEYS[1]) return 0 end return 1")
        .query(&mut conn)?;
    let _: () = redis::cmd("SET")
        .arg("bench:stock")
        .arg(1_000_000_000)
        .query(&mut conn)?;
    let rps = redis_benchmark(
        redis,
        &["-n", "200000"],
        &["EVALSHA", &sha, "1", "bench:stock"],
    )?;
    Ok(Row::noted(
        "raw Redis: redis-benchmark EVALSHA 1-key decrement (50 clients)",
        format!("{rps} req/s"),
    ))
}

/// `redis-benchmark` of EVALSHA on `crates/domain/lua/buy.lua` itself (the [`buy_script`] row).
fn evalsha_buy_script(redis: &RedisServer) -> Result<Row> {
    let run = buy_script(redis, 2_000_000, 100_000)?;
    Ok(Row::noted(
        "raw Redis: redis-benchmark EVALSHA of buy.lua (50 clients)",
        format!(
            "{} req/s; {} of {} took the whole purchase path, the rest met a used user or token",
            run.rps, run.bought, run.requests
        ),
    ))
}

/// What `redis-benchmark` made of `buy.lua` on one node.
pub struct BuyScriptRun {
    /// Requests per second, as `redis-benchmark` printed it (or its error).
    pub rps: String,
    /// Requests that took the whole purchase path.
    pub bought: u64,
    /// Requests sent.
    pub requests: u64,
}

impl BuyScriptRun {
    /// Requests per second, as a number.
    pub fn per_second(&self) -> Result<f64> {
        self.rps
            .parse()
            .with_context(|| format!("redis-benchmark of buy.lua: {}", self.rps))
    }
}

/// `redis-benchmark` (50 clients, `requests` requests) of EVALSHA on `crates/domain/lua/buy.lua`
/// itself, with the keys and arguments `sale::buy` sends, on a one-shard event of its own.
/// redis-benchmark draws every `__rand_int__` independently (from `keyspace` ids), so the user
/// and the purchase-token key are two random ids: every token key of the keyspace holds the
/// same token, and a buy that meets a user or token already used takes the short refusal path
/// (`bought` says how many did the whole purchase).
pub fn buy_script(redis: &RedisServer, keyspace: u64, requests: u64) -> Result<BuyScriptRun> {
    // One shard: every buyer is at home on it, as each buyer is at home on their shard's node.
    let event = open_event_with(redis, "rawbuy", 10_000_000, 1)?;
    let k = seckill_domain::keys::ShardKeys::new(&event, 0);
    let mut conn = redis.client().get_connection()?;
    for chunk in (0..keyspace).collect::<Vec<_>>().chunks(20_000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("SET")
                .arg(k.purchase_token(&format!("{i:012}")))
                .arg("t")
                .ignore();
        }
        pipe.query::<()>(&mut conn)?;
    }
    let script = &seckill_domain::scripts::BUY;
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script.source)
        .query(&mut conn)?;
    let rand = "__rand_int__";
    let keys = seckill_domain::scripts::buy_contract::Keys::at(&k, rand).into_vec();
    // user, purchase token, home hash, order id, no credit, 0 credited units.
    let args = ["__rand_int__", "t", "__rand_int__", "__rand_int__", "", "0"];
    let numkeys = keys.len().to_string();
    let mut command = vec!["EVALSHA", script.sha, &numkeys];
    command.extend(keys.iter().map(String::as_str));
    command.extend(args);
    let rps = redis_benchmark(
        redis,
        &["-n", &requests.to_string(), "-r", &keyspace.to_string()],
        &command,
    )?;
    let bought: u64 = redis::cmd("XLEN").arg(k.queue()).query(&mut conn)?;
    Ok(BuyScriptRun {
        rps,
        bought,
        requests,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-q` rewrites its progress line in place with carriage returns; the last figure wins.
    #[test]
    fn last_rps_reads_the_final_report() {
        let out = "EVALSHA abc: rps=80000.0 (overall: 79000.0) avg_msec=0.5\r\
                   EVALSHA abc 1 bench:stock: 95102.00 requests per second, p50=0.263 msec\n";
        assert_eq!(last_rps(out), "95102.00");
    }

    #[test]
    fn last_rps_without_figure_is_the_output() {
        assert_eq!(
            last_rps("  Could not connect to Redis at 127.0.0.1:1\n"),
            "Could not connect to Redis at 127.0.0.1:1"
        );
    }
}
