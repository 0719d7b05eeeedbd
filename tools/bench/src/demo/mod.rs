//! `seckill-bench demo`: a simulated sale end to end, shaped like a real flash sale's traffic.
//! Admission tokens before the start, a countdown on server time, a spike of prechecks
//! and buys with 0–300 ms client jitter and repeated clicks; each winner then polls until the
//! drain lands the order in Postgres and pays soon after (or lets the window pass), as a person
//! does, whatever the others are doing; release and resale. Buyers reach the host over
//! kept-alive connections, as browsers and the load balancer in front of a deployment do, and
//! act as the storefront does:
//! a `503` is retried after its `Retry-After` plus jitter, a request that got no response is
//! counted by kind and clicked again; none stops the sale. It ends with a report (paid,
//! expired, resold, per-endpoint req/s, latency and statuses, the `503`s by who gave them,
//! per request class (the manifest's) what was answered and what the host shed, the critical
//! requests shed (the provider's webhook deliveries, the job route), requests without a
//! response, oversold, lost, drift), a JSON file of the figures and an SVG
//! chart (plotters) of the load, latency, stock and each Redis node's script calls over the
//! sale's phases, and fails when the books do not balance, nobody paid, or too many requests
//! got no response ([`report::MAX_FAILED_SHARE`]). With `--nodes N` the event's shards spread
//! over N Redis nodes. While it runs, a progress line on stderr tells where it is.
//!
//! [`setup`] starts the servers and creates the event, [`phases`] plays the sale one phase
//! after the other, [`recorder`] measures it, [`report`] and [`chart`] tell what happened,
//! [`shop`] what the shop's systems heard of the orders (signed order events, and the report
//! fails when one never arrived or did not verify).

mod chart;
mod phases;
mod recorder;
mod report;
mod setup;
mod shop;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::{StreamExt, stream};
use serde_json::Value;

use crate::load::{Call, KeptAlive};
use recorder::{Phase, Recorder, Sample, Shared, Unavailable, Watch};
use seckill_host::trigger::classes::Classifier;
use seckill_testkit::walk::{Buyer, Client, Reply, Request};

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
    /// Seconds to pay before an order expires, counted from the buy: each payer pays once the
    /// drain has landed their order (a second or two) and they have read the page.
    #[arg(long, default_value_t = 30)]
    pub payment_timeout_s: u64,
    /// Share of winners who mean to pay (the rest let the window pass, and their units are
    /// resold).
    #[arg(long, default_value_t = 0.7)]
    pub pay_share: f64,
    /// Request instances the host keeps alive at once (its `--max-instances`; default: the
    /// host's, 64 per core).
    #[arg(long)]
    pub max_instances: Option<u32>,
    /// Where the report JSON and chart go.
    #[arg(long, default_value = "target/demo")]
    pub out: String,
    /// Reach Redis through Upstash's REST protocol over pooled HTTPS (a REST facade in front of
    /// the demo's redis-server, `tools/testkit/src/rest_facade.rs`) instead of `redis://`.
    #[arg(long)]
    pub rest: bool,
}

/// The event on sale.
const EVENT: &str = "demo";

/// The manifest the demo's host runs, whose request classes sort the report's figures.
const MANIFEST: &str = "spin.toml";

/// Runs the demo and prints the report.
pub async fn run(args: DemoArgs) -> Result<()> {
    let host_log = std::path::Path::new(&args.out).join("host.log");
    let servers = setup::Servers::start(&args, &host_log).await?;
    let start_ms = setup::create_event(servers.host.addr, &args).await?;
    servers.shop.register(servers.host.addr).await?;
    // The clock starts here, before admission, and the watchers with it.
    let classes = Classifier::load(&seckill_testkit::repo_root().join(MANIFEST))?;
    let sale = Sale::new(servers.host.addr, args.shards, classes);
    let watch = Watch::start(&sale.rec, sale.addr, servers.redis.clone());
    let admitted = sale.admission(args.users).await;
    sale.countdown(start_ms).await?;
    let first_wave = sale.buy_wave(&admitted, &args).await;
    let paid_twice = sale.pay_twice(&servers.provider, &first_wave);
    sale.payment_window(&first_wave, args.payment_timeout_s)
        .await;
    let resold = sale.resale(&admitted, &first_wave).await;
    let refunds_shown = sale.settle(&paid_twice).await;
    watch.stop();
    let outcome = report::Outcome {
        first_wave,
        resold,
        paid_twice: paid_twice.len(),
        refunds_shown,
    };
    report::write(&servers, &sale, &args, &outcome).await
}

/// The sale as its buyers see it: the host, the event's shard count (which the storefront
/// gives the buyer routes as `?shards=`), and the recorder of every request they send (and
/// the provider's webhook deliveries, and the job route the report calls).
#[derive(Clone)]
struct Sale {
    addr: SocketAddr,
    /// How buyers' requests reach the host: over kept-alive connections, as a browser keeps its
    /// connection and as the load balancer or CDN in front of every deployment reaches the
    /// origin (`seckill-bench --only spike` measures a connection per request beside it).
    origin: KeptAlive,
    shards: u32,
    rec: Shared,
    /// The payers' browser at the provider's hosted checkout (redirects not followed: the
    /// return page is the storefront's).
    browser: reqwest::Client,
    /// Each request's class, for the report.
    classes: Arc<Classifier>,
}

impl Sale {
    /// A sale of an event of `shards` shards on the host at `addr`, whose routes `classes`
    /// sorts, and whose recorder's clock starts now.
    fn new(addr: SocketAddr, shards: u32, classes: Classifier) -> Self {
        let browser = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a client");
        Sale {
            addr,
            origin: KeptAlive::new(addr),
            shards,
            rec: Arc::new(Mutex::new(Recorder::new())),
            browser,
            classes: Arc::new(classes),
        }
    }

    /// `user` buying at the event, with the `?shards=` hint that finds their home shard at
    /// once.
    fn buyer(&self, user: &str) -> Buyer {
        Buyer::new(EVENT, user, Some(self.shards))
    }

    /// Records that `phase` begins now.
    fn enter(&self, phase: Phase) {
        self.rec.lock().unwrap().enter(phase);
    }

    /// Sends one request to `endpoint` and records its class, latency and status (and who
    /// said a `503`); returns the answer, or `None` when no response came (recorded by kind).
    async fn ask(&self, endpoint: &'static str, call: Call) -> Option<Reply> {
        let class = self.classes.classify(&call.method, call.route_path());
        let start = Instant::now();
        let sent = tokio::time::timeout(CLIENT_TIMEOUT, self.origin.send(call)).await;
        let latency_us = start.elapsed().as_micros() as u64;
        let answer = match sent {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                self.rec
                    .lock()
                    .unwrap()
                    .record_failure(endpoint, class, failure_kind(&e));
                return None;
            }
            Err(_) => {
                let kind = "no response within the client's timeout";
                self.rec
                    .lock()
                    .unwrap()
                    .record_failure(endpoint, class, kind);
                return None;
            }
        };
        let body = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        let shed = answer.is_shed();
        let mut rec = self.rec.lock().unwrap();
        let us = |d: Duration| d.as_micros() as u64;
        rec.record(Sample {
            endpoint,
            class,
            at_ms: 0,
            latency_us,
            host_us: answer.timing.at_host().map(us),
            socket_us: answer.at_socket.map(us),
            queued_us: answer.timing.queue.map(us),
            status: answer.status,
            shed,
        });
        if answer.status == 503 {
            rec.record_unavailable(endpoint, who_said(shed, &body));
        }
        Some(Reply {
            status: answer.status,
            retry_after_s: answer.retry_after_s,
            body,
        })
    }
}

/// How long a buyer's browser waits for an answer before it gives up on the request.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// The buyers walk over the recording client: a request that got no answer is an error.
impl Client for Sale {
    async fn send(&self, request: Request) -> Result<Reply> {
        let endpoint = request.step.name();
        self.ask(endpoint, Call::from(request))
            .await
            .ok_or_else(|| anyhow::anyhow!("{endpoint}: no answer"))
    }
}

/// Who gave a `503`: the host, which `shed` it, or the app by its error message.
fn who_said(shed: bool, body: &Value) -> Unavailable {
    if shed {
        return Unavailable::Shed;
    }
    match body["error"]["message"].as_str() {
        Some(seckill_domain::sale::STILL_LOOKING) => Unavailable::TryAgain,
        _ => Unavailable::App,
    }
}

/// The kind of a failed request, for the report: what a client sees of it.
fn failure_kind(e: &anyhow::Error) -> &'static str {
    for cause in e.chain() {
        if let Some(e) = cause.downcast_ref::<hyper::Error>() {
            if e.is_incomplete_message() {
                return "connection closed before the response";
            }
            if e.is_timeout() {
                return "timed out";
            }
        }
        if let Some(e) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            return match e.kind() {
                ConnectionRefused => "connection refused",
                ConnectionReset => "connection reset",
                ConnectionAborted => "connection aborted",
                BrokenPipe => "broken pipe",
                TimedOut => "timed out",
                AddrNotAvailable | AddrInUse => "no local port free",
                _ => "other i/o error",
            };
        }
    }
    "other"
}

/// Runs `f` on every item, `n` at a time; returns the results in the order they finished.
async fn each<I, F, Fut, T>(items: I, n: usize, f: F) -> Vec<T>
where
    I: IntoIterator,
    F: FnMut(I::Item) -> Fut,
    Fut: Future<Output = T>,
{
    stream::iter(items)
        .map(f)
        .buffer_unordered(n)
        .collect::<Vec<_>>()
        .await
}
