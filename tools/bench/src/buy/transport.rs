//! The same buy over each way of reaching Redis, in one run: a new TCP connection per request
//! (what real Spin does), `rediss://` pooled and with a new TLS connection per request (real
//! Spin against a managed Redis), and the Upstash REST transport over the host's pooled HTTP
//! (a REST facade in this process in front of the same `redis-server`: on a 2-core machine it
//! takes CPU from the host, where a real Upstash would not).

use anyhow::Result;
use seckill_testkit::rest_facade::RestFacade;
use seckill_testkit::{RedisServer, TestCa};

use crate::measure::fresh_buy_row;
use crate::options::SuiteArgs;
use crate::server::{HostProcess, point_redis_at};
use crate::table::Row;

/// The transport rows; `pooled` is the pooled plain buy's (req/s, host CPU µs per request).
pub async fn rows(
    redis: &RedisServer,
    ca: &TestCa,
    vars: &[(&'static str, String)],
    pooled: (f64, f64),
    args: &SuiteArgs,
) -> Result<Vec<Row>> {
    let faithful = HostProcess::start("spin.toml", vars, true)?;
    let name = "buy end to end, Spin-faithful (new TCP connection per request)";
    let mut rows = vec![compared(&faithful, name, "faithful", redis, pooled.0, args).await?];
    drop(faithful);

    let mut tls_vars = vars.to_vec();
    let tls_origin = format!("rediss://localhost:{}", redis.tls_port.unwrap_or_default());
    point_redis_at(&mut tls_vars, redis.tls_url("localhost"), tls_origin);
    let mut tls_new_rps = 0.0;
    for (faithful, id, name) in [
        (false, "tls-pooled", "buy over TLS (pooled connection)"),
        (
            true,
            "tls-new",
            "buy over TLS, Spin-faithful (new TLS connection per request)",
        ),
    ] {
        let host = HostProcess::start_trusting(&tls_vars, faithful, &ca.path("ca.pem"))?;
        let row = compared(&host, name, id, redis, pooled.0, args).await?;
        tls_new_rps = row.rps();
        rows.push(row);
    }

    for tls in [false, true] {
        rows.push(rest_row(tls, redis, ca, vars, pooled, tls_new_rps, args).await?);
    }
    Ok(rows)
}

/// The buy on `host`, on a new event `id`, compared with the pooled plain buy.
async fn compared(
    host: &HostProcess,
    name: &str,
    id: &str,
    redis: &RedisServer,
    pooled_rps: f64,
    args: &SuiteArgs,
) -> Result<Row> {
    let (mut row, _) = host
        .measured(fresh_buy_row(name, host.addr, redis, id, args))
        .await?;
    row.add_note(&format!("{:.2}× pooled plain buy;", row.rps() / pooled_rps));
    Ok(row)
}

/// The buy over Upstash REST, through a facade in this process: over plain HTTP (a manifest
/// that also allows `http://` to the Redis host) or HTTPS (the product manifest).
async fn rest_row(
    tls: bool,
    redis: &RedisServer,
    ca: &TestCa,
    vars: &[(&'static str, String)],
    pooled: (f64, f64),
    tls_new_rps: f64,
    args: &SuiteArgs,
) -> Result<Row> {
    let facade = match tls {
        true => RestFacade::start(&redis.url(), ca, "bench-token").await?,
        false => RestFacade::start_plain(&redis.url(), "bench-token").await?,
    };
    let mut rest = vars.to_vec();
    point_redis_at(&mut rest, facade.url(), facade.origin());
    let (host, name, id) = match tls {
        true => (
            HostProcess::start_trusting(&rest, false, &ca.path("ca.pem"))?,
            "buy over Upstash REST (pooled HTTPS, facade in-process)",
            "rest-tls",
        ),
        false => (
            HostProcess::start("spin.toml", &rest, false)?,
            "buy over Upstash REST (pooled plain HTTP, facade in-process)",
            "rest",
        ),
    };
    let (mut row, cpu) = host
        .measured(fresh_buy_row(name, host.addr, redis, id, args))
        .await?;
    let rest = (row.rps(), cpu);
    row.add_note(&rest_note(rest, pooled, tls_new_rps, facade.connections()));
    Ok(row)
}

/// The REST row's comparisons, from (req/s, host CPU µs per request) of the REST and the pooled
/// plain buy. The facade stands in for Upstash's servers but runs in the generator's process
/// (its CPU is in the "gen CPU" column): the host's CPU per buy is what the transport costs the
/// app itself, and its inverse ratio the capacity the app keeps.
fn rest_note(
    (rps, cpu): (f64, f64),
    (pooled_rps, pooled_cpu): (f64, f64),
    tls_new_rps: f64,
    connections: u64,
) -> String {
    format!(
        "{:.2}× pooled plain buy, {:.2}× new TLS connection per request; host CPU per \
         buy {:.2}× the pooled plain buy's (capacity {:.2}×); {connections} connections;",
        rps / pooled_rps,
        rps / tls_new_rps.max(1.0),
        cpu / pooled_cpu.max(1.0),
        pooled_cpu / cpu.max(1.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A REST buy that costs the host 1.5× the CPU of a pooled plain one leaves it 2/3 of its
    /// capacity.
    #[test]
    fn rest_note_compares_throughput_and_host_cpu() {
        let note = rest_note((3_000.0, 120.0), (5_000.0, 80.0), 1_500.0, 4);
        assert_eq!(
            note,
            "0.60× pooled plain buy, 2.00× new TLS connection per request; host CPU per buy \
             1.50× the pooled plain buy's (capacity 0.67×); 4 connections;"
        );
    }

    /// A row that measured nothing (0 req/s, 0 µs) divides by 1, not by 0.
    #[test]
    fn rest_note_guards_against_empty_rows() {
        let note = rest_note((3_000.0, 0.0), (5_000.0, 0.0), 0.0, 1);
        assert!(note.contains("3000.00× new TLS connection"), "{note}");
        assert!(note.contains("host CPU per buy 0.00×"), "{note}");
        assert!(note.contains("(capacity 0.00×)"), "{note}");
    }
}
