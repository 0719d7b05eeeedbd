//! The `scale` part: a sale of three SKUs (one event each), first with every event on one Redis
//! node, then over three independent nodes, one event per node (`redis_url` lists them;
//! `crates/domain/src/nodes.rs` places events). Buyers alternate between the SKUs. The note
//! gives each node's share of the buy scripts, from `INFO commandstats`, and its CPU.

use std::sync::Arc;

use anyhow::Result;
use seckill_testkit::{PgServer, RedisServer};

use crate::Args;
use crate::fixture::{Buyer, open_event, prepare_buyers};
use crate::load::{Call, Calls, closed_loop};
use crate::measure::reset_stats;
use crate::server::HostProcess;
use crate::table::Row;

/// The SKUs on sale.
const SKUS: usize = 3;

/// The scale-out rows: the sale on one node, then on three.
pub async fn rows(first: &RedisServer, pg: &PgServer, args: &Args) -> Result<Vec<Row>> {
    let more = [RedisServer::start()?, RedisServer::start()?];
    let all = [first, &more[0], &more[1]];
    let one_node = sale_over(&all[..1], pg, args).await?;
    let mut three_nodes = sale_over(&all, pg, args).await?;
    three_nodes.add_note(&format!(
        "{:.2}× one node;",
        three_nodes.rps() / one_node.rps()
    ));
    Ok(vec![one_node, three_nodes])
}

/// The three-SKU sale with its events spread over `nodes` (`nodes[0]` is the suite's Redis).
async fn sale_over(nodes: &[&RedisServer], pg: &PgServer, args: &Args) -> Result<Row> {
    let n = nodes.len();
    let buyers = interleave(&buyers_over(nodes, args)?, SKUS);
    let mut vars = seckill_testkit::app_vars(nodes[0], pg);
    seckill_testkit::over_nodes(&mut vars, nodes);
    let host = HostProcess::start("spin.toml", &vars, false)?;
    for node in nodes {
        reset_stats(node)?;
    }
    let cpu_before: Vec<f64> = nodes.iter().map(|r| redis_cpu(r)).collect::<Result<_>>()?;
    let calls: Calls = Arc::new(move |i: u64| {
        let (path, b) = buyers.get(i as usize)?;
        Some(Call::buy(path, &b.jwt, &b.token))
    });
    let report = closed_loop(host.addr, args.connections, args.duration(), calls).await?;
    let scripts: Vec<u64> = nodes
        .iter()
        .map(|r| r.take_script_calls().map(|(sha, eval)| sha + eval))
        .collect::<Result<_>>()?;
    let cpu: Vec<f64> = nodes
        .iter()
        .zip(&cpu_before)
        .map(|(r, before)| Ok(redis_cpu(r)? - before))
        .collect::<Result<_>>()?;
    let note = per_node_note(&scripts, &cpu, report.elapsed.as_secs_f64());
    Ok(Row::measured(
        format!("scale-out: 3-SKU sale, buy end to end, {n} Redis node(s)"),
        report,
        note,
    ))
}

/// The SKUs' events, placed over `nodes`, and `args.users / 3` buyers for each, SKU after SKU:
/// (buy path, buyer).
fn buyers_over(nodes: &[&RedisServer], args: &Args) -> Result<Vec<(String, Buyer)>> {
    let n = nodes.len();
    // On one node all three events land there; on three, one per node.
    let placed = seckill_testkit::events_per_node(&format!("sku{n}x"), nodes, SKUS / n);
    let mut buyers = Vec::new();
    for (at, ids) in placed.iter().enumerate() {
        for id in ids {
            let event = open_event(nodes[at], id, 10_000_000)?;
            let path = format!("/api/events/{id}/buy");
            let users = args.users / SKUS;
            for b in prepare_buyers(nodes[at], &event, users, &format!("{id}u"))? {
                buyers.push((path.clone(), b));
            }
        }
    }
    Ok(buyers)
}

/// `items` as `ways` equal runs one after the other, dealt out in turn: item i of the result
/// is item i / ways of run i % ways (what is left past the last whole round is dropped).
fn interleave<T: Clone>(items: &[T], ways: usize) -> Vec<T> {
    let per = items.len() / ways;
    (0..per * ways)
        .map(|i| items[(i % ways) * per + i / ways].clone())
        .collect()
}

/// Each node's share of the buy scripts (`scripts`: calls per node) and the cores it used
/// (`cpu`: CPU seconds per node over `elapsed` seconds).
fn per_node_note(scripts: &[u64], cpu: &[f64], elapsed: f64) -> String {
    let total = scripts.iter().sum::<u64>().max(1);
    let shares: Vec<String> = scripts
        .iter()
        .map(|c| format!("{:.1}%", *c as f64 * 100.0 / total as f64))
        .collect();
    let cores: Vec<String> = cpu.iter().map(|c| format!("{:.2}", c / elapsed)).collect();
    format!(
        "buy scripts per node: {}; Redis CPU per node: {} cores;",
        shares.join(" / "),
        cores.join(" / ")
    )
}

/// CPU seconds the Redis server has used (`INFO cpu`, user + system).
fn redis_cpu(redis: &RedisServer) -> Result<f64> {
    let mut conn = redis.client().get_connection()?;
    let info: String = redis::cmd("INFO").arg("cpu").query(&mut conn)?;
    Ok(info
        .lines()
        .filter_map(|l| {
            l.strip_prefix("used_cpu_sys:")
                .or(l.strip_prefix("used_cpu_user:"))
        })
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three SKUs' buyers, SKU after SKU, come out alternating.
    #[test]
    fn interleave_alternates_the_runs() {
        let items = ["a0", "a1", "b0", "b1", "c0", "c1"];
        assert_eq!(interleave(&items, 3), ["a0", "b0", "c0", "a1", "b1", "c1"]);
    }

    #[test]
    fn interleave_drops_the_incomplete_round() {
        assert_eq!(interleave(&[1, 2, 3, 4, 5, 6, 7], 3), [1, 3, 5, 2, 4, 6]);
    }

    #[test]
    fn per_node_note_gives_shares_and_cores() {
        let note = per_node_note(&[500, 300, 200], &[1.0, 0.6, 0.2], 2.0);
        assert_eq!(
            note,
            "buy scripts per node: 50.0% / 30.0% / 20.0%; Redis CPU per node: 0.50 / 0.30 / 0.10 cores;"
        );
    }

    #[test]
    fn per_node_note_without_calls_is_zero_percent() {
        let note = per_node_note(&[0], &[0.0], 1.0);
        assert_eq!(
            note,
            "buy scripts per node: 0.0%; Redis CPU per node: 0.00 cores;"
        );
    }
}
