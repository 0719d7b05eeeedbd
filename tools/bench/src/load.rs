//! A small HTTP load generator over keep-alive HTTP/1.1 connections, in two modes:
//! - closed loop ([`closed_loop`]): each connection sends its next request as soon as the
//!   previous one is answered, which finds the peak;
//! - open loop ([`open_loop`]): requests are due at a fixed arrival rate whatever the server
//!   does, and latency counts from when a request was due, so a server that falls behind shows
//!   it in the percentiles instead of silently slowing the generator down (wrk2's correction
//!   for coordinated omission).
//!
//! It records every latency and the CPU it used itself, so results on a 2-core machine can be
//! read honestly (the host under test runs in another process).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use crate::wire::{StampedConnector, Wire};

/// One request to send.
#[derive(Clone)]
pub struct Call {
    /// Method.
    pub method: Method,
    /// Path and query.
    pub path: String,
    /// `Authorization: Bearer …`, if any.
    pub bearer: Option<String>,
    /// JSON body (empty for none).
    pub body: Bytes,
    /// Other headers (a webhook's signature).
    pub headers: Vec<(&'static str, String)>,
}

impl Call {
    /// A GET.
    pub fn get(path: impl Into<String>, bearer: Option<String>) -> Self {
        Call {
            method: Method::GET,
            path: path.into(),
            bearer,
            body: Bytes::new(),
            headers: Vec::new(),
        }
    }

    /// A buy: `POST path` with the buyer's JWT and purchase token.
    pub fn buy(path: &str, jwt: &str, purchase_token: &str) -> Self {
        Self::post(
            path,
            Some(jwt.to_owned()),
            &serde_json::json!({ "purchase_token": purchase_token }),
        )
    }

    /// A POST with a JSON body.
    pub fn post(path: impl Into<String>, bearer: Option<String>, body: &serde_json::Value) -> Self {
        Call {
            method: Method::POST,
            path: path.into(),
            bearer,
            body: Bytes::from(body.to_string()),
            headers: Vec::new(),
        }
    }

    /// An empty-bodied `method path` with `bearer` (a job route, an admin write's set-up).
    pub fn empty(method: Method, path: impl Into<String>, bearer: Option<String>) -> Self {
        Call {
            method,
            path: path.into(),
            bearer,
            body: Bytes::new(),
            headers: Vec::new(),
        }
    }

    /// A payment provider's webhook delivery: `body` exactly as signed, and its
    /// `Stripe-Signature`.
    pub fn webhook(body: String, signature: String) -> Self {
        Call {
            method: Method::POST,
            path: "/api/payments/webhook".into(),
            bearer: None,
            body: Bytes::from(body),
            headers: vec![("stripe-signature", signature)],
        }
    }

    /// The path without its query, as routes match it.
    pub fn route_path(&self) -> &str {
        self.path
            .split_once('?')
            .map_or(&self.path, |(path, _)| path)
    }

    /// The request, for the server at `host`.
    fn request(self, host: &str) -> Result<Request<Full<Bytes>>> {
        let mut req = Request::builder()
            .method(self.method)
            .uri(self.path)
            .header("host", host)
            .header("content-type", "application/json");
        if let Some(b) = self.bearer {
            req = req.header("authorization", format!("Bearer {b}"));
        }
        for (name, value) in self.headers {
            req = req.header(name, value);
        }
        Ok(req.body(Full::new(self.body))?)
    }
}

/// A step of a buyer's walk, sent by the generator.
impl From<seckill_testkit::walk::Request> for Call {
    fn from(request: seckill_testkit::walk::Request) -> Self {
        Call {
            method: request.method,
            path: request.path,
            bearer: Some(request.bearer),
            body: request
                .body
                .map_or_else(Bytes::new, |b| Bytes::from(b.to_string())),
            headers: Vec::new(),
        }
    }
}

/// The request to send as the `i`-th of a run; `None` ends the run early.
pub type Calls = Arc<dyn Fn(u64) -> Option<Call> + Send + Sync>;

/// What a run keeps of each answer: called with the request's index, status and body.
pub type Keep = Arc<dyn Fn(u64, u16, &Bytes) + Send + Sync>;

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// Requests answered.
    pub requests: u64,
    /// By status.
    pub statuses: BTreeMap<u16, u64>,
    /// Wall time.
    pub elapsed: Duration,
    /// Latency percentiles.
    pub p50: Duration,
    /// 95th.
    pub p95: Duration,
    /// 99th.
    pub p99: Duration,
    /// CPU seconds the generator used (user + system).
    pub cpu_seconds: f64,
}

impl Report {
    /// Requests per second.
    pub fn rps(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }
}

/// CPU seconds used by this process so far (from /proc; clock ticks are 100 Hz on Linux).
pub fn cpu_seconds() -> f64 {
    cpu_seconds_of("self")
}

/// CPU seconds (user + system) process `pid` (or `"self"`) has used so far, from /proc.
pub fn cpu_seconds_of(pid: &str) -> f64 {
    cpu_seconds_in(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default())
}

/// CPU seconds (utime + stime) in the text of a `/proc/<pid>/stat`; 0 for what does not parse.
fn cpu_seconds_in(stat: &str) -> f64 {
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// The `p` percentile (0.0–1.0) of `sorted`, by nearest rank; `None` when it is empty.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    let i = ((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(i).copied()
}

/// `total` (CPU seconds, script calls, …) per request; a run with no request counts as one.
pub fn per_request(total: f64, requests: u64) -> f64 {
    total / requests.max(1) as f64
}

/// One keep-alive client connection.
pub struct Conn {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    host: String,
}

impl Conn {
    /// Connects to `addr`.
    pub async fn open(addr: SocketAddr) -> Result<Self> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        Ok(Conn {
            sender,
            host: addr.to_string(),
        })
    }

    /// Sends `call` and reads the whole response; returns the status and the body.
    async fn send(&mut self, call: Call) -> Result<(u16, Bytes)> {
        let answer = self.ask(call).await?;
        Ok((answer.status, answer.body))
    }

    /// Sends `call` and reads the whole response.
    pub async fn ask(&mut self, call: Call) -> Result<Answer> {
        let req = call.request(&self.host)?;
        self.sender.ready().await?;
        Answer::read(self.sender.send_request(req).await?).await
    }
}

/// What one connection saw: latencies in µs, and statuses.
type Seen = (Vec<u32>, BTreeMap<u16, u64>);

/// Merges what the connections saw into a report.
async fn report(
    tasks: Vec<tokio::task::JoinHandle<Result<Seen>>>,
    start: Instant,
    cpu_start: f64,
) -> Result<Report> {
    let mut latencies = Vec::new();
    let mut statuses = BTreeMap::new();
    for t in tasks {
        let (l, s) = t.await??;
        latencies.extend(l);
        for (k, v) in s {
            *statuses.entry(k).or_insert(0) += v;
        }
    }
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    let pct = |p: f64| Duration::from_micros(percentile(&latencies, p).unwrap_or(0) as u64);
    Ok(Report {
        requests: latencies.len() as u64,
        statuses,
        elapsed,
        p50: pct(0.50),
        p95: pct(0.95),
        p99: pct(0.99),
        cpu_seconds: cpu_seconds() - cpu_start,
    })
}

/// Runs `calls(i)` for i = 0, 1, … over `connections` connections until `calls` returns `None`
/// or `duration` has passed.
pub async fn closed_loop(
    addr: SocketAddr,
    connections: usize,
    duration: Duration,
    calls: Calls,
) -> Result<Report> {
    closed_loop_keeping(addr, connections, duration, calls, Arc::new(|_, _, _| {})).await
}

/// [`closed_loop`], handing each answer to `keep`.
pub async fn closed_loop_keeping(
    addr: SocketAddr,
    connections: usize,
    duration: Duration,
    calls: Calls,
    keep: Keep,
) -> Result<Report> {
    let next = Arc::new(AtomicU64::new(0));
    let cpu_start = cpu_seconds();
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (next, calls, keep) = (next.clone(), calls.clone(), keep.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await?;
            let mut seen = Seen::default();
            while Instant::now() < deadline {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(call) = calls(i) else {
                    break;
                };
                let sent = Instant::now();
                let (status, body) = conn.send(call).await?;
                seen.0.push(sent.elapsed().as_micros() as u32);
                *seen.1.entry(status).or_insert(0u64) += 1;
                keep(i, status, &body);
            }
            anyhow::Ok(seen)
        }));
    }
    report(tasks, start, cpu_start).await
}

/// Sends `calls(i)` at `rate` requests per second for `duration`, spread over `connections`
/// connections (connection k sends requests k, k + connections, …, each at its due time or as
/// soon as its previous one is answered). Latency counts from the due time when the connection
/// was still busy then.
pub async fn open_loop(
    addr: SocketAddr,
    connections: usize,
    rate: f64,
    duration: Duration,
    calls: Calls,
) -> Result<Report> {
    let total = (rate * duration.as_secs_f64()) as u64;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let mut conns = Vec::new();
    for _ in 0..connections {
        conns.push(Conn::open(addr).await?);
    }
    let cpu_start = cpu_seconds();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (k, mut conn) in conns.into_iter().enumerate() {
        let calls = calls.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen = Seen::default();
            let mut free_since = start;
            for i in (k as u64..total).step_by(connections) {
                let due = start + interval * i as u32;
                tokio::time::sleep_until(due.into()).await;
                let Some(call) = calls(i) else { break };
                // A connection that was idle at the due time waited only for the timer (1 ms
                // granularity): the generator's delay, not the server's, so count from the send.
                let from = if free_since <= due {
                    Instant::now()
                } else {
                    due
                };
                let (status, _) = conn.send(call).await?;
                free_since = Instant::now();
                seen.0.push((free_since - from).as_micros() as u32);
                *seen.1.entry(status).or_insert(0u64) += 1;
            }
            anyhow::Ok(seen)
        }));
    }
    report(tasks, start, cpu_start).await
}

/// One request on a fresh connection; returns status and body (for job calls and set-up).
pub async fn once(addr: SocketAddr, call: Call) -> Result<(u16, Bytes)> {
    let answer = send(addr, call).await?;
    Ok((answer.status, answer.body))
}

/// A response as a client reads it.
pub struct Answer {
    /// The status.
    pub status: u16,
    /// `Retry-After` in seconds, if the server gave one.
    pub retry_after_s: Option<u64>,
    /// Where the request's time at the server went, if it said (`Server-Timing`).
    pub timing: ServerTiming,
    /// The whole body.
    pub body: Bytes,
    /// At the client's socket, from the request's first byte sent to its answer's received
    /// ([`crate::wire`]; kept-alive connections only).
    pub at_socket: Option<Duration>,
}

impl Answer {
    /// Reads `resp` whole.
    async fn read(resp: http::Response<hyper::body::Incoming>) -> Result<Answer> {
        let status = resp.status().as_u16();
        let header = |name| resp.headers().get(name).and_then(|v| v.to_str().ok());
        let retry_after_s = header(http::header::RETRY_AFTER).and_then(|v| v.parse().ok());
        let timing = header(http::header::HeaderName::from_static("server-timing"))
            .map_or_else(ServerTiming::default, ServerTiming::parse);
        let body = resp.into_body().collect().await?.to_bytes();
        Ok(Answer {
            status,
            retry_after_s,
            timing,
            body,
            at_socket: None,
        })
    }

    /// Whether this is the host's own shed answer (`503`, its plain-text message): the request
    /// never ran.
    pub fn is_shed(&self) -> bool {
        self.status == 503 && self.body == seckill_host::trigger::http::SHED_MESSAGE.as_bytes()
    }
}

/// The host's `Server-Timing` (on a shed answer `head;dur=<ms>, queue;dur=<ms>, host;dur=<ms>`;
/// with `--server-timing` on every answer `queue`, `host` and, on a connection's first request,
/// `accept`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerTiming {
    /// From the host's accept (or the head's first byte) until the request head was read whole.
    pub head: Option<Duration>,
    /// Waiting in the host's instance-slot queue.
    pub queue: Option<Duration>,
    /// From the host's accept (or, on a kept-alive connection, the request head's first byte)
    /// to the answer.
    pub host: Option<Duration>,
    /// Of `host`, on a connection's first request, the time before its first byte came.
    pub accept: Option<Duration>,
}

impl ServerTiming {
    /// The host's own time: `host` less the wait for a first byte the client had not sent.
    pub fn at_host(&self) -> Option<Duration> {
        Some(self.host?.saturating_sub(self.accept.unwrap_or_default()))
    }
}

impl ServerTiming {
    /// Reads the `head`, `queue` and `host` metrics of a `Server-Timing` value; others are
    /// ignored.
    pub fn parse(value: &str) -> Self {
        let mut timing = ServerTiming::default();
        for metric in value.split(',') {
            let mut params = metric.split(';').map(str::trim);
            let name = params.next().unwrap_or("");
            let dur = params
                .filter_map(|p| p.strip_prefix("dur="))
                .find_map(|ms| ms.parse::<f64>().ok())
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .map(|ms| Duration::from_secs_f64(ms / 1e3));
            match name {
                "head" => timing.head = dur,
                "queue" => timing.queue = dur,
                "host" => timing.host = dur,
                "accept" => timing.accept = dur,
                _ => {}
            }
        }
        timing
    }
}

/// Requests to one server over kept-alive connections, as a load balancer or CDN reaches its
/// origin and a browser keeps its connection: an idle connection is reused, a new one opened
/// while every one is busy, and one the server closed (after a shed answer) is not used again.
#[derive(Clone)]
pub struct KeptAlive {
    addr: SocketAddr,
    client: hyper_util::client::legacy::Client<StampedConnector, Full<Bytes>>,
}

impl KeptAlive {
    /// Connections to the server at `addr`; an idle one closes after 30 s (the host's own idle
    /// limit is longer, so it never closes one under a request).
    pub fn new(addr: SocketAddr) -> Self {
        let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
        connector.set_nodelay(true);
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build(StampedConnector(connector));
        KeptAlive { addr, client }
    }

    /// Sends `call` and reads its answer whole.
    pub async fn send(&self, call: Call) -> Result<Answer> {
        let mut req = call.request(&self.addr.to_string())?;
        *req.uri_mut() = format!("http://{}{}", self.addr, req.uri()).parse()?;
        let resp = self.client.request(req).await?;
        // Now, before the connection can carry another request.
        let at_socket = resp.extensions().get::<Wire>().and_then(Wire::round_trip);
        let answer = Answer::read(resp).await?;
        Ok(Answer {
            at_socket,
            ..answer
        })
    }
}

/// One request on a fresh connection, as a browser sends it when the server closed its last.
///
/// The connection is driven in this task rather than spawned: a spawned connection writes the
/// request only when its task's turn comes, behind every other request of a crowd, which the
/// host would count as a slow client (its `head`).
pub async fn send(addr: SocketAddr, call: Call) -> Result<Answer> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let req = call.request(&addr.to_string())?;
    let exchange = async move { Answer::read(sender.send_request(req).await?).await };
    tokio::pin!(exchange);
    tokio::select! {
        answer = &mut exchange => answer,
        // Closed by the server: whatever it sent is buffered for the exchange to read.
        closed = conn => {
            closed?;
            exchange.await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nearest rank: the index is `len × p`, rounded down, and the top percentile is the maximum.
    #[test]
    fn percentile_takes_the_nearest_rank() {
        let sorted: Vec<u32> = (1..=200).collect();
        assert_eq!(percentile(&sorted, 0.50), Some(101));
        assert_eq!(percentile(&sorted, 0.99), Some(199));
        assert_eq!(percentile(&sorted, 1.0), Some(200));
    }

    #[test]
    fn server_timing_reads_head_queue_and_host() {
        let timing = ServerTiming::parse("head;dur=1, queue;dur=5.0, host;dur=7.5, cdn;desc=x");
        assert_eq!(timing.head, Some(Duration::from_millis(1)));
        assert_eq!(timing.queue, Some(Duration::from_millis(5)));
        assert_eq!(timing.host, Some(Duration::from_micros(7_500)));
        let timing = ServerTiming::parse("host;desc=\"x\";dur=1");
        assert_eq!(
            (timing.queue, timing.host),
            (None, Some(Duration::from_millis(1)))
        );
        assert_eq!(ServerTiming::parse("garbage"), ServerTiming::default());
        let first = ServerTiming::parse("queue;dur=0.5, host;dur=9.0, accept;dur=6.0");
        assert_eq!(first.at_host(), Some(Duration::from_millis(3)));
        assert_eq!(timing.at_host(), Some(Duration::from_millis(1)));
    }

    #[test]
    fn a_calls_route_path_has_no_query() {
        let call = Call::empty(Method::POST, "/admin/jobs/drain?event=e", None);
        assert_eq!(call.route_path(), "/admin/jobs/drain");
        assert_eq!(Call::get("/api/time", None).route_path(), "/api/time");
    }

    #[test]
    fn percentile_of_nothing_is_none() {
        assert_eq!(percentile::<u32>(&[], 0.5), None);
    }

    #[test]
    fn per_request_counts_an_empty_run_as_one_request() {
        assert_eq!(per_request(1.5, 3), 0.5);
        assert_eq!(per_request(3.0, 0), 3.0);
    }

    #[test]
    fn rps_is_requests_over_wall_time() {
        let report = Report {
            requests: 3_000,
            statuses: BTreeMap::new(),
            elapsed: Duration::from_millis(1_500),
            p50: Duration::ZERO,
            p95: Duration::ZERO,
            p99: Duration::ZERO,
            cpu_seconds: 0.0,
        };
        assert_eq!(report.rps(), 2_000.0);
    }

    /// utime and stime are fields 14 and 15; a command name with spaces and ')' does not shift
    /// them.
    #[test]
    fn cpu_seconds_read_after_the_command_name() {
        let stat = "4242 (seckill (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 75 0 0 20 0";
        assert_eq!(cpu_seconds_in(stat), 3.25);
        assert_eq!(cpu_seconds_in(""), 0.0);
    }
}
