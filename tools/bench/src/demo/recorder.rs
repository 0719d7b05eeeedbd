//! What the simulated sale measures while it runs: every request, the units left, each Redis
//! node's script calls, the phases; and the three watchers that run beside the sale (the stock
//! sampler, the script sampler and the progress line).

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use seckill_host::runtime::overload::Class;
use seckill_testkit::{ADMIN_TOKEN, RedisServer};
use serde_json::Value;
use tokio::task::JoinHandle;

use super::EVENT;
use crate::load::{Call, once};

/// One measured request.
#[derive(Clone)]
pub struct Sample {
    pub endpoint: &'static str,
    /// Its request class, as the manifest declares it (`None`: no route matched).
    pub class: Option<Class>,
    pub at_ms: u64,
    pub latency_us: u64,
    /// Its time at the host, as the host said (`Server-Timing`'s `host`: from its head's first
    /// byte, before any queue, to its answer).
    pub host_us: Option<u64>,
    /// Its time at the buyer's socket (request sent to answer received, as the kernel stamped
    /// it): the buyers' machine's own waits left out, as on a buyer's own device.
    pub socket_us: Option<u64>,
    /// Of its time at the host, the wait for an instance slot (`Server-Timing`'s `queue`).
    pub queued_us: Option<u64>,
    pub status: u16,
    /// The host's own `503`: no instance slot for it (it never ran).
    pub shed: bool,
}

/// Script calls (EVALSHA + EVAL) on each Redis node over one sampling interval.
#[derive(Clone)]
pub struct NodeSample {
    /// When the interval ended.
    pub at_ms: u64,
    /// How long it was.
    pub over_ms: u64,
    /// Calls on each node, in `redis_url`'s order.
    pub scripts: Vec<u64>,
}

impl NodeSample {
    /// Node `i`'s script calls per second over the interval.
    pub fn rate(&self, i: usize) -> f64 {
        self.scripts.get(i).copied().unwrap_or(0) as f64 * 1000.0 / self.over_ms.max(1) as f64
    }
}

/// How often each node's script calls are sampled.
const SCRIPT_SAMPLE_MS: u64 = 500;

/// The stages the simulated sale goes through, in order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    /// Buyers ask for admission tokens before the sale.
    Admission,
    /// The countdown on server time until the sale opens.
    Countdown,
    /// The spike of prechecks and buys at the opening; each winner then polls until the drain
    /// lands the order in Postgres and pays, or lets the window pass.
    BuyWave,
    /// The last unpaid orders' payment window runs out and their units are released.
    PaymentWindow,
    /// Buyers without an order try again for the released units.
    Resale,
    /// The drain lands the resale's orders.
    Settle,
}

impl Phase {
    /// The name on the chart and on the progress line.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Admission => "admission tokens",
            Phase::Countdown => "waiting for start",
            Phase::BuyWave => "buy wave, polls, payments",
            Phase::PaymentWindow => "payment window",
            Phase::Resale => "resale",
            Phase::Settle => "drain settles",
        }
    }
}

/// Everything the simulation measured, timed in ms since `origin`.
pub struct Recorder {
    /// The clock's zero, taken before the admission phase so that pre-sale requests get their
    /// real times (the chart shifts everything to the sale's opening).
    origin: Instant,
    /// Every measured request, in the order they finished.
    pub samples: Vec<Sample>,
    /// Units left in Redis, sampled every 200 ms: (ms, units).
    pub stock_left: Vec<(u64, i64)>,
    /// Each phase when it began: (phase, ms), in order.
    pub phases: Vec<(Phase, u64)>,
    /// Turns seen in the stock samples ("sold out", "units released"): (name, ms).
    pub marks: Vec<(&'static str, u64)>,
    /// Each Redis node's script calls, sampled every [`SCRIPT_SAMPLE_MS`].
    pub node_scripts: Vec<NodeSample>,
    /// Requests that got no response, by (endpoint, kind of failure).
    pub failures: BTreeMap<(&'static str, &'static str), u64>,
    /// Requests that got no response, by request class.
    pub failures_by_class: BTreeMap<Class, u64>,
    /// `503`s, by (endpoint, who said it: [`Unavailable`]).
    pub unavailable: BTreeMap<(&'static str, Unavailable), u64>,
    /// Buyers who gave up on a step after every try was told to come back, by endpoint.
    pub gave_up: BTreeMap<&'static str, u64>,
    /// How late the buyers' own machine woke a timer, sampled every [`LAG_SAMPLE`]: (ms, µs
    /// late). A buyer's answer waits as long to be read, and counts in the buyers' figures.
    pub lag: Vec<(u64, u64)>,
}

/// How often the buyers' machine's lateness is sampled.
pub const LAG_SAMPLE: Duration = Duration::from_millis(10);

/// Who answered a `503`, read from its error message.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Unavailable {
    /// The host: no instance slot came free in time (the request never ran).
    Shed,
    /// A buy's tail found no unit on the shards it asked while others may hold some.
    TryAgain,
    /// The app: Redis or Postgres busy or unreachable, the sale paused.
    App,
}

impl Unavailable {
    /// Its name in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Unavailable::Shed => "shed by the host",
            Unavailable::TryAgain => "try again (tail)",
            Unavailable::App => "app",
        }
    }
}

impl Recorder {
    /// An empty recorder whose clock starts now.
    pub fn new() -> Self {
        Recorder {
            origin: Instant::now(),
            samples: Vec::new(),
            stock_left: Vec::new(),
            phases: Vec::new(),
            marks: Vec::new(),
            node_scripts: Vec::new(),
            failures: BTreeMap::new(),
            failures_by_class: BTreeMap::new(),
            unavailable: BTreeMap::new(),
            gave_up: BTreeMap::new(),
            lag: Vec::new(),
        }
    }

    /// Milliseconds since `origin`.
    pub fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Records that `phase` begins now.
    pub fn enter(&mut self, phase: Phase) {
        let at = self.now_ms();
        self.phases.push((phase, at));
    }

    /// Records a request of `class` that got no response, and why.
    pub fn record_failure(
        &mut self,
        endpoint: &'static str,
        class: Option<Class>,
        kind: &'static str,
    ) {
        *self.failures.entry((endpoint, kind)).or_default() += 1;
        if let Some(class) = class {
            *self.failures_by_class.entry(class).or_default() += 1;
        }
    }

    /// Records a buyer giving up on a step at `endpoint`.
    pub fn record_gave_up(&mut self, endpoint: &'static str) {
        *self.gave_up.entry(endpoint).or_default() += 1;
    }

    /// Records who answered a `503` of `endpoint`.
    pub fn record_unavailable(&mut self, endpoint: &'static str, by: Unavailable) {
        *self.unavailable.entry((endpoint, by)).or_default() += 1;
    }

    /// Records `sample`, which finished now.
    pub fn record(&mut self, sample: Sample) {
        let at_ms = self.now_ms();
        self.samples.push(Sample { at_ms, ..sample });
    }

    /// When the sale opened (the chart's zero); 0 if it has not.
    pub fn open_ms(&self) -> u64 {
        self.phases
            .iter()
            .find(|(p, _)| *p == Phase::BuyWave)
            .map_or(0, |(_, at)| *at)
    }

    /// Records a stock sample, and marks the moments the stock runs out or comes back.
    pub fn record_stock(&mut self, at: u64, left: i64) {
        match self.stock_left.last() {
            Some((_, prev)) if *prev > 0 && left <= 0 => self.marks.push(("sold out", at)),
            Some((_, prev)) if *prev <= 0 && left > 0 => self.marks.push(("units released", at)),
            _ => {}
        }
        self.stock_left.push((at, left));
    }

    /// Each node's script calls over every sample.
    pub fn scripts_per_node(&self) -> Vec<u64> {
        let nodes = self.node_scripts.first().map_or(0, |s| s.scripts.len());
        (0..nodes)
            .map(|i| self.node_scripts.iter().map(|s| s.scripts[i]).sum())
            .collect()
    }

    /// One line on where the demo is: elapsed time, phase, requests, accepted buys, the last
    /// second's request rate and the units left (and each node's scripts/s, over several).
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
        let mut line = format!(
            "[{:6.1} s] {phase}: {} requests, {accepted} buys accepted, {last_second} req/s, {left} units left",
            now as f64 / 1000.0,
            self.samples.len()
        );
        if let Some(s) = self.node_scripts.last().filter(|s| s.scripts.len() > 1) {
            let rates: Vec<String> = (0..s.scripts.len())
                .map(|i| format!("{:.0}", s.rate(i)))
                .collect();
            line += &format!(", scripts/s per node {}", rates.join(" / "));
        }
        line
    }
}

/// The recorder, shared by every request task, the stock sampler and the progress line.
pub type Shared = Arc<Mutex<Recorder>>;

/// The stock sampler, the script sampler and the progress line, running until [`Watch::stop`].
pub struct Watch([JoinHandle<()>; 4]);

impl Watch {
    /// Starts sampling the stock of the host at `addr` and the script calls of the Redis
    /// `nodes`, and printing the progress line.
    pub fn start(rec: &Shared, addr: SocketAddr, nodes: Arc<Vec<RedisServer>>) -> Self {
        Watch([
            tokio::spawn(sample_stock(rec.clone(), addr)),
            tokio::spawn(sample_scripts(rec.clone(), nodes)),
            tokio::spawn(print_progress(rec.clone())),
            tokio::spawn(sample_lag(rec.clone())),
        ])
    }

    /// Stops both, and erases the progress line.
    pub fn stop(self) {
        for task in self.0 {
            task.abort();
        }
        clear_progress();
    }
}

/// Samples how late a timer of [`LAG_SAMPLE`] fires on the buyers' runtime: the time a woken
/// buyer waits for its turn (the buyers, the provider and the host share this machine's cores).
async fn sample_lag(rec: Shared) {
    loop {
        let start = Instant::now();
        tokio::time::sleep(LAG_SAMPLE).await;
        let late = start.elapsed().saturating_sub(LAG_SAMPLE).as_micros() as u64;
        let mut r = rec.lock().unwrap();
        let at = r.now_ms();
        r.lag.push((at, late));
    }
}

/// Samples the units left every 200 ms, for the chart and the progress line.
async fn sample_stock(rec: Shared, addr: SocketAddr) {
    loop {
        let call = Call::get(format!("/admin/events/{EVENT}"), Some(ADMIN_TOKEN.into()));
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

/// Takes each node's script calls (`INFO commandstats`, which it resets) every
/// [`SCRIPT_SAMPLE_MS`], for the chart and the report: the buyers', the scheduled jobs' and
/// the stock sampler's.
async fn sample_scripts(rec: Shared, nodes: Arc<Vec<RedisServer>>) {
    let take = |nodes: Arc<Vec<RedisServer>>| async move {
        tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<u64>> {
            nodes
                .iter()
                .map(|n| n.take_script_calls().map(|(sha, eval)| sha + eval))
                .collect()
        })
        .await
        .ok()
        .and_then(Result::ok)
    };
    // The set-up's calls are not the sale's.
    take(nodes.clone()).await;
    let mut since = rec.lock().unwrap().now_ms();
    loop {
        tokio::time::sleep(Duration::from_millis(SCRIPT_SAMPLE_MS)).await;
        let Some(scripts) = take(nodes.clone()).await else {
            continue;
        };
        let mut r = rec.lock().unwrap();
        let at_ms = r.now_ms();
        r.node_scripts.push(NodeSample {
            at_ms,
            over_ms: at_ms - since,
            scripts,
        });
        since = at_ms;
    }
}

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
pub fn say(line: std::fmt::Arguments) {
    clear_progress();
    println!("{line}");
}

/// A recorder with a made-up sale: each phase 2 s long, load during the buy wave and the
/// resale, the stock selling out, coming back and selling out again.
#[cfg(test)]
pub fn synthetic() -> Recorder {
    let mut r = Recorder::new();
    let phases = [
        Phase::Admission,
        Phase::Countdown,
        Phase::BuyWave,
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
            class: Some(Class::Sale),
            at_ms,
            latency_us: 1_000 + at_ms % 7_000,
            host_us: None,
            socket_us: None,
            queued_us: None,
            status: if at_ms < 5_000 { 202 } else { 409 },
            shed: false,
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
    // Two nodes, the second busier, load during the buy wave.
    for at_ms in (500..16_000).step_by(500) {
        let busy = (4_000..6_000).contains(&at_ms);
        let scripts = if busy {
            vec![1_000, 1_500]
        } else {
            vec![10, 10]
        };
        r.node_scripts.push(NodeSample {
            at_ms,
            over_ms: 500,
            scripts,
        });
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stock's turns are marked once each way.
    #[test]
    fn stock_marks_each_turn_once() {
        let r = synthetic();
        let marks: Vec<(&str, u64)> = r.marks.clone();
        assert_eq!(
            marks,
            [
                ("sold out", 6_000),
                ("units released", 12_000),
                ("sold out", 13_000)
            ]
        );
    }

    /// The progress line reads the recorder: the current phase, requests, accepted buys, units,
    /// each node's scripts/s.
    #[test]
    fn progress_line_reads_the_recorder() {
        let line = synthetic().progress_line();
        assert!(line.contains("drain settles"), "{line}");
        assert!(line.contains("3200 requests"), "{line}");
        assert!(line.contains("500 buys accepted"), "{line}");
        assert!(line.contains("0 units left"), "{line}");
        assert!(line.contains("scripts/s per node 20 / 20"), "{line}");
    }

    /// A node's calls over an interval are a rate per second; the totals sum every sample.
    #[test]
    fn node_samples_give_rates_and_totals() {
        let r = synthetic();
        assert_eq!(r.node_scripts[8].rate(1), 3_000.0);
        assert_eq!(r.node_scripts[0].rate(0), 20.0);
        // 4 busy samples (4.0–5.5 s) and 27 quiet ones.
        assert_eq!(
            r.scripts_per_node(),
            [4 * 1_000 + 27 * 10, 4 * 1_500 + 27 * 10]
        );
    }

    /// The sale opens when the buy wave begins.
    #[test]
    fn open_ms_is_the_buy_waves_start() {
        assert_eq!(synthetic().open_ms(), 4_000);
        assert_eq!(Recorder::new().open_ms(), 0);
    }
}
