//! `seckill-bench demo`: a simulated sale end to end, shaped like a real flash sale's traffic.
//! Admission tokens before the start, a countdown on server time, a spike of prechecks
//! and buys with 0–300 ms client jitter and repeated clicks, polling, the drain into Postgres,
//! payment for some and timeout for the rest, release and resale. It ends with a report
//! (per-endpoint req/s and latency, sold / stock, orders in Postgres, oversold, lost), a JSON
//! file of the figures and an SVG chart.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use futures::{StreamExt, stream};
use http::Method;
use serde_json::{Value, json};

use crate::HostProcess;
use crate::load::{Call, once};
use seckill_tests::{ADMIN_TOKEN, PgServer, RedisServer, jwt_for};

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

/// Everything the simulation measured.
#[derive(Default)]
struct Recorder {
    start: Option<Instant>,
    samples: Vec<Sample>,
    stock_left: Vec<(u64, i64)>,
}

type Shared = Arc<Mutex<Recorder>>;

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
    let at_ms = r.start.map_or(0, |s| s.elapsed().as_millis() as u64);
    r.samples.push(Sample {
        endpoint,
        at_ms,
        latency_us,
        status,
    });
    Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

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
    let mut vars = seckill_tests::app_vars(&redis, &pg);
    vars.push(("drain_reclaim_idle_ms", "2000".into()));
    // Kept alive for the whole run when `--rest` puts a facade in front of Redis.
    let ca = seckill_tests::TestCa::new()?;
    let (host, _facade) = if args.rest {
        let rest =
            seckill_tests::rest_facade::RestFacade::start(&redis.url(), &ca, "demo-token").await?;
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
    let rec: Shared = Arc::new(Mutex::new(Recorder::default()));
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

    // Before the sale: admission tokens (everyone; the cap is 10 × stock).
    println!(
        "▶ {} buyers ask for admission tokens before the sale…",
        args.users
    );
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
    println!("  {} admitted", admitted.len());

    // Countdown on server time, then the spike.
    loop {
        let (_, t) = once(addr, Call::get("/api/time", None)).await?;
        let now = serde_json::from_slice::<Value>(&t)?["now_ms"]
            .as_u64()
            .unwrap_or(0);
        if now >= start_ms {
            break;
        }
        print!(
            "\r  sale opens in {:.1} s ",
            (start_ms - now) as f64 / 1000.0
        );
        use std::io::Write;
        std::io::stdout().flush()?;
        tokio::time::sleep(Duration::from_millis(100.min(start_ms - now))).await;
    }
    println!(
        "\r▶ the sale is open: spike of prechecks and buys (0–300 ms jitter, repeated clicks)"
    );
    rec.lock().unwrap().start = Some(Instant::now());
    let sampler = tokio::spawn(sample_stock(rec.clone(), addr, event));
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
    println!(
        "  {} orders accepted for {} units",
        first_wave.len(),
        args.stock
    );

    // Polling until every winner's order is confirmed in Postgres (the drain runs every second).
    println!("▶ winners poll for their result every second while the drain lands orders");
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
        println!("  confirmed {confirmed} / {}", first_wave.len());
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
    println!(
        "▶ {} winners pay; the other {} let the {} s payment window pass",
        payers.len(),
        first_wave.len() - payers.len(),
        args.payment_timeout_s
    );
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
    tokio::time::sleep(Duration::from_secs(args.payment_timeout_s + 6)).await;

    // Resale: those who lost try again for the released units.
    let losers: Vec<(String, String, String)> = admitted
        .iter()
        .filter(|(u, _, _)| !first_wave.contains_key(u))
        .cloned()
        .collect();
    println!(
        "▶ resale: {} buyers without an order try again",
        losers.len()
    );
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
    println!("  {} units resold", resold.len());
    tokio::time::sleep(Duration::from_secs(3)).await; // the drain lands the resale
    sampler.abort();

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
    std::fs::write(
        format!("{}/chart.svg", args.out),
        chart(&r.samples, &r.stock_left),
    )?;
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

/// Samples the units left every 200 ms, for the chart.
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
            let at = r.start.map_or(0, |s| s.elapsed().as_millis() as u64);
            r.stock_left.push((at, left));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

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

/// An SVG with requests/s and p99 latency per 250 ms, and the units left, over time.
fn chart(samples: &[Sample], stock: &[(u64, i64)]) -> String {
    const BUCKET: u64 = 250;
    let end = samples.iter().map(|s| s.at_ms).max().unwrap_or(1).max(1);
    let n = (end / BUCKET + 1) as usize;
    let mut counts = vec![0u64; n];
    let mut lats: Vec<Vec<u64>> = vec![Vec::new(); n];
    for s in samples {
        let b = (s.at_ms / BUCKET) as usize;
        counts[b] += 1;
        lats[b].push(s.latency_us);
    }
    let rps: Vec<f64> = counts
        .iter()
        .map(|c| *c as f64 * 1000.0 / BUCKET as f64)
        .collect();
    let p99: Vec<f64> = lats
        .iter_mut()
        .map(|l| {
            l.sort_unstable();
            l.get(((l.len() as f64) * 0.99) as usize)
                .or(l.last())
                .copied()
                .unwrap_or(0) as f64
                / 1000.0
        })
        .collect();
    let (w, h) = (900.0, 200.0);
    let line = |values: &[(f64, f64)], max: f64, color: &str, top: f64| {
        let pts: Vec<String> = values
            .iter()
            .map(|(x, y)| {
                format!(
                    "{:.1},{:.1}",
                    60.0 + x / end as f64 * w,
                    top + h - y / max.max(1e-9) * h
                )
            })
            .collect();
        format!(
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#,
            pts.join(" ")
        )
    };
    let series = |v: &[f64]| {
        v.iter()
            .enumerate()
            .map(|(i, y)| ((i as u64 * BUCKET) as f64, *y))
            .collect::<Vec<_>>()
    };
    let max_rps = rps.iter().cloned().fold(0.0, f64::max);
    let max_p99 = p99.iter().cloned().fold(0.0, f64::max);
    let stock_pts: Vec<(f64, f64)> = stock.iter().map(|(t, s)| (*t as f64, *s as f64)).collect();
    let max_stock = stock_pts.iter().map(|p| p.1).fold(0.0, f64::max);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">"#,
        w + 80.0,
        2.0 * h + 120.0
    );
    svg += r#"<rect width="100%" height="100%" fill="white"/>"#;
    svg += &format!(
        r#"<text x="60" y="20">requests/s (blue, max {max_rps:.0}) and p99 ms (red, max {max_p99:.1}) per 250 ms</text>"#
    );
    svg += &line(&series(&rps), max_rps, "#1f77b4", 30.0);
    svg += &line(&series(&p99), max_p99, "#d62728", 30.0);
    svg += &format!(
        r#"<text x="60" y="{}">units left in Redis (max {max_stock:.0}) over {:.1} s</text>"#,
        h + 70.0,
        end as f64 / 1000.0
    );
    svg += &line(&stock_pts, max_stock, "#2ca02c", h + 80.0);
    svg += "</svg>";
    svg
}
