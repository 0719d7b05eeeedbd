//! `GET /admin/metrics`: the sale's own numbers for Prometheus (scraped with a viewer's bearer
//! secret), beside the host's request metrics: for every event not ended more than
//! [`AFTER_END_MS`] ago, its counters from [`admin::status`] (one script per shard), and the
//! payment provider's events taken, by outcome, from Postgres (left out while Postgres does not
//! answer: the sale's numbers come first). The names are those
//! `infra/prometheus/seckill.rules.yml` alerts on.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use seckill_domain::nodes::Nodes;
use seckill_domain::order_events::endpoints;
use seckill_domain::sql::Sql;
use seckill_domain::store::Store;
use seckill_domain::{Error, admin, orders, registry};
use spin_sdk::http::Response;
use std::sync::atomic::AtomicU64;

/// How long after its end an event is still exported: its alerts resolve, its last figures
/// stay in view.
pub const AFTER_END_MS: u64 = 3_600_000;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabel {
    event: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    event: String,
    reason: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabel {
    endpoint: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    event: String,
    limit: String,
}

/// Every recent event's counters, in the OpenMetrics text format.
pub fn render<S: Store>(
    nodes: &Nodes<S>,
    db: Result<impl Sql, String>,
    now_ms: u64,
) -> Result<String, Error> {
    let counter = Family::<EventLabel, Counter>::default;
    let gauge = Family::<EventLabel, Gauge>::default;
    let (sold, landed, dead, paid) = (counter(), counter(), counter(), counter());
    let (queued, stock_left, gray) = (gauge(), gauge(), gauge());
    let refused = Family::<ReasonLabels, Counter>::default();
    let shadowed = Family::<LimitLabels, Counter>::default();
    let mut events = Vec::new();
    for node in nodes.all() {
        events.extend(registry::events(node?)?);
    }
    events.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    for id in &events {
        let status = admin::status(nodes, id)?.event;
        let field = |name: &str| status.config.get(name).and_then(|v| v.parse::<u64>().ok());
        if field("end_ms").is_some_and(|end| end + AFTER_END_MS < now_ms) {
            continue;
        }
        let event = EventLabel {
            event: id.as_str().to_owned(),
        };
        let whole = |n: i64| u64::try_from(n).unwrap_or(0);
        sold.get_or_create(&event).inc_by(whole(status.sold));
        landed.get_or_create(&event).inc_by(whole(status.drained));
        dead.get_or_create(&event)
            .inc_by(whole(status.dead_letters));
        paid.get_or_create(&event).inc_by(whole(status.paid));
        queued.get_or_create(&event).set(status.queued);
        stock_left.get_or_create(&event).set(status.stock_left);
        gray.get_or_create(&event)
            .set(field("gray_percent").unwrap_or(100) as i64);
        for (reason, n) in &status.refusals {
            let labels = ReasonLabels {
                event: event.event.clone(),
                reason: (*reason).to_owned(),
            };
            refused.get_or_create(&labels).inc_by(whole(*n));
        }
        for (limit, n) in &status.shadowed {
            let labels = LimitLabels {
                event: event.event.clone(),
                limit: limit.clone(),
            };
            shadowed.get_or_create(&labels).inc_by(whole(*n));
        }
    }
    let mut root = Registry::with_prefix("seckill");
    let provider_events = Family::<OutcomeLabel, Counter>::default();
    let (pending, lag) = (
        Family::<EndpointLabel, Gauge>::default(),
        Family::<EndpointLabel, Gauge<f64, AtomicU64>>::default(),
    );
    let read = db.and_then(|db| {
        let counts = orders::provider_event_counts(&db).map_err(|e| e.reason())?;
        let backlog = endpoints::backlog(&db, now_ms).map_err(|e| e.reason())?;
        Ok((counts, backlog))
    });
    match read {
        Ok((counts, backlog)) => {
            for (outcome, n) in counts {
                provider_events
                    .get_or_create(&OutcomeLabel { outcome })
                    .inc_by(n);
            }
            for b in backlog {
                let label = EndpointLabel {
                    endpoint: b.endpoint_id,
                };
                pending.get_or_create(&label).set(b.pending);
                lag.get_or_create(&label).set(b.oldest_ms as f64 / 1000.0);
            }
            root.register(
                "provider_events",
                "The payment provider's events taken, by outcome (ignored_livemode: of the other mode than payment_mode)",
                provider_events,
            );
            root.register(
                "order_events_pending",
                "Order events an enabled endpoint has yet to get",
                pending,
            );
            root.register(
                "order_events_lag_seconds",
                "How long ago the oldest order event an enabled endpoint has yet to get happened",
                lag,
            );
        }
        Err(e) => eprintln!("metrics: provider and order events left out: {e}"),
    }
    let registry = root.sub_registry_with_prefix("event");
    registry.register("sold", "Orders accepted", sold);
    registry.register("landed", "Accepted orders landed in Postgres", landed);
    registry.register("dead_letters", "Accepted orders that could not land", dead);
    registry.register("paid", "Orders paid", paid);
    registry.register(
        "refused",
        "Requests the sale's scripts refused, by the API error code answered",
        refused,
    );
    registry.register(
        "shadow_refused",
        "Refusals the limits in shadow mode would have made, by limit",
        shadowed,
    );
    registry.register(
        "queued",
        "Accepted orders not yet landed in Postgres",
        queued,
    );
    registry.register("stock_left", "Units left", stock_left);
    registry.register("gray_percent", "The gray release's share of users", gray);
    let mut text = String::new();
    encode(&mut text, &root).map_err(|e| Error::bug(format!("encoding metrics: {e}")))?;
    Ok(text)
}

/// The scrape's response.
pub fn response(text: String) -> Response {
    Response::builder()
        .status(200)
        .header(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )
        .header("cache-control", "no-store")
        .body(text)
        .build()
}
