//! `seckill-bench demo`: a simulated sale end to end, shaped like a real flash sale's traffic.
//! Admission tokens before the start, a countdown on server time, a spike of prechecks
//! and buys with 0–300 ms client jitter and repeated clicks, polling, the drain into Postgres,
//! payment for some and timeout for the rest, release and resale. It ends with a report
//! (per-endpoint req/s and latency, sold / stock, orders in Postgres, oversold, lost), a JSON
//! file of the figures and an SVG chart (plotters) of the load, latency and stock over the
//! sale's phases. While it runs, a progress line on stderr tells where it is, once a second.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use futures::{StreamExt, stream};
use http::Method;
use serde_json::{Value, json};

use crate::HostProcess;
use crate::load::{Call, once};
use seckill_testkit::{ADMIN_TOKEN, PgServer, RedisServer, jwt_for};

/// Settings of a simulated sale.
#[derive(clap::Args, Clone)]
pub struct DemoArgs {
    /// Buyers.
    #[arg(long, default_value_t = 10_000)]
    pub users: usize,
    /// Units on sale.
    #[arg(long, default_value_t = 1_000)]
    pub stock: u64,
    /// Stock shards.
    #[arg(long, default_value_t = 8)]
    pub shards: u32,
    /// Seconds to pay before an order expires (counted from the buy: the spike, the drain and
    /// the payments themselves take a few seconds of it on 2 cores).
    #[arg(long, default_value_t = 10)]
    pub payment_timeout_s: u64,
    /// Share of winners who pay (the rest time out and their units are resold).
    #[arg(long, default_value_t = 0.7)]
    pub pay_share: f64,
    /// Where the report JSON and chart go.
    #[arg(long, default_value = "target/demo")]
    pub out: String,
    /// Reach Redis through Upstash's REST protocol over pooled HTTPS (a REST facade in front of
    /// the demo's redis-server, `tests/src/rest_facade.rs`) instead of `redis://`.
    #[arg(long)]
    pub rest: bool,
}

/// One measured request.
#[derive(Clone)]
struct Sample {
    endpoint: &'static str,
    at_ms: u64,
    latency_us: u64,
    status: u16,
}

/// The stages the simulated sale goes through, in order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// Buyers ask for admission tokens before the sale.
    Admission,
    /// The countdown on server time until the sale opens.
    Countdown,
    /// The spike of prechecks and buys at the opening.
    BuyWave,
    /// Winners poll for their result while the drain lands orders in Postgres.
    Polling,
    /// Some winners pay.
    Payment,
    /// The unpaid orders' payment window runs out and their units are released.
    PaymentWindow,
    /// Buyers without an order try again for the released units.
    Resale,
    /// The drain lands the resale's orders.
    Settle,
}

impl Phase {
    /// The name on the chart and on the progress line.
    fn label(self) -> &'static str {
        match self {
            Phase::Admission => "admission tokens",
            Phase::Countdown => "waiting for start",
            Phase::BuyWave => "buy wave",
            Phase::Polling => "polling + drain",
            Phase::Payment => "payment",
            Phase::PaymentWindow => "payment window",
            Phase::Resale => "resale",
            Phase::Settle => "drain settles",
        }
    }
}

/// Everything the simulation measured, timed in ms since `origin`.
struct Recorder {
    /// The clock's zero, taken before the admission phase so that pre-sale requests get their
    /// real times (the chart shifts everything to the sale's opening).
    origin: Instant,
    /// Every measured request, in the order they finished.
    samples: Vec<Sample>,
    /// Units left in Redis, sampled every 200 ms: (ms, units).
    stock_left: Vec<(u64, i64)>,
    /// Each phase when it began: (phase, ms), in order.
    phases: Vec<(Phase, u64)>,
    /// Turns seen in the stock samples ("sold out", "units released"): (name, ms).
    marks: Vec<(&'static str, u64)>,
}

impl Recorder {
    /// An empty recorder whose clock starts now.
    fn new() -> Self {
        Recorder {
            origin: Instant::now(),
            samples: Vec::new(),
            stock_left: Vec::new(),
            phases: Vec::new(),
            marks: Vec::new(),
        }
    }

    /// Milliseconds since `origin`.
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Records that `phase` begins now.
    fn enter(&mut self, phase: Phase) {
        let at = self.now_ms();
        self.phases.push((phase, at));
    }

    /// When the sale opened (the chart's zero); 0 if it has not.
    fn open_ms(&self) -> u64 {
        self.phases
            .iter()
            .find(|(p, _)| *p == Phase::BuyWave)
            .map_or(0, |(_, at)| *at)
    }

    /// Records a stock sample, and marks the moments the stock runs out or comes back.
    fn record_stock(&mut self, at: u64, left: i64) {
        match self.stock_left.last() {
            Some((_, prev)) if *prev > 0 && left <= 0 => self.marks.push(("sold out", at)),
            Some((_, prev)) if *prev <= 0 && left > 0 => self.marks.push(("units released", at)),
            _ => {}
        }
        self.stock_left.push((at, left));
    }

    /// One line on where the demo is: elapsed time, phase, requests, accepted buys, the last
    /// second's request rate and the units left.
    fn progress_line(&self) -> String {
        let now = self.now_ms();
        let phase = self.phases.last().map_or("starting", |(p, _)| p.label());
        // Samples are pushed in time order, so the last second is a suffix.
        let last_second = self
            .samples
            .iter()
            .rev()
            .take_while(|s| s.at_ms + 1000 > now)
            .count();
        let accepted = self
            .samples
            .iter()
            .filter(|s| s.endpoint == "buy" && s.status == 202)
            .count();
        let left = self
            .stock_left
            .last()
            .map_or("?".to_owned(), |(_, l)| l.to_string());
        format!(
            "[{:6.1} s] {phase}: {} requests, {accepted} buys accepted, {last_second} req/s, {left} units left",
            now as f64 / 1000.0,
            self.samples.len()
        )
    }
}

/// The recorder, shared by every request task, the stock sampler and the progress line.
type Shared = Arc<Mutex<Recorder>>;

/// Prints the progress line on stderr once a second until aborted: rewritten in place on a
/// terminal, one line each time otherwise (a log file gets no carriage returns).
async fn print_progress(rec: Shared) {
    let tty = std::io::stderr().is_terminal();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await; // the first tick is immediate: nothing to tell yet
    loop {
        tick.tick().await;
        let line = rec.lock().unwrap().progress_line();
        if tty {
            eprint!("\r{line}\x1b[K");
        } else {
            eprintln!("{line}");
        }
    }
}

/// Erases the progress line on a terminal, so that stdout's next line does not land after it.
fn clear_progress() {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
}

/// Prints one line of the story on stdout, clear of the progress line.
fn say(line: std::fmt::Arguments) {
    clear_progress();
    println!("{line}");
}

/// Sends one request and records its latency and status.
async fn timed(
    rec: &Shared,
    addr: std::net::SocketAddr,
    endpoint: &'static str,
    call: Call,
) -> Result<(u16, Value)> {
    let start = Instant::now();
    let (status, body) = once(addr, call).await?;
    let latency_us = start.elapsed().as_micros() as u64;
    let mut r = rec.lock().unwrap();
    let at_ms = r.now_ms();
    r.samples.push(Sample {
        endpoint,
        at_ms,
        latency_us,
        status,
    });
    Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

/// A POST with a bearer token and a JSON body.
fn post(path: String, bearer: &str, body: Value) -> Call {
    Call::post(path, Some(bearer.to_owned()), &body)
}

/// Runs the demo and prints the report.
pub async fn run(args: DemoArgs) -> Result<()> {
    let redis = RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
    ])?;
    let pg = PgServer::start()?;
    pg.migrate().await?;
    let mut vars = seckill_testkit::app_vars(&redis, &pg);
    vars.push(("drain_reclaim_idle_ms", "2000".into()));
    // Kept alive for the whole run when `--rest` puts a facade in front of Redis.
    let ca = seckill_testkit::TestCa::new()?;
    let (host, _facade) = if args.rest {
        let rest =
            seckill_testkit::rest_facade::RestFacade::start(&redis.url(), &ca, "demo-token").await?;
        for (k, v) in vars.iter_mut() {
            match *k {
                "redis_url" => *v = rest.url(),
                "redis_host" => *v = rest.host(),
                _ => {}
            }
        }
        eprintln!("Redis over REST: {}", rest.host());
        let tls_ca = ca.path("ca.pem");
        let host = HostProcess::launch("spin.toml", &vars, false, true, &["--tls-ca", &tls_ca])?;
        (host, Some(rest))
    } else {
        (
            HostProcess::start_app("spin.toml", &vars, false, true)?,
            None,
        )
    };
    let addr = host.addr;
    let event = "demo";

    // The event opens 3 s from now (server time).
    let (_, t) = once(addr, Call::get("/api/time", None)).await?;
    let now: u64 = serde_json::from_slice::<Value>(&t)?["now_ms"]
        .as_u64()
        .unwrap_or(0);
    let start_ms = now + 3_000;
    let config = json!({
        "sku": "demo-phone", "stock": args.stock, "shards": args.shards, "start_ms": start_ms,
        "end_ms": start_ms + 600_000, "payment_timeout_s": args.payment_timeout_s,
        "user_rate": 2.0, "user_burst": 5,
    });
    let (status, body) = once(
        addr,
        Call {
            method: Method::PUT,
            path: format!("/admin/events/{event}"),
            bearer: Some(ADMIN_TOKEN.into()),
            body: Bytes::from(config.to_string()),
        },
    )
    .await?;
    anyhow::ensure!(status == 201, "create: {status} {body:?}");
    once(
        addr,
        Call::post(
            format!("/admin/events/{event}/warmup"),
            Some(ADMIN_TOKEN.into()),
            &json!({}),
        ),
    )
    .await?;

    // The clock, the stock sampler and the progress line start with the first phase.
    let rec: Shared = Arc::new(Mutex::new(Recorder::new()));
    rec.lock().unwrap().enter(Phase::Admission);
    let sampler = tokio::spawn(sample_stock(rec.clone(), addr, event));
    let progress = tokio::spawn(print_progress(rec.clone()));

    // Before the sale: admission tokens (everyone; the cap is 10 × stock).
    say(format_args!(
        "▶ {} buyers ask for admission tokens before the sale…",
        args.users
    ));
    let users: Vec<(String, String)> = (0..args.users)
        .map(|i| (format!("buyer{i}"), jwt_for(&format!("buyer{i}"))))
        .collect();
    let admitted: Vec<(String, String, String)> = stream::iter(users.clone())
        .map(|(user, jwt)| {
            let rec = rec.clone();
            async move {
                let (status, body) = timed(
                    &rec,
                    addr,
                    "admission",
                    post(format!("/api/events/{event}/admission"), &jwt, json!({})),
                )
                .await?;
                anyhow::Ok((status == 200).then(|| {
                    (
                        user,
                        jwt,
                        body["admission_token"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    )
                }))
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    say(format_args!("  {} admitted", admitted.len()));

    // Countdown on server time (the progress line shows it), then the spike.
    rec.lock().unwrap().enter(Phase::Countdown);
    loop {
        let (_, t) = once(addr, Call::get("/api/time", None)).await?;
        let now = serde_json::from_slice::<Value>(&t)?["now_ms"]
            .as_u64()
            .unwrap_or(0);
        if now >= start_ms {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100.min(start_ms - now))).await;
    }
    rec.lock().unwrap().enter(Phase::BuyWave);
    say(format_args!(
        "▶ the sale is open: spike of prechecks and buys (0–300 ms jitter, repeated clicks)"
    ));
    let winners: Arc<Mutex<HashMap<String, (String, String)>>> = Default::default();
    let mut tasks = Vec::new();
    for (i, (user, jwt, admission)) in admitted.iter().cloned().enumerate() {
        let (rec, winners) = (rec.clone(), winners.clone());
        // A deterministic jitter and 1–3 clicks per buyer.
        let jitter = (i as u64 * 7_919) % 300;
        let clicks = 1 + (i % 3);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(jitter)).await;
            for _ in 0..clicks {
                if let Some(order) = precheck_and_buy(&rec, addr, event, &jwt, &admission).await? {
                    winners
                        .lock()
                        .unwrap()
                        .insert(user.clone(), (jwt.clone(), order));
                }
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let first_wave: HashMap<String, (String, String)> = winners.lock().unwrap().clone();
    say(format_args!(
        "  {} orders accepted for {} units",
        first_wave.len(),
        args.stock
    ));

    // Polling until every winner's order is confirmed in Postgres (the drain runs every second).
    rec.lock().unwrap().enter(Phase::Polling);
    say(format_args!(
        "▶ winners poll for their result every second while the drain lands orders"
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let states: Vec<String> = stream::iter(first_wave.values().cloned())
            .map(|(jwt, _)| {
                let rec = rec.clone();
                async move {
                    let (_, body) = timed(
                        &rec,
                        addr,
                        "poll",
                        Call::get(format!("/api/events/{event}/orders/me"), Some(jwt)),
                    )
                    .await?;
                    anyhow::Ok(
                        body["state"]
                            .as_str()
                            .or(body["status"].as_str())
                            .unwrap_or("?")
                            .to_owned(),
                    )
                }
            })
            .buffer_unordered(64)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_>>()?;
        let confirmed = states.iter().filter(|s| *s == "confirmed").count();
        say(format_args!(
            "  confirmed {confirmed} / {}",
            first_wave.len()
        ));
        if confirmed == first_wave.len() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // Payment for some; the rest time out, their units go back on sale.
    let payers: Vec<(String, (String, String))> = first_wave
        .iter()
        .enumerate()
        .filter(|(i, _)| (*i as f64) < first_wave.len() as f64 * args.pay_share)
        .map(|(_, (u, v))| (u.clone(), v.clone()))
        .collect();
    rec.lock().unwrap().enter(Phase::Payment);
    say(format_args!(
        "▶ {} winners pay; the other {} let the {} s payment window pass",
        payers.len(),
        first_wave.len() - payers.len(),
        args.payment_timeout_s
    ));
    let paid: usize = stream::iter(payers.clone())
        .map(|(_, (jwt, order))| {
            let rec = rec.clone();
            async move {
                let (status, _) = timed(
                    &rec,
                    addr,
                    "pay",
                    post(
                        format!("/api/events/{event}/orders/{order}/pay"),
                        &jwt,
                        json!({}),
                    ),
                )
                .await?;
                anyhow::Ok(status == 200)
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .filter(|p| *p)
        .count();
    rec.lock().unwrap().enter(Phase::PaymentWindow);
    tokio::time::sleep(Duration::from_secs(args.payment_timeout_s + 6)).await;

    // Resale: those who lost try again for the released units.
    let losers: Vec<(String, String, String)> = admitted
        .iter()
        .filter(|(u, _, _)| !first_wave.contains_key(u))
        .cloned()
        .collect();
    rec.lock().unwrap().enter(Phase::Resale);
    say(format_args!(
        "▶ resale: {} buyers without an order try again",
        losers.len()
    ));
    let resold: Vec<(String, String)> = stream::iter(losers)
        .map(|(user, jwt, admission)| {
            let rec = rec.clone();
            async move {
                let order = precheck_and_buy(&rec, addr, event, &jwt, &admission).await?;
                anyhow::Ok(order.map(|o| (user, o)))
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    say(format_args!("  {} units resold", resold.len()));
    rec.lock().unwrap().enter(Phase::Settle);
    tokio::time::sleep(Duration::from_secs(3)).await; // the drain lands the resale
    sampler.abort();
    progress.abort();
    clear_progress();

    // The books.
    let db = pg.client().await?;
    let rows = db
        .query(
            "SELECT order_id, status FROM orders WHERE event_id = $1",
            &[&event],
        )
        .await?;
    let in_pg: HashMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let accepted: HashSet<String> = first_wave
        .values()
        .map(|(_, o)| o.clone())
        .chain(resold.iter().map(|(_, o)| o.clone()))
        .collect();
    let lost = accepted.iter().filter(|o| !in_pg.contains_key(*o)).count();
    let by_status: BTreeMap<String, usize> = in_pg.values().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.clone()).or_default() += 1;
        m
    });
    let held = by_status.get("pending_payment").copied().unwrap_or(0)
        + by_status.get("paid").copied().unwrap_or(0);
    let (_, status) = once(
        addr,
        Call::get(format!("/admin/events/{event}"), Some(ADMIN_TOKEN.into())),
    )
    .await?;
    let status: Value = serde_json::from_slice(&status)?;
    let shards: Vec<i64> =
        serde_json::from_value(status["stock_by_shard"].clone()).unwrap_or_default();
    let oversold =
        (held as i64 - args.stock as i64).max(0) + shards.iter().filter(|s| **s < 0).count() as i64;
    let (_, books) = once(
        addr,
        Call::post(
            format!("/admin/jobs/reconcile?event={event}"),
            Some(ADMIN_TOKEN.into()),
            &json!({}),
        ),
    )
    .await?;
    let books: Value = serde_json::from_slice(&books)?;

    let r = rec.lock().unwrap();
    let endpoints = endpoint_table(&r.samples);
    let report = json!({
        "users": args.users, "stock": args.stock, "shards": args.shards,
        "accepted_first_wave": first_wave.len(), "paid": paid, "resold": resold.len(),
        "orders_in_postgres": by_status, "held_in_postgres": held,
        "stock_left_in_redis": shards.iter().sum::<i64>(),
        "oversold": oversold, "lost": lost,
        "reconcile_drift": books["events"][0]["drift"],
        "endpoints": endpoints,
    });
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(
        format!("{}/report.json", args.out),
        serde_json::to_string_pretty(&report)?,
    )?;
    std::fs::write(format!("{}/chart.svg", args.out), chart(&r)?)?;
    println!(
        "\n| endpoint | requests | req/s (busy 1 s) | p50 ms | p95 ms | p99 ms | statuses |\n|---|---:|---:|---:|---:|---:|---|"
    );
    for (name, e) in endpoints.as_object().into_iter().flatten() {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} |",
            e["requests"], e["peak_rps"], e["p50_ms"], e["p95_ms"], e["p99_ms"], e["statuses"]
        );
    }
    println!(
        "\nsold {} / {} (first wave {}, resold {}), paid {paid}; orders in Postgres {:?}; left in Redis {}\noversold = {oversold}, lost = {lost}, reconcile drift = {}\nreport: {}/report.json, chart: {}/chart.svg",
        held,
        args.stock,
        first_wave.len(),
        resold.len(),
        by_status,
        shards.iter().sum::<i64>(),
        books["events"][0]["drift"],
        args.out,
        args.out
    );
    anyhow::ensure!(
        oversold == 0 && lost == 0,
        "oversold {oversold}, lost {lost}"
    );
    Ok(())
}

/// One click: precheck, then buy with the purchase token. Returns the order id on a 202.
async fn precheck_and_buy(
    rec: &Shared,
    addr: std::net::SocketAddr,
    event: &str,
    jwt: &str,
    admission: &str,
) -> Result<Option<String>> {
    let precheck = post(
        format!("/api/events/{event}/precheck"),
        jwt,
        json!({ "admission_token": admission }),
    );
    let (status, body) = timed(rec, addr, "precheck", precheck).await?;
    if status != 200 {
        return Ok(None);
    }
    let buy = post(
        format!("/api/events/{event}/buy"),
        jwt,
        json!({ "purchase_token": body["purchase_token"] }),
    );
    let (status, body) = timed(rec, addr, "buy", buy).await?;
    Ok((status == 202).then(|| body["order_id"].as_str().unwrap_or_default().to_owned()))
}

/// Samples the units left every 200 ms, for the chart and the progress line.
async fn sample_stock(rec: Shared, addr: std::net::SocketAddr, event: &'static str) {
    loop {
        let call = Call::get(format!("/admin/events/{event}"), Some(ADMIN_TOKEN.into()));
        let left = once(addr, call)
            .await
            .ok()
            .and_then(|(_, body)| serde_json::from_slice::<Value>(&body).ok())
            .and_then(|v| v["stock_left"].as_i64());
        if let Some(left) = left {
            let mut r = rec.lock().unwrap();
            let at = r.now_ms();
            r.record_stock(at, left);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Per endpoint: requests, busiest second, latency percentiles and statuses.
fn endpoint_table(samples: &[Sample]) -> Value {
    let mut by: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        by.entry(s.endpoint).or_default().push(s);
    }
    let mut out = serde_json::Map::new();
    for (name, list) in by {
        let mut lat: Vec<u64> = list.iter().map(|s| s.latency_us).collect();
        lat.sort_unstable();
        let pct =
            |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)] as f64 / 1000.0;
        let mut per_second: BTreeMap<u64, u64> = BTreeMap::new();
        let mut statuses: BTreeMap<u16, u64> = BTreeMap::new();
        for s in &list {
            *per_second.entry(s.at_ms / 1000).or_default() += 1;
            *statuses.entry(s.status).or_default() += 1;
        }
        out.insert(
            name.to_owned(),
            json!({
                "requests": list.len(), "peak_rps": per_second.values().max().copied().unwrap_or(0),
                "p50_ms": pct(0.5), "p95_ms": pct(0.95), "p99_ms": pct(0.99), "statuses": statuses,
            }),
        );
    }
    Value::Object(out)
}

/// Width of a chart bucket: requests/s and p99 are computed per 250 ms.
const BUCKET_MS: i64 = 250;

/// The report's chart as SVG: requests/s and p99 latency (top panel), units left (bottom
/// panel), against seconds since the sale opened, with the phases shaded and labelled and the
/// stock's turns (sold out, released) marked.
fn chart(r: &Recorder) -> Result<String> {
    use plotters::prelude::*;
    // Everything is shifted so that 0 s is the sale's opening (admission comes before it).
    let open = r.open_ms() as i64;
    let secs = |ms: i64| (ms - open) as f64 / 1000.0;

    let mut buckets: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
    for s in &r.samples {
        let b = (s.at_ms as i64 - open).div_euclid(BUCKET_MS);
        buckets.entry(b).or_default().push(s.latency_us);
    }
    let (first, last) = match (buckets.keys().next(), buckets.keys().next_back()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => (0, 0),
    };
    // Each point sits in the middle of its bucket; empty buckets are 0 req/s but have no p99.
    let mid = |b: i64| (b * BUCKET_MS + BUCKET_MS / 2) as f64 / 1000.0;
    let rps: Vec<(f64, f64)> = (first..=last)
        .map(|b| {
            let n = buckets.get(&b).map_or(0, Vec::len);
            (mid(b), n as f64 * 1000.0 / BUCKET_MS as f64)
        })
        .collect();
    let p99: Vec<(f64, f64)> = buckets
        .iter_mut()
        .map(|(b, l)| {
            l.sort_unstable();
            let i = ((l.len() as f64 * 0.99) as usize).min(l.len() - 1);
            (mid(*b), l[i] as f64 / 1000.0)
        })
        .collect();
    let stock: Vec<(f64, f64)> = r
        .stock_left
        .iter()
        .map(|(t, l)| (secs(*t as i64), *l as f64))
        .collect();

    // The time range covers every sample and every phase.
    let times = r
        .samples
        .iter()
        .map(|s| s.at_ms)
        .chain(r.stock_left.iter().map(|p| p.0))
        .chain(r.phases.iter().map(|p| p.1));
    let (t0, t1) = times.fold((f64::MAX, f64::MIN), |(lo, hi), t| {
        let t = secs(t as i64);
        (lo.min(t), hi.max(t))
    });
    let (t0, t1) = if t0 < t1 { (t0, t1) } else { (0.0, 1.0) };
    // Headroom above the highest point, so that the legend does not hide the peaks.
    let top = |v: &[(f64, f64)]| v.iter().map(|p| p.1).fold(1.0, f64::max) * 1.35;
    // Whole ticks print without a useless ".0".
    let tick = |v: &f64| {
        if (v - v.round()).abs() < 1e-9 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    let (max_rps, max_p99, max_stock) = (top(&rps), top(&p99), top(&stock));

    let (blue, red, green) = (
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
    );
    let mark_color = RGBColor(148, 103, 189);
    let font = ("sans-serif", 15);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 760)).into_drawing_area();
        root.fill(&WHITE)?;
        let body = root.titled(
            "seckill demo: load, latency and stock over the sale",
            ("sans-serif", 22),
        )?;
        let (upper, lower) = body.split_vertically(440);

        // Top panel: requests/s on the left axis, p99 on the right one. The top margin leaves
        // a strip for the phase labels.
        let mut load = ChartBuilder::on(&upper)
            .margin(10)
            .margin_top(56)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .right_y_label_area_size(70)
            .build_cartesian_2d(t0..t1, 0.0..max_rps)?
            .set_secondary_coord(t0..t1, 0.0..max_p99);
        load.configure_mesh()
            .x_desc("time since the sale opened (s)")
            .y_desc("requests/s")
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .label_style(font)
            .axis_desc_style(font)
            .light_line_style(WHITE)
            .draw()?;
        load.configure_secondary_axes()
            .y_desc("p99 latency (ms)")
            .y_label_formatter(&tick)
            .label_style(font)
            .axis_desc_style(font)
            .draw()?;

        // Bottom panel: the units left, its right margin as wide as the top panel's right axis
        // so that both time axes line up.
        let mut left = ChartBuilder::on(&lower)
            .margin(10)
            .margin_right(80)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(t0..t1, 0.0..max_stock)?;
        left.configure_mesh()
            .x_desc("time since the sale opened (s)")
            .y_desc("units left")
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .label_style(font)
            .axis_desc_style(font)
            .light_line_style(WHITE)
            .draw()?;

        // The phases: alternating shades in both panels, labelled in the strip above the top
        // panel on staggered rows, so that short phases' labels do not overlap.
        let mut rows = Rows::default();
        for (i, (phase, at)) in r.phases.iter().enumerate() {
            let from = secs(*at as i64);
            let to = r.phases.get(i + 1).map_or(t1, |p| secs(p.1 as i64));
            let shade = BLACK.mix(if i % 2 == 0 { 0.04 } else { 0.10 }).filled();
            load.draw_series([Rectangle::new([(from, 0.0), (to, max_rps)], shade)])?;
            left.draw_series([Rectangle::new([(from, 0.0), (to, max_stock)], shade)])?;
            let (x, y) = load.backend_coord(&(from, max_rps));
            let row = rows.place(x, phase.label());
            root.draw(&Text::new(
                phase.label(),
                (x + 3, y - 52 + row * 17),
                ("sans-serif", 14),
            ))?;
            root.draw(&PathElement::new(
                [(x, y - 52 + row * 17), (x, y)],
                BLACK.mix(0.4),
            ))?;
        }

        // The stock's turns: a vertical line in both panels, named in the bottom one.
        let mut rows = Rows::default();
        for (name, at) in &r.marks {
            let x = secs(*at as i64);
            let style = mark_color.stroke_width(2);
            load.draw_series([PathElement::new([(x, 0.0), (x, max_rps)], style)])?;
            left.draw_series([PathElement::new([(x, 0.0), (x, max_stock)], style)])?;
            let (px, py) = left.backend_coord(&(x, max_stock));
            let row = rows.place(px, name);
            root.draw(&Text::new(
                *name,
                (px + 4, py + 4 + row * 17),
                ("sans-serif", 14).into_font().color(&mark_color),
            ))?;
        }

        load.draw_series(LineSeries::new(rps, blue.stroke_width(2)))?
            .label("requests/s (all endpoints, per 250 ms)")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], blue.stroke_width(2)));
        load.draw_secondary_series(LineSeries::new(p99, red.stroke_width(2)))?
            .label("p99 latency in ms (right axis)")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], red.stroke_width(2)));
        load.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(font)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        left.draw_series(LineSeries::new(stock, green.stroke_width(2)))?
            .label("units left in Redis")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], green.stroke_width(2)));
        // Middle right: the marks' names take the top, and the stock is near 0 by the end.
        left.configure_series_labels()
            .position(SeriesLabelPosition::MiddleRight)
            .label_font(font)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}

/// Rows for chart labels placed left to right: each label goes on the first row whose last
/// label has ended, so that labels near each other do not overlap (three rows at most; past
/// that, the row that frees up first).
#[derive(Default)]
struct Rows {
    /// Where each row's last label ends, in pixels.
    ends: [i32; 3],
}

impl Rows {
    /// The row for a label starting at pixel `x`.
    fn place(&mut self, x: i32, text: &str) -> i32 {
        let row = (0..3)
            .find(|r| self.ends[*r] <= x)
            .unwrap_or_else(|| (0..3).min_by_key(|r| self.ends[*r]).unwrap_or(0));
        // About 7 px a character at the labels' size, and a small gap.
        self.ends[row] = x + 7 * text.chars().count() as i32 + 8;
        row as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorder with a made-up sale: each phase 2 s long, load during the buy wave and the
    /// resale, the stock selling out, coming back and selling out again.
    fn synthetic() -> Recorder {
        let mut r = Recorder::new();
        let phases = [
            Phase::Admission,
            Phase::Countdown,
            Phase::BuyWave,
            Phase::Polling,
            Phase::Payment,
            Phase::PaymentWindow,
            Phase::Resale,
            Phase::Settle,
        ];
        r.phases = phases
            .iter()
            .enumerate()
            .map(|(i, p)| (*p, i as u64 * 2_000))
            .collect();
        for at_ms in (0..16_000).step_by(5) {
            r.samples.push(Sample {
                endpoint: if at_ms % 10 == 0 { "buy" } else { "precheck" },
                at_ms,
                latency_us: 1_000 + at_ms % 7_000,
                status: if at_ms < 5_000 { 202 } else { 409 },
            });
        }
        for at in (0..16_000).step_by(200) {
            let left = match at {
                ..4_000 => 100,
                4_000..6_000 => (6_000 - at as i64) / 20,
                6_000..12_000 => 0,
                12_000..13_000 => 30,
                _ => 0,
            };
            r.record_stock(at, left);
        }
        r
    }

    /// The chart names its axes with units, its series and the phases, in real text elements.
    #[test]
    fn chart_has_axes_legend_and_phases() {
        let svg = chart(&synthetic()).unwrap();
        for text in [
            "time since the sale opened (s)",
            "requests/s",
            "p99 latency (ms)",
            "units left",
            "requests/s (all endpoints, per 250 ms)",
            "p99 latency in ms (right axis)",
            "units left in Redis",
            "admission tokens",
            "waiting for start",
            "buy wave",
            "polling + drain",
            "payment window",
            "resale",
            "drain settles",
            "sold out",
            "units released",
        ] {
            assert!(
                svg.contains(&format!(">\n{text}\n</text>"))
                    || svg.contains(&format!(">{text}</text>")),
                "no text element {text:?} in the chart"
            );
        }
        // Tick labels too: the axes are numbered.
        assert!(svg.matches("<text").count() > 40, "too few text elements");
        assert!(svg.contains("<polyline"), "no line series");
    }

    /// Labels close together go on different rows; one far enough right goes back to the first.
    #[test]
    fn labels_near_each_other_take_other_rows() {
        let mut rows = Rows::default();
        let placed: Vec<i32> = [
            (100, "sold out"),
            (110, "units released"),
            (120, "sold out"),
        ]
        .iter()
        .map(|(x, t)| rows.place(*x, t))
        .collect();
        assert_eq!(placed, [0, 1, 2]);
        assert_eq!(rows.place(300, "resale"), 0);
    }

    /// The stock's turns are marked once each way, and the progress line reads the recorder.
    #[test]
    fn stock_marks_and_progress_line() {
        let r = synthetic();
        let marks: Vec<&str> = r.marks.iter().map(|m| m.0).collect();
        assert_eq!(marks, ["sold out", "units released", "sold out"]);
        let line = r.progress_line();
        assert!(line.contains("drain settles"), "{line}");
        assert!(line.contains("3200 requests"), "{line}");
        assert!(line.contains("500 buys accepted"), "{line}");
        assert!(line.contains("0 units left"), "{line}");
    }
}
