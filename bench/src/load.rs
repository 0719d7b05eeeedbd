//! A small closed-loop HTTP load generator: `connections` keep-alive HTTP/1.1 connections, each
//! sending its next request as soon as the previous one is answered. It records every latency
//! and the CPU it used itself, so results on a 2-core machine can be read honestly (the host
//! under test runs in another process).

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
}

impl Call {
    /// A GET.
    pub fn get(path: impl Into<String>, bearer: Option<String>) -> Self {
        Call {
            method: Method::GET,
            path: path.into(),
            bearer,
            body: Bytes::new(),
        }
    }

    /// A POST with a JSON body.
    pub fn post(path: impl Into<String>, bearer: Option<String>, body: &serde_json::Value) -> Self {
        Call {
            method: Method::POST,
            path: path.into(),
            bearer,
            body: Bytes::from(body.to_string()),
        }
    }
}

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
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
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

/// Runs `calls(i)` for i = 0, 1, … over `connections` connections until `calls` returns `None`
/// or `duration` has passed.
pub async fn closed_loop(
    addr: SocketAddr,
    connections: usize,
    duration: Duration,
    calls: Arc<dyn Fn(u64) -> Option<Call> + Send + Sync>,
) -> Result<Report> {
    let next = Arc::new(AtomicU64::new(0));
    let cpu_start = cpu_seconds();
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (next, calls) = (next.clone(), calls.clone());
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let mut latencies = Vec::new();
            let mut statuses = BTreeMap::new();
            while Instant::now() < deadline {
                let Some(call) = calls(next.fetch_add(1, Ordering::Relaxed)) else {
                    break;
                };
                let mut req = Request::builder()
                    .method(call.method)
                    .uri(call.path)
                    .header("host", addr.to_string())
                    .header("content-type", "application/json");
                if let Some(b) = call.bearer {
                    req = req.header("authorization", format!("Bearer {b}"));
                }
                let req = req.body(Full::new(call.body))?;
                let sent = Instant::now();
                sender.ready().await?;
                let resp = sender.send_request(req).await?;
                let status = resp.status().as_u16();
                resp.into_body().collect().await?;
                latencies.push(sent.elapsed().as_micros() as u32);
                *statuses.entry(status).or_insert(0u64) += 1;
            }
            anyhow::Ok((latencies, statuses))
        }));
    }
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
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1));
        Duration::from_micros(latencies.get(i).copied().unwrap_or(0) as u64)
    };
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

/// One request on a fresh connection; returns status and body (for job calls and set-up).
pub async fn once(addr: SocketAddr, call: Call) -> Result<(u16, Bytes)> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(call.method)
        .uri(call.path)
        .header("host", addr.to_string());
    if let Some(b) = call.bearer {
        req = req.header("authorization", format!("Bearer {b}"));
    }
    let resp = sender.send_request(req.body(Full::new(call.body))?).await?;
    let status = resp.status().as_u16();
    Ok((status, resp.into_body().collect().await?.to_bytes()))
}
