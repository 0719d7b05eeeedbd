//! The `scale` part: one hot event on 1, 2 and 4 `redis-server` nodes. Its [`SHARDS`] stock
//! shards are dealt out over the nodes evenly (`crates/domain/src/nodes.rs`), so the one event
//! spans every node. Every buyer goes through
//! the sale on the host, route after route, each route a phase of its own: the walk's
//! (`seckill_testkit::walk`) admission, precheck, buy, poll (with `?shards=`), [`BUYERS_PER_UNIT`] buyers per unit so that the buy phase sells
//! out. A row per node count: each node's share of the scripts (`INFO commandstats`), scripts
//! per request and per accepted buy, the host's CPU per request, and `redis-benchmark`'s
//! ceiling for `buy.lua` on each node, summed. The host runs its cron triggers, as deployed (the
//! drain tells every shard "sold out" once all are empty); their scripts count in the phase
//! they ran in. Then a capacity table computed from the largest run's figures ([`capacity`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use seckill_domain::error::ErrorCode;
use seckill_domain::event::EventId;
use seckill_domain::{admin, auth, clock, nodes, sale};
use seckill_testkit::walk::{Buyer, Reply, Request};
use seckill_testkit::{PgServer, RedisServer, repo_root};
use serde_json::Value;

use crate::fixture::{connect, open_event_on, redis_url};
use crate::load::{Call, Calls, Keep, Report, closed_loop_keeping, per_request};
use crate::options::SuiteArgs;
use crate::raw_redis;
use crate::server::HostProcess;
use crate::table::Row;

/// The hot event's stock shards: dealt evenly over 1, 2 or 4 nodes (32 each on 4), with
/// 23 units each, so shards run dry and tails happen during the sale.
const SHARDS: u32 = 128;
/// The node counts, one row each.
const NODE_COUNTS: [usize; 3] = [1, 2, 4];
/// Buyers per unit on sale: most buys meet a sold-out event, as in a real spike.
const BUYERS_PER_UNIT: usize = 5;
/// `redis-benchmark`'s run of `buy.lua` on each node: token ids and requests.
const CEILING_KEYSPACE: u64 = 300_000;
const CEILING_REQUESTS: u64 = 30_000;
/// The probe buys natively one buyer in the queue, then pauses this long (a small share of
/// the buyers, spread over the whole sale).
const PROBE_PAUSE: Duration = Duration::from_millis(2);

/// The rows, one per node count, and the capacity table (printed after the table).
pub async fn rows(pg: &PgServer, args: &SuiteArgs) -> Result<(Vec<Row>, String)> {
    pg.migrate().await?;
    let max = NODE_COUNTS.iter().copied().max().unwrap_or(1);
    let servers: Vec<RedisServer> = (0..max)
        .map(|_| RedisServer::start())
        .collect::<Result<_>>()?;
    // Each node's ceiling, measured alone, before any sale.
    eprintln!("scale: redis-benchmark of buy.lua on each of {max} nodes…");
    let runs: Vec<raw_redis::BuyScriptRun> = servers
        .iter()
        .map(|s| raw_redis::buy_script(s, CEILING_KEYSPACE, CEILING_REQUESTS))
        .collect::<Result<_>>()?;
    let ceilings: Vec<f64> = runs.iter().map(|r| r.per_second()).collect::<Result<_>>()?;
    let whole = runs.iter().map(|r| r.bought).sum::<u64>() as f64
        / runs.iter().map(|r| r.requests).sum::<u64>().max(1) as f64;
    let mut rows = Vec::new();
    let mut last = None;
    for n in NODE_COUNTS {
        let nodes: Vec<&RedisServer> = servers[..n].iter().collect();
        let (row, figures) = sale_over(&nodes, &ceilings[..n], pg, args).await?;
        eprintln!("{}: {}", row.name, row.note);
        rows.push(row);
        last = Some(Figures {
            whole_purchases: whole,
            home_skew: busiest_home_shard(MAX_SHARDS),
            ..figures
        });
    }
    let table = last.map(|f| capacity(&f)).unwrap_or_default();
    Ok((rows, table))
}

/// A buyer of the sale and their admission token (computed: checking one needs no Redis).
struct Shopper {
    buyer: Buyer,
    admission: String,
}

/// What one phase of the sale cost.
struct Phase {
    report: Report,
    /// Script calls (EVALSHA + EVAL) on each node.
    scripts: Vec<u64>,
    /// Host CPU seconds.
    cpu: f64,
    /// What the probe did beside the host (buy phase only).
    probed: Probed,
}

impl Phase {
    /// Requests answered, by the host and the probe.
    fn requests(&self) -> u64 {
        self.report.requests + self.probed.requests
    }

    fn scripts_per_request(&self) -> f64 {
        per_request(self.scripts.iter().sum::<u64>() as f64, self.requests())
    }

    /// Host CPU per request it answered, in µs.
    fn cpu_us(&self) -> f64 {
        per_request(self.cpu, self.report.requests) * 1e6
    }
}

/// The probe's buys: how many, and the scripts of each one accepted.
#[derive(Default)]
struct Probed {
    requests: u64,
    trips: Vec<u32>,
}

/// The host over the nodes, and the phases run on it.
struct Bench<'a> {
    host: HostProcess,
    nodes: &'a [&'a RedisServer],
    args: &'a SuiteArgs,
}

impl Bench<'_> {
    /// Zeroes each node's script counts.
    fn take_scripts(&self) -> Result<Vec<u64>> {
        self.nodes
            .iter()
            .map(|n| n.take_script_calls().map(|(sha, eval)| sha + eval))
            .collect()
    }

    /// One phase: `calls` in a closed loop (until they run out; three row durations at most),
    /// answers to `keep`, with `probe` beside it if any.
    async fn phase(&self, calls: Calls, keep: Keep, probe: Option<Probe>) -> Result<Phase> {
        let cap = self.args.duration() * 3;
        self.take_scripts()?;
        let cpu = self.host.cpu_seconds();
        let probe = probe.map(|p| p.start(Instant::now() + cap));
        let (addr, conns) = (self.host.addr, self.args.connections);
        let report = closed_loop_keeping(addr, conns, cap, calls, keep).await?;
        let cpu = self.host.cpu_seconds() - cpu;
        let probed = match probe {
            Some(p) => p
                .join()
                .map_err(|_| anyhow::anyhow!("the probe panicked"))??,
            None => Probed::default(),
        };
        eprintln!(
            "  {} requests in {:.1} s: {:?}",
            report.requests,
            report.elapsed.as_secs_f64(),
            report.statuses
        );
        Ok(Phase {
            report,
            scripts: self.take_scripts()?,
            cpu,
            probed,
        })
    }
}

/// The sale of one hot event on `nodes` (`ceilings`: each one's `buy.lua` ceiling): its row,
/// and the figures the capacity table needs.
async fn sale_over(
    nodes: &[&RedisServer],
    ceilings: &[f64],
    pg: &PgServer,
    args: &SuiteArgs,
) -> Result<(Row, Figures)> {
    let n = nodes.len();
    eprintln!("scale: one hot event on {n} Redis node(s): admission, precheck, buy, poll…");
    let urls = redis_url(nodes);
    let id = format!("hot{n}");
    // Four requests a buyer: the sale is as many requests as the buy rows' buyers.
    let buyers = args.users / 4;
    let stock = (buyers / BUYERS_PER_UNIT) as u64;
    let event = open_event_on(&connect(&urls), &id, stock, SHARDS)?;
    let mut vars = seckill_testkit::app_vars(nodes[0], pg);
    seckill_testkit::over_nodes(&mut vars, nodes);
    // The guests log a line per 5xx (each "try again" of a tail): into a file, not the table.
    let log = repo_root().join(format!("target/bench/scale-host-{n}-nodes.log"));
    std::fs::create_dir_all(log.parent().unwrap_or(&log))?;
    eprintln!("  the host's stderr: {}", log.display());
    // With its cron triggers: the drain summarizes the shards every second, rebalancing them
    // when they drift and telling every shard "sold out" once all are empty.
    let (mut cmd, addr) = HostProcess::command("spin.toml", &vars, false, true, &[])?;
    cmd.stderr(std::fs::File::create(&log)?);
    let bench = Bench {
        host: HostProcess::spawn(cmd, addr)?,
        nodes,
        args,
    };
    let (phases, try_again_with_stock) = journey(&bench, &event, &urls, buyers).await?;

    let status = admin::status(&connect(&urls), &event).map_err(|e| anyhow::anyhow!("{e}"))?;
    let buy_s = phases[2].report.elapsed.as_secs_f64();
    // Every 503 of the buy phase is a tail's "try again" (the closed loop never fills the
    // host's instance slots, so nothing is shed); those before the last accepted buy came
    // while stock was left.
    let buys = &phases[2].report;
    let try_again = buys.statuses.get(&503).copied().unwrap_or(0);
    let share = |n: u64| n as f64 * 100.0 / buys.requests.max(1) as f64;
    let sold = format!(
        "sold {} of {stock} units ({} left) in the buy phase's {buy_s:.1} s: {:.0} accepted buys/s; buys told \"try again\" (503) while stock was left: {try_again_with_stock} of {} ({:.3} %), {try_again} in all;",
        status.event.sold,
        status.event.stock_left,
        status.event.sold as f64 / buy_s,
        buys.requests,
        share(try_again_with_stock),
    );
    let urls = nodes::parse(&urls);
    let mut shards = vec![0; n];
    for s in 0..SHARDS {
        shards[nodes::index_for_shard(&event, s, &urls)] += 1;
    }
    let scripts: Vec<u64> = (0..n)
        .map(|i| phases.iter().map(|p| p.scripts[i]).sum())
        .collect();
    let journey = Journey::of(&phases);
    let figures = Figures {
        nodes: n,
        scripts_per_request: journey.scripts_per_request,
        cpu_us: journey.cpu_us,
        ceiling_per_node: ceilings.iter().sum::<f64>() / n as f64,
        whole_purchases: 0.0,
        home_skew: 1.0,
        busiest: busiest(&scripts),
        units_per_shard: stock as f64 / f64::from(SHARDS),
    };
    let note = [
        sold,
        spread_note(&shards, &scripts),
        scripts_note(&phases, &journey),
        cpu_note(&phases, &journey),
        ceiling_note(ceilings),
    ]
    .join(" ");
    let [_, _, buy, _] = phases;
    let name = format!("scale: one hot event, {SHARDS} shards, buy end to end, {n} Redis node(s)");
    Ok((Row::measured(name, buy.report, note), figures))
}

/// `buyers` shoppers through the sale of `event` on the bench's host, route after route: each
/// asks for admission, then prechecks (keeping the purchase token), then buys (the probe
/// buying natively beside the host), then polls.
async fn journey(
    bench: &Bench<'_>,
    event: &EventId,
    urls: &str,
    buyers: usize,
) -> Result<([Phase; 4], u64)> {
    let id = event.as_str();
    let secret = seckill_testkit::ADMISSION_SECRET.as_bytes();
    let terms = seckill_domain::sale::admission_terms(&connect(urls), event)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let shoppers: Arc<Vec<Shopper>> = Arc::new(
        (0..buyers)
            .map(|i| {
                let user = format!("{id}u{i}");
                Shopper {
                    admission: auth::admission_token(secret, id, &user, &terms),
                    buyer: Buyer::new(id, &user, Some(SHARDS)),
                }
            })
            .collect(),
    );
    let nothing: Keep = Arc::new(|_, _, _| {});

    let admission = each(&shoppers, |s| s.buyer.unsolved_admission_request());
    let admission = bench.phase(admission, nothing.clone(), None).await?;

    let precheck = each(&shoppers, |s| s.buyer.precheck_request(&s.admission));
    let tokens: Arc<Mutex<Vec<Option<String>>>> = Arc::new(Mutex::new(vec![None; buyers]));
    let keep_token: Keep = {
        let tokens = tokens.clone();
        Arc::new(move |i, status, body| {
            let reply = Reply {
                status,
                body: serde_json::from_slice(body).unwrap_or(Value::Null),
                retry_after_s: None,
            };
            if let (Ok(token), Some(slot)) = (
                reply.purchase_token(),
                tokens.lock().unwrap().get_mut(i as usize),
            ) {
                *slot = Some(token);
            }
        })
    };
    let precheck = bench.phase(precheck, keep_token, None).await?;

    let queue = Arc::new(Queue {
        buyers: std::mem::take(&mut *tokens.lock().unwrap())
            .into_iter()
            .enumerate()
            .filter_map(|(i, t)| Some((i, t?)))
            .collect(),
        shoppers: shoppers.clone(),
        next: AtomicUsize::new(0),
    });
    let probe = Probe {
        urls: urls.to_owned(),
        event: event.clone(),
        queue: queue.clone(),
    };
    let buy = queue.calls();
    // When each buy was answered, and how: a 503 answered before the last accepted buy was a
    // "try again" while stock was left (that last unit was still there).
    let answers: Arc<Mutex<Vec<(Instant, u16)>>> = Arc::default();
    let keep_answer: Keep = {
        let answers = answers.clone();
        Arc::new(move |_, status, _| answers.lock().unwrap().push((Instant::now(), status)))
    };
    let buy = bench.phase(buy, keep_answer, Some(probe)).await?;
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let last_sale = answers.iter().filter(|a| a.1 == 202).map(|a| a.0).max();
    let try_again_with_stock = answers
        .iter()
        .filter(|(at, status)| *status == 503 && last_sale.is_some_and(|last| *at < last))
        .count() as u64;

    let poll = each(&shoppers, |s| s.buyer.poll_request());
    let poll = bench.phase(poll, nothing, None).await?;
    Ok(([admission, precheck, buy, poll], try_again_with_stock))
}

/// Each shopper once, in order: the walk's `request(shopper)`.
fn each(
    shoppers: &Arc<Vec<Shopper>>,
    request: impl Fn(&Shopper) -> Request + Send + Sync + 'static,
) -> Calls {
    let shoppers = shoppers.clone();
    Arc::new(move |i| shoppers.get(i as usize).map(|s| Call::from(request(s))))
}

/// The buyers holding a purchase token, taken in turn by the host's connections and the probe.
struct Queue {
    /// (shopper, purchase token).
    buyers: Vec<(usize, String)>,
    shoppers: Arc<Vec<Shopper>>,
    next: AtomicUsize,
}

impl Queue {
    /// The next buyer and their purchase token; `None` once every one has bought.
    fn take(&self) -> Option<(&Shopper, &str)> {
        let (s, token) = self.buyers.get(self.next.fetch_add(1, Ordering::Relaxed))?;
        Some((&self.shoppers[*s], token))
    }

    /// The buys over HTTP, from the queue.
    fn calls(self: &Arc<Self>) -> Calls {
        let queue = self.clone();
        Arc::new(move |_| {
            let (s, token) = queue.take()?;
            Some(Call::from(s.buyer.buy_request(token)))
        })
    }
}

/// Buys natively, from the same queue as the host, one buyer then a [`PROBE_PAUSE`]: each
/// accepted buy's scripts (`sale::Bought::round_trips`, the tail included), which over HTTP
/// only show summed.
struct Probe {
    urls: String,
    event: EventId,
    queue: Arc<Queue>,
}

impl Probe {
    /// Buys in a thread of its own until the queue is empty or `deadline`.
    fn start(self, deadline: Instant) -> JoinHandle<Result<Probed>> {
        std::thread::spawn(move || {
            let nodes = connect(&self.urls);
            let mut probed = Probed::default();
            while Instant::now() < deadline {
                let Some((s, token)) = self.queue.take() else {
                    break;
                };
                probed.requests += 1;
                let now = clock::now_ms();
                match sale::buy(&nodes, &self.event, SHARDS, &s.buyer.user, token, now) {
                    Ok(bought) => probed.trips.push(bought.round_trips),
                    // Sold out, or "try again" from a tail that found its candidates empty.
                    Err(e) if matches!(e.code(), ErrorCode::SoldOut | ErrorCode::Unavailable) => {}
                    Err(e) => bail!("probe buy: {e}"),
                }
                std::thread::sleep(PROBE_PAUSE);
            }
            Ok(probed)
        })
    }
}

/// The whole journey (every phase): scripts per request and host CPU per request.
struct Journey {
    scripts_per_request: f64,
    cpu_us: f64,
}

impl Journey {
    fn of(phases: &[Phase]) -> Self {
        let sum = |f: fn(&Phase) -> f64| phases.iter().map(f).sum::<f64>();
        let scripts = sum(|p| p.scripts.iter().sum::<u64>() as f64);
        let http = sum(|p| p.report.requests as f64);
        Journey {
            scripts_per_request: scripts / sum(|p| p.requests() as f64).max(1.0),
            cpu_us: sum(|p| p.cpu) / http.max(1.0) * 1e6,
        }
    }
}

/// The routes of the phases, in order.
const ROUTES: [&str; 4] = ["admission", "precheck", "buy", "poll"];

/// Shards and scripts per node, and whether every node's share of the scripts is within ±15 %
/// of an even one.
fn spread_note(shards: &[u32], scripts: &[u64]) -> String {
    let shards: Vec<String> = shards.iter().map(u32::to_string).collect();
    let shares: Vec<String> = shares(scripts)
        .iter()
        .map(|s| format!("{:.1}%", s * 100.0))
        .collect();
    let even = match within(scripts, 0.15) {
        true => "every node within ±15 % of 1/N",
        false => "NOT every node within ±15 % of 1/N",
    };
    format!(
        "shards per node {}; scripts per node {} ({even});",
        shards.join("/"),
        shares.join(" / ")
    )
}

/// Scripts per request of each route, then per accepted buy as the probe saw them.
fn scripts_note(phases: &[Phase], journey: &Journey) -> String {
    let per_route: Vec<String> = ROUTES
        .iter()
        .zip(phases)
        .map(|(r, p)| format!("{r} {:.2}", p.scripts_per_request()))
        .collect();
    let probed = &phases[2].probed;
    let trips = &probed.trips;
    let mean = per_request(trips.iter().sum::<u32>() as f64, trips.len() as u64);
    format!(
        "scripts per request: {} (journey {:.2}); per accepted buy, tail included: mean {mean:.2}, max {} ({} accepted of {} bought natively beside the host);",
        per_route.join(", "),
        journey.scripts_per_request,
        trips.iter().max().unwrap_or(&0),
        trips.len(),
        probed.requests
    )
}

/// Host CPU per request of each route, and over the journey.
fn cpu_note(phases: &[Phase], journey: &Journey) -> String {
    let per_route: Vec<String> = ROUTES
        .iter()
        .zip(phases)
        .map(|(r, p)| format!("{r} {:.0}", p.cpu_us()))
        .collect();
    format!(
        "host CPU µs/req: {} (journey {:.0});",
        per_route.join(", "),
        journey.cpu_us
    )
}

/// Each node's `buy.lua` ceiling and their sum.
fn ceiling_note(ceilings: &[f64]) -> String {
    let each: Vec<String> = ceilings.iter().map(|c| format!("{c:.0}")).collect();
    format!(
        "buy.lua ceiling (redis-benchmark, each node alone): {} = {:.0} req/s;",
        each.join(" + "),
        ceilings.iter().sum::<f64>()
    )
}

/// Each node's share of `scripts`.
fn shares(scripts: &[u64]) -> Vec<f64> {
    let total = scripts.iter().sum::<u64>().max(1) as f64;
    scripts.iter().map(|&c| c as f64 / total).collect()
}

/// Whether every node's share of `scripts` is within `tolerance` (relative) of 1/N.
fn within(scripts: &[u64], tolerance: f64) -> bool {
    let even = 1.0 / scripts.len().max(1) as f64;
    shares(scripts)
        .iter()
        .all(|s| (s - even).abs() <= tolerance * even)
}

/// The busiest node's share of `scripts` over an even one (1 when even).
fn busiest(scripts: &[u64]) -> f64 {
    shares(scripts).iter().copied().fold(0.0, f64::max) * scripts.len() as f64
}

/// What the capacity table is computed from: one run's figures.
struct Figures {
    nodes: usize,
    /// Redis scripts per request over the buyer's journey.
    scripts_per_request: f64,
    /// Host CPU per request over the journey, in µs.
    cpu_us: f64,
    /// `buy.lua`'s ceiling on one node, in scripts/s.
    ceiling_per_node: f64,
    /// The share of `redis-benchmark`'s requests that were whole purchases.
    whole_purchases: f64,
    /// The busiest shard's share of buyers over an even one ([`busiest_home_shard`]).
    home_skew: f64,
    /// The busiest node's share of the scripts over an even one.
    busiest: f64,
    /// The run's units per shard.
    units_per_shard: f64,
}

/// The spike the capacity table sizes for: requests per second, units of the one item.
const SPIKE_RPS: f64 = 1_000_000.0;
const SPIKE_UNITS: f64 = 200_000.0;
/// What one Upstash database is taken to serve.
const UPSTASH_COMMANDS_PER_S: f64 = 10_000.0;
/// The most shards an event can have: the spike's item uses them all.
const MAX_SHARDS: u32 = *seckill_domain::event::SHARD_COUNTS.end();

/// The busiest of `shards` home shards' share of buyers over an even one, over a million ids
/// of each realistic kind (the worst kind): a shard's buyers are its load.
fn busiest_home_shard(shards: u32) -> f64 {
    use seckill_domain::ids::home_shard;
    use seckill_testkit::{ID_KINDS, realistic_ids};
    ID_KINDS
        .iter()
        .map(|kind| {
            let mut count = vec![0u64; shards as usize];
            for user in realistic_ids(kind) {
                count[home_shard("spike", &user, shards) as usize] += 1;
            }
            busiest(&count)
        })
        .fold(1.0, f64::max)
}

/// How many machines of `per_machine` scripts/s the spike's shards need when each machine
/// holds whole shards of `per_shard` scripts/s (placement deals shards, never splits one):
/// `None` when one shard alone is more than a machine.
fn machines_for(per_shard: f64, per_machine: f64) -> Option<u32> {
    let shards_each = (per_machine / per_shard).floor() as u32;
    (shards_each > 0).then(|| MAX_SHARDS.div_ceil(shards_each))
}

/// The capacity table for [`SPIKE_RPS`] on one item of [`SPIKE_UNITS`] units, from `f`.
fn capacity(f: &Figures) -> String {
    let scripts = SPIKE_RPS * f.scripts_per_request;
    let shards = f64::from(MAX_SHARDS);
    // The busiest shard sets the pace: its share of the buyers, all its scripts on its node.
    let per_shard = scripts / shards * f.home_skew;
    let count = |n: Option<u32>| {
        n.map_or("none: a shard is more than one".to_string(), |n| {
            n.to_string()
        })
    };
    let redis = machines_for(per_shard, f.ceiling_per_node);
    let upstash = machines_for(per_shard, UPSTASH_COMMANDS_PER_S);
    let cores = (SPIKE_RPS * f.cpu_us / 1e6).ceil();
    let run = format!("the {}-node run", f.nodes);
    let held = |n: Option<u32>| {
        n.map_or("-".to_string(), |n| {
            match (MAX_SHARDS / n, MAX_SHARDS.div_ceil(n)) {
                (least, most) if least == most => most.to_string(),
                (least, most) => format!("{least}–{most}"),
            }
        })
    };
    [
        format!("| {SPIKE_RPS:.0} requests/s on one {SPIKE_UNITS:.0}-unit item | needed | from |"),
        "|---|---:|---|".into(),
        format!(
            "| Redis scripts/s | {scripts:.0} | {:.3} scripts per request ({run}, the whole journey) |",
            f.scripts_per_request
        ),
        format!(
            "| busiest shard's scripts/s | {per_shard:.0} | ÷ {MAX_SHARDS} shards × {:.3} (the busiest home shard's share of a million ids of each kind) |",
            f.home_skew
        ),
        format!(
            "| redis-server nodes | {} | whole shards per node within {:.0} `buy.lua`/s (redis-benchmark, {:.0} % whole purchases): {} shards each |",
            count(redis),
            f.ceiling_per_node,
            f.whole_purchases * 100.0,
            held(redis)
        ),
        format!(
            "| Upstash databases | {} | whole shards per database within {UPSTASH_COMMANDS_PER_S:.0} commands/s: {} shards each |",
            count(upstash),
            held(upstash)
        ),
        format!(
            "| function cores | {cores:.0} | {SPIKE_RPS:.0} × {:.0} µs host CPU per request ({run}, the whole journey) |",
            f.cpu_us
        ),
        String::new(),
        format!(
            "Assumptions: each buyer sends admission, precheck, buy and poll, once each; scripts per request as {run} measured them: the tails before sell-out ({:.1} units a shard here, {:.0} for the spike's item over {MAX_SHARDS} shards: fewer tails), the tails of buys after it until the drain (every second) tells every shard, the scheduled jobs' scripts; a script (EVALSHA) is one Upstash command; every script costs a node what `buy.lua` does (the heaviest). Measured on this 2-core machine with everything on it (host, Redis, Postgres, generator, redis-benchmark); our host's CPU, not Spin's (`--only routes` has Spin-faithful mode).",
            f.units_per_shard,
            SPIKE_UNITS / shards
        ),
        format!(
            "Spread: placement deals an event's shards out evenly (each node ⌊S/N⌋ or ⌈S/N⌉ of them), and the nodes are sized by whole shards at the busiest shard's load; the busiest node took {:.2}× an even share of the scripts in {run}.",
            f.busiest
        ),
    ]
    .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_the_busiest_node() {
        assert_eq!(shares(&[300, 100]), [0.75, 0.25]);
        assert_eq!(shares(&[0]), [0.0]);
        assert_eq!(busiest(&[300, 100]), 1.5);
        assert_eq!(busiest(&[50, 50, 50, 50]), 1.0);
    }

    /// ±15 % of 1/4 is 21.25 %–28.75 %.
    #[test]
    fn within_tolerance_of_an_even_share() {
        assert!(within(&[250, 250, 280, 220], 0.15));
        assert!(!within(&[250, 250, 290, 210], 0.15));
        assert!(within(&[7], 0.15));
    }

    #[test]
    fn spread_note_names_shards_shares_and_the_verdict() {
        assert_eq!(
            spread_note(&[70, 58], &[550, 450]),
            "shards per node 70/58; scripts per node 55.0% / 45.0% (every node within ±15 % of 1/N);"
        );
        assert!(spread_note(&[90, 38], &[700, 300]).contains("NOT every node"));
    }

    /// The table divides the spike's scripts by each node's ceiling and Upstash's rate, and
    /// multiplies the CPU per request by the spike.
    #[test]
    fn capacity_from_the_figures() {
        let table = capacity(&Figures {
            nodes: 4,
            scripts_per_request: 1.25,
            cpu_us: 300.0,
            ceiling_per_node: 50_000.0,
            whole_purchases: 0.9,
            home_skew: 1.04,
            busiest: 1.1,
            units_per_shard: 23.4,
        });
        // 1,250,000 / 256 × 1.04 = 5078 a shard: 9 shards fit in 50,000 (29 nodes), 1 in
        // 10,000 (256 databases).
        for row in [
            "| Redis scripts/s | 1250000 |",
            "| busiest shard's scripts/s | 5078 |",
            "| redis-server nodes | 29 |",
            "9 shards each",
            "| Upstash databases | 256 |",
            "| function cores | 300 |",
        ] {
            assert!(table.contains(row), "{row} not in\n{table}");
        }
        assert!(table.contains("1.10× an even share of the scripts in the 4-node run"));
    }

    #[test]
    fn whole_shards_per_machine() {
        assert_eq!(
            machines_for(1000.0, 10_000.0),
            Some(26),
            "10 each: 256 / 10 up"
        );
        assert_eq!(machines_for(1000.0, 1_000.0), Some(256));
        assert_eq!(
            machines_for(1000.0, 999.0),
            None,
            "one shard is more than a machine"
        );
        assert!((1.0..1.1).contains(&busiest_home_shard(256)));
    }
}
