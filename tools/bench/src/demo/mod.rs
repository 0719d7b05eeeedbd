//! `seckill-bench demo`: a simulated sale end to end, shaped like a real flash sale's traffic.
//! Admission tokens before the start, a countdown on server time, a spike of prechecks
//! and buys with 0–300 ms client jitter and repeated clicks, polling, the drain into Postgres,
//! payment for some and timeout for the rest, release and resale. It ends with a report
//! (per-endpoint req/s and latency, sold / stock, orders in Postgres, oversold, lost), a JSON
//! file of the figures and an SVG chart (plotters) of the load, latency, stock and each Redis
//! node's script calls over the sale's phases. With `--nodes N` the event's shards spread over
//! N Redis nodes. While it runs, a progress line on stderr tells where it is, once a second.
//!
//! [`setup`] starts the servers and creates the event, [`phases`] plays the sale one phase
//! after the other, [`recorder`] measures it, [`report`] and [`chart`] tell what happened.

mod chart;
mod phases;
mod recorder;
mod report;
mod setup;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Result;
use futures::{StreamExt, stream};
use serde_json::{Value, json};

use crate::load::{Call, once};
use recorder::{Phase, Recorder, Shared, Watch};

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
    /// Redis nodes (each a `redis-server` with an fsync'd append-only file): the event's shards
    /// are spread over them, and the report and chart show each one's script calls.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
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

/// The event on sale.
const EVENT: &str = "demo";

/// Runs the demo and prints the report.
pub async fn run(args: DemoArgs) -> Result<()> {
    let servers = setup::Servers::start(args.rest, args.nodes).await?;
    let start_ms = setup::create_event(servers.host.addr, &args).await?;
    // The clock starts here, before admission, and the watchers with it.
    let sale = Sale::new(servers.host.addr, args.shards);
    let watch = Watch::start(&sale.rec, sale.addr, servers.redis.clone());
    let admitted = sale.admission(args.users).await?;
    sale.countdown(start_ms).await?;
    let first_wave = sale.buy_wave(&admitted, args.stock).await?;
    sale.poll(&first_wave).await?;
    let paid = sale.pay(&first_wave, &args).await?;
    sale.payment_window(args.payment_timeout_s).await;
    let resold = sale.resale(&admitted, &first_wave).await?;
    sale.settle().await;
    watch.stop();
    let outcome = report::Outcome {
        first_wave,
        paid,
        resold,
    };
    report::write(&servers.pg, &sale, &args, &outcome).await
}

/// The sale as its buyers see it: the host, the event's shard count (which the storefront
/// gives the buyer routes as `?shards=`), and the recorder of every request they send.
#[derive(Clone)]
struct Sale {
    addr: SocketAddr,
    shards: u32,
    rec: Shared,
}

impl Sale {
    /// A sale of an event of `shards` shards on the host at `addr`, whose recorder's clock
    /// starts now.
    fn new(addr: SocketAddr, shards: u32) -> Self {
        Sale {
            addr,
            shards,
            rec: Arc::new(Mutex::new(Recorder::new())),
        }
    }

    /// A buyer route (admission, precheck, buy, poll) with the `?shards=` hint that finds the
    /// buyer's home shard at once.
    fn hinted(&self, route: &str) -> String {
        format!("{route}?shards={}", self.shards)
    }

    /// Records that `phase` begins now.
    fn enter(&self, phase: Phase) {
        self.rec.lock().unwrap().enter(phase);
    }

    /// Sends one request to `endpoint` and records its latency and status; returns the status
    /// and the JSON body (null if it is not JSON).
    async fn timed(&self, endpoint: &'static str, call: Call) -> Result<(u16, Value)> {
        let start = Instant::now();
        let (status, body) = once(self.addr, call).await?;
        let latency_us = start.elapsed().as_micros() as u64;
        self.rec
            .lock()
            .unwrap()
            .record(endpoint, latency_us, status);
        Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    }

    /// One click: precheck, then buy with the purchase token. Returns the order id on a 202.
    async fn precheck_and_buy(&self, jwt: &str, admission: &str) -> Result<Option<String>> {
        let body = json!({ "admission_token": admission });
        let precheck = post(&self.hinted("precheck"), jwt, body);
        let (status, body) = self.timed("precheck", precheck).await?;
        if status != 200 {
            return Ok(None);
        }
        let buy = post(
            &self.hinted("buy"),
            jwt,
            json!({ "purchase_token": body["purchase_token"] }),
        );
        let (status, body) = self.timed("buy", buy).await?;
        Ok((status == 202).then(|| body["order_id"].as_str().unwrap_or_default().to_owned()))
    }
}

/// A buyer's POST to `/api/events/{EVENT}/{route}`, with their JWT and a JSON body.
fn post(route: &str, jwt: &str, body: Value) -> Call {
    Call::post(
        format!("/api/events/{EVENT}/{route}"),
        Some(jwt.to_owned()),
        &body,
    )
}

/// [`each`], keeping the results that are `Some`.
async fn each_some<I, F, Fut, T>(items: I, n: usize, f: F) -> Result<Vec<T>>
where
    I: IntoIterator,
    F: FnMut(I::Item) -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    Ok(each(items, n, f).await?.into_iter().flatten().collect())
}

/// Runs `f` on every item, `n` at a time; returns the results in the order they finished, or
/// the first error among them.
async fn each<I, F, Fut, T>(items: I, n: usize, f: F) -> Result<Vec<T>>
where
    I: IntoIterator,
    F: FnMut(I::Item) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    stream::iter(items)
        .map(f)
        .buffer_unordered(n)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}
