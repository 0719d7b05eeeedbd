//! Prometheus metrics (`seckill-host up --metrics-listen ADDR`), through `prometheus-client`:
//! requests by manifest route and status, latency by route, open connections, cron runs by
//! component and outcome, and, read at each scrape, the instance pool and the Redis and Postgres
//! connections. Served on an address of its own, so the app's routes and the scrape never meet.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::runtime::Runtime;
use crate::runtime::overload::Class;
use crate::trigger::http::{MatchedRoute, Shed};

/// The label of a request no route matched.
const UNMATCHED: &str = "unmatched";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: Cow<'static, str>,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: Cow<'static, str>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: &'static str,
    /// `answered` (a guest or the host answered it) or `shed`.
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ComponentLabels {
    component: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CronLabels {
    component: String,
    outcome: &'static str,
}

/// Seconds, from half a millisecond (a hello) to ten seconds (a long job run).
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// The host's metrics. Recording is a few atomic operations and a read-locked map lookup.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    connections: Gauge,
    peer_refused: Counter,
    idle_reclaimed: Counter,
    shed: Family<RouteLabels, Counter>,
    by_class: Family<ClassLabels, Counter>,
    cron_runs: Family<CronLabels, Counter>,
    cron_latency: Family<ComponentLabels, Histogram, fn() -> Histogram>,
}

impl Metrics {
    /// The metrics of a host running `runtime`.
    pub fn new(runtime: Arc<Runtime>) -> Metrics {
        let mut registry = Registry::with_prefix("seckill");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by manifest route and status",
            requests.clone(),
        );
        let latency = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register(
            "http_request_duration_seconds",
            "Time from the request head to the response head, by manifest route",
            latency.clone(),
        );
        let connections = Gauge::default();
        registry.register(
            "http_connections",
            "HTTP connections open now",
            connections.clone(),
        );
        let peer_refused = Counter::default();
        registry.register(
            "http_connections_refused_per_peer",
            "Connections closed as they arrived because their peer address had as many open as \
             it may (--max-connections-per-peer)",
            peer_refused.clone(),
        );
        let idle_reclaimed = Counter::default();
        registry.register(
            "http_connections_reclaimed",
            "Idle keep-alive connections closed to make room for new ones at the connection cap \
             (--max-connections)",
            idle_reclaimed.clone(),
        );
        let shed = Family::<RouteLabels, Counter>::default();
        registry.register(
            "http_shed_requests",
            "Requests answered 503 with Retry-After because no instance slot came free within \
             the queue control allowed, by manifest route (also counted in http_requests)",
            shed.clone(),
        );
        let by_class = Family::<ClassLabels, Counter>::default();
        registry.register(
            "http_class_requests",
            "HTTP requests by request class (the manifest's request_classes) and outcome: \
             answered, or shed with 503 and Retry-After",
            by_class.clone(),
        );
        let cron_runs = Family::<CronLabels, Counter>::default();
        registry.register(
            "cron_runs",
            "Cron runs, by component and outcome (ok or error)",
            cron_runs.clone(),
        );
        let cron_latency = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register(
            "cron_run_duration_seconds",
            "Cron run time, by component",
            cron_latency.clone(),
        );
        registry.register_collector(Box::new(Pools(runtime)));
        Metrics {
            registry,
            requests,
            latency,
            connections,
            peer_refused,
            idle_reclaimed,
            shed,
            by_class,
            cron_runs,
            cron_latency,
        }
    }

    /// Counts a response and the time to its head.
    pub(crate) fn request<B>(&self, resp: &Response<B>, elapsed: Duration) {
        let route = resp
            .extensions()
            .get::<MatchedRoute>()
            .map_or(Cow::Borrowed(UNMATCHED), |r| r.0.clone());
        let labels = RouteLabels {
            route: route.clone(),
        };
        let shed = resp.extensions().get::<Shed>().is_some();
        if shed {
            self.shed.get_or_create(&labels).inc();
        }
        if let Some(class) = resp.extensions().get::<Class>() {
            let outcome = if shed { "shed" } else { "answered" };
            self.by_class
                .get_or_create(&ClassLabels {
                    class: class.as_str(),
                    outcome,
                })
                .inc();
        }
        self.latency
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        self.requests
            .get_or_create(&RequestLabels {
                route,
                status: resp.status().as_u16(),
            })
            .inc();
    }

    /// A connection opened (`+1`) or closed (`-1`).
    pub(crate) fn connection(&self, delta: i64) {
        self.connections.inc_by(delta);
    }

    /// A connection closed as it arrived: its peer had too many open.
    pub(crate) fn peer_refused(&self) {
        self.peer_refused.inc();
    }

    /// An idle keep-alive connection closed to make room at the connection cap.
    pub(crate) fn idle_reclaimed(&self) {
        self.idle_reclaimed.inc();
    }

    /// Counts one cron run of `component`.
    pub(crate) fn cron_run(&self, component: &str, ok: bool, elapsed: Duration) {
        let outcome = if ok { "ok" } else { "error" };
        self.cron_runs
            .get_or_create(&CronLabels {
                component: component.to_owned(),
                outcome,
            })
            .inc();
        self.cron_latency
            .get_or_create(&ComponentLabels {
                component: component.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// What is read at each scrape rather than counted: the instance pool and the connection pools.
struct Pools(Arc<Runtime>);

impl std::fmt::Debug for Pools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pools")
    }
}

impl Collector for Pools {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let runtime = &self.0;
        let slots = runtime.slots();
        let limit = i64::from(slots.capacity());
        gauge(
            &mut encoder,
            "instances_in_use",
            "Guest instances alive now",
            i64::from(slots.in_use()),
        )?;
        let waiting = encoder.encode_descriptor(
            "instances_waiting",
            "Requests waiting for an instance slot now, by request class",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        );
        let mut waiting = waiting?;
        for (class, n) in Class::ALL.iter().zip(slots.waiting()) {
            ConstGauge::new(n as i64)
                .encode(waiting.encode_family(&[("class", class.as_str())])?)?;
        }
        gauge(
            &mut encoder,
            "instances_limit",
            "Guest instances that may be alive at once",
            limit,
        )?;
        gauge(
            &mut encoder,
            "instances_admitting",
            "Guest instances requests below critical may hold at once now (the adaptive limit)",
            i64::from(slots.admitting()),
        )?;
        let services = runtime.services();
        let opened = ConstCounter::new(services.redis.connections_opened());
        opened.encode(encoder.encode_descriptor(
            "redis_connections_opened",
            "TCP connections opened to Redis (pooled: one per node, again after a reconnect)",
            None,
            opened.metric_type(),
        )?)?;
        let (busy, idle) = services.postgres.connections();
        let pg = encoder.encode_descriptor(
            "postgres_connections",
            "Postgres connections by state (in_use: checked out by an instance)",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        );
        let mut pg = pg?;
        for (state, n) in [("in_use", busy), ("idle", idle)] {
            ConstGauge::new(n as i64).encode(pg.encode_family(&[("state", state)])?)?;
        }
        Ok(())
    }
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let gauge = ConstGauge::new(value);
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

/// Serves `GET /metrics` on `listener` until the task is dropped.
pub async fn serve(metrics: Arc<Metrics>, listener: TcpListener) -> Result<()> {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::warn!("metrics accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(scrape(&metrics, &req)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn scrape(metrics: &Metrics, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::default());
    if req.uri().path() != "/metrics" {
        *resp.status_mut() = StatusCode::NOT_FOUND;
        return resp;
    }
    *resp.body_mut() = Full::new(Bytes::from(metrics.encode()));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}
