//! `seckill-bench`: the benchmark suite. Every row is measured in the same run on this machine:
//! raw Redis, the host serving a trivial component, and the sale's endpoints end to end. It
//! prints a table; nothing here asserts (that is the tests' job).

mod demo;
mod load;
mod native;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Parser;
use load::{Call, Report, closed_loop, once, open_loop};
use seckill_native::NativeStore;
use seckill_domain::event::{EventConfig, EventId};
use seckill_domain::{admin, auth, sale};
use seckill_testkit::rest_facade::RestFacade;
use seckill_testkit::{PgServer, RedisServer, TestCa, free_port, jwt_for, repo_root};
use serde_json::json;

/// seckill's benchmarks and the simulated sale.
#[derive(Parser)]
enum Cli {
    /// The benchmark suite: a table of figures measured in one run.
    Suite(Args),
    /// A simulated sale end to end, with a report and a chart.
    Demo(demo::DemoArgs),
    /// The native baseline server (started by `suite`).
    NativeServe(native::NativeArgs),
}

/// Settings of the benchmark suite.
#[derive(clap::Args)]
struct Args {
    /// Seconds per row.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Buyers prepared for the buy rows (each buys once).
    #[arg(long, default_value_t = 60_000)]
    users: usize,
    /// Orders in the drain backlog.
    #[arg(long, default_value_t = 200_000)]
    backlog: usize,
    /// `wasmtime` (wasmtime-cli 48.0.8) for the outside reference row; `scripts/bench.sh`
    /// installs it there on demand. The row is left empty when it is missing.
    #[arg(long, default_value = ".data/tools/bin/wasmtime")]
    wasmtime: std::path::PathBuf,
    /// Run a part only: `hello`, `buy` (hello, time and buy), `drain` or `scale` (the same
    /// three-SKU sale on one Redis node, then on three).
    #[arg(long)]
    only: Option<String>,
}

/// A server process of the suite's own (the host, or the native baseline), killed on drop.
struct ServerProcess {
    child: Child,
    addr: SocketAddr,
}

/// The host under test.
type HostProcess = ServerProcess;

impl ServerProcess {
    /// Spawns `cmd`, which must listen on `addr`, and waits until it accepts connections.
    fn spawn(mut cmd: Command, addr: SocketAddr) -> Result<Self> {
        let child = cmd
            .spawn()
            .with_context(|| format!("start {cmd:?} (build it first)"))?;
        let server = ServerProcess { child, addr };
        for _ in 0..400 {
            if std::net::TcpStream::connect(addr).is_ok() {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        bail!("{cmd:?} did not start listening on {addr}")
    }

    /// CPU seconds this server has used so far.
    fn cpu_seconds(&self) -> f64 {
        load::cpu_seconds_of(&self.child.id().to_string())
    }

    /// Runs `row` against this server; notes the server's CPU per request (what a buy costs
    /// the host itself, whatever else shares the machine) and returns it in µs.
    async fn measured(&self, row: impl Future<Output = Result<Row>>) -> Result<(Row, f64)> {
        let before = self.cpu_seconds();
        let mut row = row.await?;
        let requests = row.report.as_ref().map_or(0, |r| r.requests).max(1);
        let per_request = (self.cpu_seconds() - before) / requests as f64 * 1e6;
        row.note = format!("{} host CPU {per_request:.0} µs/req;", row.note);
        Ok((row, per_request))
    }

    fn start(manifest: &str, vars: &[(&str, String)], faithful: bool) -> Result<Self> {
        Self::start_app(manifest, vars, faithful, false)
    }

    /// Starts the host trusting the CA in `tls_ca` (`--tls-ca`), for the TLS rows.
    fn start_trusting(vars: &[(&str, String)], faithful: bool, tls_ca: &str) -> Result<Self> {
        Self::launch("spin.toml", vars, faithful, false, &["--tls-ca", tls_ca])
    }

    /// Starts `seckill-host up`, with its cron triggers when `cron` is set.
    fn start_app(
        manifest: &str,
        vars: &[(&str, String)],
        faithful: bool,
        cron: bool,
    ) -> Result<Self> {
        Self::launch(manifest, vars, faithful, cron, &[])
    }

    fn launch(
        manifest: &str,
        vars: &[(&str, String)],
        faithful: bool,
        cron: bool,
        extra: &[&str],
    ) -> Result<Self> {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
        let mut cmd = Command::new(repo_root().join("target/release/seckill-host"));
        cmd.args(["up", "--listen", &addr.to_string(), "--manifest"])
            .arg(repo_root().join(manifest))
            .env("RUST_LOG", "error")
            .stdout(Stdio::null());
        if faithful {
            cmd.arg("--spin-faithful");
        }
        if !cron {
            cmd.arg("--no-cron");
        }
        cmd.args(extra);
        for (k, v) in vars {
            cmd.env(format!("SPIN_VARIABLE_{}", k.to_ascii_uppercase()), v);
        }
        Self::spawn(cmd, addr)
    }

    /// Starts the native baseline (`seckill-bench native-serve`).
    fn start_native(redis: &RedisServer) -> Result<Self> {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.args([
            "native-serve",
            "--listen",
            &addr.to_string(),
            "--redis-url",
            &redis.url(),
        ])
        .args(["--jwt-secret", seckill_testkit::JWT_SECRET]);
        Self::spawn(cmd, addr)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One line of the table.
struct Row {
    name: String,
    report: Option<Report>,
    note: String,
}

fn print_table(rows: &[Row]) {
    println!();
    println!("| row | req/s | p50 ms | p95 ms | p99 ms | gen CPU | note |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    for r in rows {
        match &r.report {
            Some(rep) => println!(
                "| {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0}% | {} {:?} |",
                r.name,
                rep.rps(),
                rep.p50.as_secs_f64() * 1e3,
                rep.p95.as_secs_f64() * 1e3,
                rep.p99.as_secs_f64() * 1e3,
                rep.cpu_seconds / rep.elapsed.as_secs_f64() * 100.0,
                r.note,
                rep.statuses
            ),
            None => println!("| {} | | | | | | {} |", r.name, r.note),
        }
    }
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
    let text = String::from_utf8_lossy(&out.stdout);
    // The last report line reads "EVALSHA ...: 95102.00 requests per second, p50=…".
    Ok(text
        .split_whitespace()
        .zip(text.split_whitespace().skip(1))
        .filter(|(_, next)| *next == "requests")
        .last()
        .map(|(n, _)| {
            n.trim_start_matches(|c: char| !c.is_ascii_digit())
                .to_owned()
        })
        .unwrap_or_else(|| text.trim().to_owned()))
}

/// `redis-benchmark` of EVALSHA on a one-key decrement script.
fn redis_benchmark_evalsha(redis: &RedisServer) -> Result<Row> {
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
    Ok(Row {
        name: "raw Redis: redis-benchmark EVALSHA 1-key decrement (50 clients)".into(),
        report: None,
        note: format!("{rps} req/s"),
    })
}

/// `redis-benchmark` of EVALSHA on `shared/lua/buy.lua` itself, with the keys and arguments
/// `sale::buy` sends. redis-benchmark draws every `__rand_int__` independently, so the user and
/// the purchase-token key are two random ids: every token key of the keyspace holds the same
/// token, and a buy that meets a user or token already used takes the short refusal path (the
/// note says how many did the whole purchase).
fn redis_benchmark_buy_script(redis: &RedisServer) -> Result<Row> {
    const KEYSPACE: u64 = 2_000_000;
    const REQUESTS: u64 = 100_000;
    let event = open_event(redis, "rawbuy", 10_000_000)?;
    let k = seckill_domain::keys::EventKeys::new(&event);
    let mut conn = redis.client().get_connection()?;
    for chunk in (0..KEYSPACE).collect::<Vec<_>>().chunks(20_000) {
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
    let keys = seckill_domain::scripts::buy::keys(&k, rand);
    let args = ["__rand_int__", "t", "__rand_int__", "__rand_int__"];
    let numkeys = keys.len().to_string();
    let mut command = vec!["EVALSHA", script.sha, &numkeys];
    command.extend(keys.iter().map(String::as_str));
    command.extend(args);
    let rps = redis_benchmark(
        redis,
        &["-n", &REQUESTS.to_string(), "-r", &KEYSPACE.to_string()],
        &command,
    )?;
    let bought: u64 = redis::cmd("XLEN").arg(k.queue()).query(&mut conn)?;
    Ok(Row {
        name: "raw Redis: redis-benchmark EVALSHA of buy.lua (50 clients)".into(),
        report: None,
        note: format!(
            "{rps} req/s; {bought} of {REQUESTS} took the whole purchase path, the rest met a used user or token"
        ),
    })
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

fn reset_stats(redis: &RedisServer) -> Result<()> {
    redis.take_script_calls().map(drop)
}

/// Buyers with purchase tokens, prepared natively (admission + precheck straight on Redis).
fn prepare_buyers(
    redis: &RedisServer,
    event: &EventId,
    users: usize,
    prefix: &str,
) -> Result<Vec<(String, String, String)>> {
    let store = NativeStore::new(redis.client().get_connection()?);
    let secret = seckill_testkit::ADMISSION_SECRET.as_bytes();
    (0..users)
        .map(|i| {
            let user = format!("{prefix}{i}");
            sale::issue_token(&store, event, &user, secret).map_err(|e| anyhow::anyhow!("{e}"))?;
            let adm = auth::admission_token(secret, event.as_str(), &user);
            let token = sale::precheck(&store, event, &user, "127.0.0.1", &adm, secret)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok((jwt_for(&user), user, token.purchase_token))
        })
        .collect()
}

fn open_event(redis: &RedisServer, id: &str, stock: u64) -> Result<EventId> {
    let store = NativeStore::new(redis.client().get_connection()?);
    let event = EventId::parse(id).map_err(|e| anyhow::anyhow!("{e}"))?;
    let now = seckill_domain::clock::now_ms();
    let config: EventConfig = serde_json::from_value(json!({
        "sku": "bench", "stock": stock, "shards": 8, "start_ms": now - 1000, "end_ms": now + 3_600_000,
        "user_rate": 0, "admission_multiplier": 10,
    }))?;
    admin::upsert_event(&store, &event, &config).map_err(|e| anyhow::anyhow!("{e}"))?;
    admin::warm_up(&store, &event).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(event)
}

/// A closed-loop row for one endpoint, with the Redis scripts it ran per request
/// (`INFO commandstats`: EVALSHA calls per request; EVAL only after NOSCRIPT).
async fn endpoint_row(
    name: &str,
    addr: SocketAddr,
    redis: &RedisServer,
    args: &Args,
    calls: Arc<dyn Fn(u64) -> Option<Call> + Send + Sync>,
) -> Result<Row> {
    reset_stats(redis)?;
    let report = closed_loop(
        addr,
        args.connections,
        Duration::from_secs(args.seconds),
        calls,
    )
    .await?;
    let (evalsha, eval) = redis.take_script_calls()?;
    let note = format!(
        "Redis scripts per request: {:.3} EVALSHA, {eval} EVAL in all;",
        evalsha as f64 / report.requests.max(1) as f64
    );
    Ok(Row {
        name: name.into(),
        report: Some(report),
        note,
    })
}

/// The buy row: each prepared buyer buys once.
async fn buy_row(
    name: &str,
    addr: SocketAddr,
    redis: &RedisServer,
    buyers: Vec<(String, String, String)>,
    event: &EventId,
    args: &Args,
) -> Result<Row> {
    let path = format!("/api/events/{}/buy", event.as_str());
    let calls = Arc::new(move |i: u64| {
        let (jwt, _, token) = buyers.get(i as usize)?;
        Some(Call::buy(&path, jwt, token))
    });
    endpoint_row(name, addr, redis, args, calls).await
}

/// The buy row on a new event `id` of its own, with `args.users` buyers prepared for it.
async fn fresh_buy_row(
    name: &str,
    addr: SocketAddr,
    redis: &RedisServer,
    id: &str,
    args: &Args,
) -> Result<Row> {
    let event = open_event(redis, id, 10_000_000)?;
    let buyers = prepare_buyers(redis, &event, args.users, id)?;
    buy_row(name, addr, redis, buyers, &event, args).await
}

/// `wasmtime serve -O pooling-allocator` serving the same hello component: the outside
/// reference for the host's own speed.
async fn wasmtime_serve_hello(args: &Args, hello_rps: f64) -> Result<Row> {
    let name = "wasmtime serve -O pooling-allocator (48.0.8): hello component";
    let wasmtime = repo_root().join(&args.wasmtime);
    let version = Command::new(&wasmtime).arg("--version").output();
    let Ok(version) = version else {
        return Ok(Row {
            name: name.into(),
            report: None,
            note: format!(
                "{} not found: scripts/bench.sh installs it",
                wasmtime.display()
            ),
        });
    };
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
    let mut cmd = Command::new(&wasmtime);
    cmd.args(["serve", "-O", "pooling-allocator", "-S", "cli", "--addr"])
        .arg(addr.to_string())
        .arg(repo_root().join("target/wasm32-wasip2/release/hello.wasm"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let server = ServerProcess::spawn(cmd, addr)?;
    let report = closed_loop(
        server.addr,
        args.connections,
        Duration::from_secs(args.seconds),
        Arc::new(|_| Some(Call::get("/hello", None))),
    )
    .await?;
    let note = format!(
        "{}; our host = {:.2}× this;",
        String::from_utf8_lossy(&version.stdout).trim(),
        hello_rps / report.rps()
    );
    Ok(Row {
        name: name.into(),
        report: Some(report),
        note,
    })
}

/// The scale-out run: a sale of three SKUs (one event each), first with every event on one
/// Redis node, then over three independent nodes, one event per node (`redis_url` lists them;
/// `crates/domain/src/nodes.rs` places events). Buyers alternate between the SKUs. The note gives each
/// node's share of the buy scripts, from `INFO commandstats`.
async fn scale_out(first: &RedisServer, pg: &PgServer, args: &Args) -> Result<Vec<Row>> {
    let more = [RedisServer::start()?, RedisServer::start()?];
    let all = [first, &more[0], &more[1]];
    let mut rows = Vec::new();
    let mut one_node_rps = 0.0;
    for n in [1, 3] {
        let nodes = &all[..n];
        // Three events: on one node all land there; on three, one per node.
        let placed = seckill_testkit::events_per_node(&format!("sku{n}x"), nodes, 3 / n);
        let mut buyers = Vec::new();
        for (at, ids) in placed.iter().enumerate() {
            for id in ids {
                let event = open_event(nodes[at], id, 10_000_000)?;
                let path = format!("/api/events/{id}/buy");
                for (jwt, _, token) in
                    prepare_buyers(nodes[at], &event, args.users / 3, &format!("{id}u"))?
                {
                    buyers.push((path.clone(), jwt, token));
                }
            }
        }
        // Interleave the SKUs: buyer i buys SKU i % 3.
        let per = buyers.len() / 3;
        let buyers: Arc<Vec<_>> = Arc::new(
            (0..per * 3)
                .map(|i| buyers[(i % 3) * per + i / 3].clone())
                .collect(),
        );
        let mut vars = seckill_testkit::app_vars(first, pg);
        seckill_testkit::over_nodes(&mut vars, nodes);
        let host = HostProcess::start("spin.toml", &vars, false)?;
        for node in nodes {
            reset_stats(node)?;
        }
        let cpu_before: Vec<f64> = nodes.iter().map(|r| redis_cpu(r)).collect::<Result<_>>()?;
        let report = closed_loop(
            host.addr,
            args.connections,
            Duration::from_secs(args.seconds),
            Arc::new(move |i: u64| {
                let (path, jwt, token) = buyers.get(i as usize)?;
                Some(Call::buy(path, jwt, token))
            }),
        )
        .await?;
        let calls: Vec<u64> = nodes
            .iter()
            .map(|r| r.take_script_calls().map(|(sha, eval)| sha + eval))
            .collect::<Result<_>>()?;
        let cores: Vec<String> = nodes
            .iter()
            .zip(&cpu_before)
            .map(|(r, before)| {
                Ok(format!(
                    "{:.2}",
                    (redis_cpu(r)? - before) / report.elapsed.as_secs_f64()
                ))
            })
            .collect::<Result<_>>()?;
        let total: u64 = calls.iter().sum::<u64>().max(1);
        let shares: Vec<String> = calls
            .iter()
            .map(|c| format!("{:.1}%", *c as f64 * 100.0 / total as f64))
            .collect();
        let rps = report.rps();
        let vs = if n == 1 {
            one_node_rps = rps;
            String::new()
        } else {
            format!(" {:.2}× one node;", rps / one_node_rps)
        };
        rows.push(Row {
            name: format!("scale-out: 3-SKU sale, buy end to end, {n} Redis node(s)"),
            report: Some(report),
            note: format!(
                "buy scripts per node: {}; Redis CPU per node: {} cores;{vs}",
                shares.join(" / "),
                cores.join(" / ")
            ),
        });
    }
    Ok(rows)
}

/// The buy at a fixed arrival rate (open loop): the latency buyers see when the host is not
/// saturated.
async fn half_peak_buy(
    addr: SocketAddr,
    redis: &RedisServer,
    rate: f64,
    args: &Args,
) -> Result<Row> {
    let event = open_event(redis, "halfpeak", 10_000_000)?;
    let n = (rate * args.seconds as f64) as usize + 1;
    let buyers = Arc::new(prepare_buyers(redis, &event, n, "h")?);
    let path = format!("/api/events/{}/buy", event.as_str());
    let report = open_loop(
        addr,
        args.connections * 2,
        rate,
        Duration::from_secs(args.seconds),
        Arc::new(move |i: u64| {
            let (jwt, _, token) = buyers.get(i as usize)?;
            Some(Call::buy(&path, jwt, token))
        }),
    )
    .await?;
    Ok(Row {
        name: format!("buy at half of peak, open loop ({rate:.0} arrivals/s)"),
        report: Some(report),
        note: "latency from each request's due time;".into(),
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse() {
        Cli::Suite(args) => suite(args).await,
        Cli::Demo(args) => demo::run(args).await,
        Cli::NativeServe(args) => native::serve(args).await,
    }
}

/// The same buy over each way of reaching Redis, in one run: a new TCP connection per request
/// (what real Spin does), `rediss://` pooled and with a new TLS connection per request (real
/// Spin against a managed Redis), and the Upstash REST transport over the host's pooled HTTPS
/// (a REST facade in this process in front of the same `redis-server`: on a 2-core machine it
/// takes CPU from the host, where a real Upstash would not).
/// `spin.toml` that also lets the functions reach the Redis host over plain `http://`, for the
/// plain REST row only.
fn plain_http_manifest() -> Result<String> {
    seckill_testkit::derived_manifest(
        "spin.rest-plain.toml",
        &[(
            "\"https://{{ redis_host }}\"",
            "\"https://{{ redis_host }}\", \"http://{{ redis_host }}\"",
        )],
    )
}

async fn transport_buy_rows(
    redis: &RedisServer,
    ca: &TestCa,
    vars: &[(&'static str, String)],
    (pooled_rps, pooled_cpu): (f64, f64),
    args: &Args,
) -> Result<Vec<Row>> {
    let plain = vars.to_vec();
    // The same, reaching Redis over its TLS port.
    let mut vars = vars.to_vec();
    for (k, v) in vars.iter_mut() {
        match *k {
            "redis_url" => *v = redis.tls_url("localhost"),
            "redis_host" => *v = format!("localhost:{}", redis.tls_port.unwrap_or_default()),
            _ => {}
        }
    }
    let mut rows = Vec::new();
    let faithful = HostProcess::start("spin.toml", &plain, true)?;
    let (mut row, _) = faithful
        .measured(fresh_buy_row(
            "buy end to end, Spin-faithful (new TCP connection per request)",
            faithful.addr,
            redis,
            "faithful",
            args,
        ))
        .await?;
    let tcp_rps = row.report.as_ref().map_or(0.0, Report::rps);
    row.note = format!(
        "{} {:.2}× pooled plain buy;",
        row.note,
        tcp_rps / pooled_rps
    );
    rows.push(row);
    drop(faithful);
    let mut tls_new_rps = 0.0;
    for (faithful, id, name) in [
        (false, "tls-pooled", "buy over TLS (pooled connection)"),
        (
            true,
            "tls-new",
            "buy over TLS, Spin-faithful (new TLS connection per request)",
        ),
    ] {
        let host = HostProcess::start_trusting(&vars, faithful, &ca.path("ca.pem"))?;
        let (mut row, _) = host
            .measured(fresh_buy_row(name, host.addr, redis, id, args))
            .await?;
        let rps = row.report.as_ref().map_or(0.0, Report::rps);
        row.note = format!("{} {:.2}× pooled plain buy;", row.note, rps / pooled_rps);
        rows.push(row);
        tls_new_rps = rps;
    }
    // Upstash REST over the host's pooled HTTP: plain (a bench manifest that allows http:// to
    // the Redis host) and HTTPS (the product manifest).
    for tls in [false, true] {
        let facade = match tls {
            true => RestFacade::start(&redis.url(), ca, "bench-token").await?,
            false => RestFacade::start_plain(&redis.url(), "bench-token").await?,
        };
        let mut rest = plain.clone();
        for (k, v) in rest.iter_mut() {
            match *k {
                "redis_url" => *v = facade.url(),
                "redis_host" => *v = facade.host(),
                _ => {}
            }
        }
        let host = match tls {
            true => HostProcess::start_trusting(&rest, false, &ca.path("ca.pem"))?,
            false => HostProcess::start(&plain_http_manifest()?, &rest, false)?,
        };
        let name = match tls {
            true => "buy over Upstash REST (pooled HTTPS, facade in-process)",
            false => "buy over Upstash REST (pooled plain HTTP, facade in-process)",
        };
        let (mut row, cpu) = host
            .measured(fresh_buy_row(
                name,
                host.addr,
                redis,
                if tls { "rest-tls" } else { "rest" },
                args,
            ))
            .await?;
        let rps = row.report.as_ref().map_or(0.0, Report::rps);
        // The facade stands in for Upstash's servers but runs in the generator's process (its
        // CPU is in the "gen CPU" column): the host's CPU per buy is what the transport costs
        // the app itself, and its inverse ratio the capacity the app keeps.
        row.note = format!(
            "{} {:.2}× pooled plain buy, {:.2}× new TLS connection per request; host CPU per \
             buy {:.2}× the pooled plain buy's (capacity {:.2}×); {} connections;",
            row.note,
            rps / pooled_rps,
            rps / tls_new_rps.max(1.0),
            cpu / pooled_cpu.max(1.0),
            pooled_cpu / cpu.max(1.0),
            facade.connections()
        );
        rows.push(row);
    }
    Ok(rows)
}

async fn suite(args: Args) -> Result<()> {
    // Plain TCP for every row, and a TLS port beside it for the TLS rows.
    let ca = TestCa::new()?;
    let redis = RedisServer::start_tls(&ca)?;
    let pg = PgServer::start()?;
    let vars = seckill_testkit::app_vars(&redis, &pg);
    if args.only.as_deref() == Some("scale") {
        print_table(&scale_out(&redis, &pg, &args).await?);
        return Ok(());
    }
    if args.only.as_deref() == Some("drain") {
        print_table(&[drain_backlog(&redis, &pg, &vars, args.backlog).await?]);
        return Ok(());
    }
    let mut conformance_vars = vec![("redis_host", redis.host()), ("pg_host", pg.host())];
    conformance_vars.push(("present", "x".into()));
    // The drain first: later rows leave orders of their own behind.
    let drain = match args.only {
        None => Some(drain_backlog(&redis, &pg, &vars, args.backlog).await?),
        Some(_) => None,
    };
    let mut rows = vec![
        redis_benchmark_evalsha(&redis)?,
        redis_benchmark_buy_script(&redis)?,
    ];
    eprintln!("{}\n{}", rows[0].note, rows[1].note);
    let dur = Duration::from_secs(args.seconds);

    let hello = HostProcess::start("tests/manifests/conformance.toml", &conformance_vars, false)?;
    let report = closed_loop(
        hello.addr,
        args.connections,
        dur,
        Arc::new(|_| Some(Call::get("/hello", None))),
    )
    .await?;
    let hello_rps = report.rps();
    rows.push(Row {
        name: "host: hello component".into(),
        report: Some(report),
        note: String::new(),
    });
    drop(hello);
    rows.push(wasmtime_serve_hello(&args, hello_rps).await?);
    if args.only.as_deref() == Some("hello") {
        // (`--only buy` goes on to the buy row.)
        print_table(&rows);
        return Ok(());
    }

    let host = HostProcess::start("spin.toml", &vars, false)?;
    let report = closed_loop(
        host.addr,
        args.connections,
        dur,
        Arc::new(|_| Some(Call::get("/api/time", None))),
    )
    .await?;
    rows.push(Row {
        name: "host: GET /api/time".into(),
        report: Some(report),
        note: String::new(),
    });

    let event = open_event(&redis, "bench", 10_000_000)?;
    eprintln!("preparing {} buyers…", args.users);
    let buyers = prepare_buyers(&redis, &event, args.users, "b")?;
    let (mut row, buy_cpu) = host
        .measured(buy_row(
            "buy end to end (pooled Redis connection)",
            host.addr,
            &redis,
            buyers.clone(),
            &event,
            &args,
        ))
        .await?;
    let buy_rps = row.report.as_ref().map_or(0.0, Report::rps);
    let bought = row.report.as_ref().map_or(0, |r| r.requests) as usize;
    row.note = format!("{} {:.2}× hello;", row.note, buy_rps / hello_rps);
    rows.push(row);
    rows.push(half_peak_buy(host.addr, &redis, buy_rps / 2.0, &args).await?);
    rows.extend(transport_buy_rows(&redis, &ca, &vars, (buy_rps, buy_cpu), &args).await?);
    if args.only.as_deref() == Some("buy") {
        print_table(&rows);
        return Ok(());
    }

    // Poll for the buyers who bought.
    let buyers = Arc::new(buyers);
    let path = format!("/api/events/{}/orders/me", event.as_str());
    let poll = Arc::new(move |i: u64| {
        let (jwt, _, _) = &buyers[(i as usize) % bought.max(1)];
        Some(Call::get(path.clone(), Some(jwt.clone())))
    });
    rows.push(endpoint_row("poll end to end", host.addr, &redis, &args, poll).await?);

    // Admission for fresh users, then precheck for others (their admission tokens are computed
    // offline: checking one needs no Redis).
    let jwts: Arc<Vec<String>> =
        Arc::new((0..args.users).map(|i| jwt_for(&format!("a{i}"))).collect());
    let path = format!("/api/events/{}/admission", event.as_str());
    let admission = Arc::new(move |i: u64| {
        Some(Call::post(
            path.clone(),
            Some(jwts.get(i as usize)?.clone()),
            &json!({}),
        ))
    });
    rows.push(endpoint_row("admission end to end", host.addr, &redis, &args, admission).await?);
    let secret = seckill_testkit::ADMISSION_SECRET.as_bytes();
    let fresh: Arc<Vec<(String, String)>> = Arc::new(
        (0..args.users)
            .map(|i| {
                let user = format!("p{i}");
                (
                    jwt_for(&user),
                    auth::admission_token(secret, event.as_str(), &user),
                )
            })
            .collect(),
    );
    let path = format!("/api/events/{}/precheck", event.as_str());
    let precheck = Arc::new(move |i: u64| {
        let (jwt, adm) = fresh.get(i as usize)?;
        Some(Call::post(
            path.clone(),
            Some(jwt.clone()),
            &json!({ "admission_token": adm }),
        ))
    });
    rows.push(endpoint_row("precheck end to end", host.addr, &redis, &args, precheck).await?);
    drop(host);

    // The same buy natively: shared/ code and the same script behind plain hyper, no WASM.
    let native = ServerProcess::start_native(&redis)?;
    let mut row = fresh_buy_row(
        "native baseline: the same buy without WASM",
        native.addr,
        &redis,
        "native",
        &args,
    )
    .await?;
    let native_rps = row.report.as_ref().map_or(0.0, Report::rps);
    row.note = format!(
        "{} WASM buy = {:.2}× native;",
        row.note,
        buy_rps / native_rps
    );
    rows.push(row);
    drop(native);

    rows.extend(scale_out(&redis, &pg, &args).await?);
    rows.extend(drain);

    print_table(&rows);
    Ok(())
}

/// The drain into Postgres: a backlog of `n` accepted orders (written as the buy script writes
/// them), drained through the host's `POST /admin/jobs/drain` until none is left.
async fn drain_backlog(
    redis: &RedisServer,
    pg: &PgServer,
    vars: &[(&str, String)],
    n: usize,
) -> Result<Row> {
    pg.migrate().await?;
    let event = open_event(redis, "backlog", n as u64)?;
    let k = seckill_domain::keys::EventKeys::new(&event);
    eprintln!("selling a backlog of {n} orders through the real scripts…");
    // Through precheck.lua and buy.lua themselves (4 connections at once), so the backlog has
    // exactly the data layout a sale leaves, whatever that layout becomes.
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..4)
            .map(|w| {
                let (k, event) = (&k, &event);
                scope.spawn(move || -> Result<()> {
                    let store = NativeStore::new(redis.client().get_connection()?);
                    let now = seckill_domain::clock::now_ms();
                    for i in (w..n).step_by(4) {
                        let (user, token) = (format!("d{i}"), format!("t{i}"));
                        let home = seckill_domain::ids::home_hash(event.as_str(), &user);
                        let order = format!("{now:012x}{i:016x}");
                        seckill_domain::scripts::precheck::run(
                            &store,
                            k,
                            &user,
                            "127.0.0.1",
                            &token,
                        )
                        .and_then(|_| {
                            seckill_domain::scripts::buy::run(
                                &store, k, &user, &token, home, &order,
                            )
                        })
                        .map_err(|e| anyhow::anyhow!("backlog order {i}: {e}"))?;
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
    })?;
    let host = HostProcess::start("spin.toml", vars, false)?;
    let start = std::time::Instant::now();
    let mut inserted = 0u64;
    loop {
        let (status, body) = once(
            host.addr,
            Call {
                method: http::Method::POST,
                path: "/admin/jobs/drain".into(),
                bearer: Some(seckill_testkit::ADMIN_TOKEN.into()),
                body: bytes::Bytes::new(),
            },
        )
        .await?;
        let report: serde_json::Value = serde_json::from_slice(&body)?;
        anyhow::ensure!(status == 200, "drain: {status} {report}");
        let n = report["inserted"].as_u64().unwrap_or(0);
        eprintln!("drain run: {report}");
        if n == 0 {
            break;
        }
        inserted += n;
    }
    let elapsed = start.elapsed();
    let db = pg.client().await?;
    let rows: i64 = db
        .query_one(
            "SELECT count(*) FROM orders WHERE event_id = 'backlog'",
            &[],
        )
        .await?
        .get(0);
    Ok(Row {
        name: format!("drain into Postgres ({n}-order backlog, 500 per transaction)"),
        report: None,
        note: format!(
            "{:.0} orders/s ({inserted} inserted in {:.2} s; {rows} rows in Postgres)",
            inserted as f64 / elapsed.as_secs_f64(),
            elapsed.as_secs_f64()
        ),
    })
}
