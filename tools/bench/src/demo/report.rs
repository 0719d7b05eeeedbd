//! After the sale: the books (Postgres against what the buys accepted, Redis's shards, the
//! reconcile job), what the buyers lived (paid, expired, resold, `503`s by who gave them,
//! requests without a response), the per-endpoint table, the per-class table (the manifest's
//! request classes: what the host shed of each), each Redis node's load, `report.json` and
//! `chart.svg`; and the verdict.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;

use anyhow::Result;
use seckill_host::runtime::overload::Class;
use seckill_testkit::stripe::WebhookStats;
use seckill_testkit::{ADMIN_TOKEN, PgServer, StripeSandbox};
use serde_json::{Value, json};

use super::phases::{TRIES, Winners};
use super::recorder::{Sample, Unavailable};
use super::setup::Servers;
use super::{DemoArgs, EVENT, Sale};
use crate::load::{Call, once, percentile};

/// What the buyers did.
pub struct Outcome {
    pub first_wave: Winners,
    /// Orders accepted in the resale.
    pub resold: Vec<String>,
    /// Paid orders their buyers paid a second time.
    pub paid_twice: usize,
    /// Of those, the buyers whose poll showed the second payment refunded.
    pub refunds_shown: usize,
}

/// The share of requests that may get no response (refused connections, connections closed
/// before the response, client timeouts) before the run fails: a sale where more than one
/// click in a hundred goes unanswered is not one people can finish.
pub const MAX_FAILED_SHARE: f64 = 0.01;

/// Checks the books, writes the report and the chart into `args.out` and prints them; fails if
/// a unit was oversold, an accepted order lost, the reconcile job found drift, nobody paid, the
/// shop did not hear (verified) every order event, or more than [`MAX_FAILED_SHARE`] of the
/// requests got no response.
pub async fn write(
    servers: &Servers,
    sale: &Sale,
    args: &DemoArgs,
    outcome: &Outcome,
) -> Result<()> {
    let pg = &servers.pg;
    let in_pg = orders_in_postgres(pg).await?;
    let money = Money::of(&servers.provider, pg, paid_orders(&in_pg), outcome).await?;
    let accepted: HashSet<String> = outcome
        .first_wave
        .values()
        .map(|w| w.order.clone())
        .chain(outcome.resold.iter().cloned())
        .collect();
    let shards = stock_by_shard(sale.addr).await?;
    let books = tally(&in_pg, &accepted, args.stock, &shards);
    let drift = reconcile_drift(sale).await?;
    let heard = servers.shop.heard(pg).await?;

    let r = sale.rec.lock().unwrap();
    let endpoints = endpoint_table(&r.samples);
    let classes = class_table(&r.samples, &r.failures_by_class);
    // The critical requests the host shed: the buyers' and the report's (the job route), and
    // the provider's webhook deliveries, told apart from the app's own 503s by the host's
    // shed answer, which the provider keeps of each attempt.
    let webhooks_shed = servers
        .provider
        .deliveries()
        .iter()
        .flat_map(|d| &d.attempts)
        .filter(|a| {
            a.status == Some(503)
                && a.response.as_deref() == Some(seckill_host::trigger::http::SHED_MESSAGE)
        })
        .count() as u64;
    let critical_shed = classes[Class::Critical.as_str()]["shed"]
        .as_u64()
        .unwrap_or(0)
        + webhooks_shed;
    let per_node = r.scripts_per_node();
    let peaks: Vec<f64> = (0..per_node.len())
        .map(|i| r.node_scripts.iter().map(|s| s.rate(i)).fold(0.0, f64::max))
        .collect();
    let (first_wave, resold) = (outcome.first_wave.len(), outcome.resold.len());
    let paid = outcome.first_wave.values().filter(|w| w.paid).count();
    let payers = outcome.first_wave.values().filter(|w| w.payer).count();
    let answered = r.samples.len();
    let failed: u64 = r.failures.values().sum();
    let failed_share = failed as f64 / (answered as u64 + failed).max(1) as f64;
    let failures: BTreeMap<String, u64> = r
        .failures
        .iter()
        .map(|((endpoint, kind), n)| (format!("{endpoint}: {kind}"), *n))
        .collect();
    let unavailable: BTreeMap<String, u64> = r
        .unavailable
        .iter()
        .map(|((endpoint, by), n)| (format!("{endpoint}: {}", by.as_str()), *n))
        .collect();
    let after = |f: fn(&super::phases::Winner) -> Option<std::time::Duration>| {
        let mut v: Vec<u64> = outcome
            .first_wave
            .values()
            .filter(|w| w.payer)
            .filter_map(|w| f(w).map(|d| d.as_millis() as u64))
            .collect();
        v.sort_unstable();
        json!({ "n": v.len(), "p50_ms": percentile(&v, 0.5), "p95_ms": percentile(&v, 0.95) })
    };
    let (landed_after, paid_after) = (after(|w| w.landed_after), after(|w| w.paid_after));
    let buyers_lag = lag_at_sale_answers(&r.lag, &r.samples);
    let buys = r.samples.iter().filter(|s| s.endpoint == "buy").count();
    let try_again = r
        .unavailable
        .get(&("buy", Unavailable::TryAgain))
        .copied()
        .unwrap_or(0);
    let try_again_share = try_again as f64 / buys.max(1) as f64;
    let Books {
        by_status,
        held,
        left,
        oversold,
        lost,
    } = books;
    let report = json!({
        "users": args.users, "stock": args.stock, "shards": args.shards,
        "accepted_first_wave": first_wave, "payers": payers, "paid": paid, "resold": resold,
        "expired": by_status.get("expired").copied().unwrap_or(0),
        "requests_answered": answered, "requests_failed": failed,
        "requests_failed_share": failed_share, "max_failed_share": MAX_FAILED_SHARE,
        "failed_by_kind": failures, "unavailable_503_by_source": unavailable,
        "buys": buys, "buy_try_again_503": try_again, "buy_try_again_share": try_again_share,
        "gave_up_by_endpoint": r.gave_up,
        "payers_landed_after_buy": landed_after, "payers_paid_after_buy": paid_after,
        "orders_in_postgres": by_status, "held_in_postgres": held,
        "stock_left_in_redis": left,
        "oversold": oversold, "lost": lost,
        "reconcile_drift": drift,
        "endpoints": endpoints,
        "classes": classes, "critical_shed": critical_shed,
        "buyers_machine_lag_ms": buyers_lag,
        "redis_nodes": args.nodes,
        "redis_scripts_per_node": per_node, "redis_peak_scripts_per_s": peaks,
        "provider": money.json(),
        "order_events": heard.json(),
    });
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(
        format!("{}/report.json", args.out),
        serde_json::to_string_pretty(&report)?,
    )?;
    std::fs::write(format!("{}/chart.svg", args.out), super::chart::chart(&r)?)?;
    print_endpoints(&endpoints);
    print_classes(&classes);
    println!(
        "critical requests shed: {critical_shed} (of them the provider's webhook deliveries: {webhooks_shed})"
    );
    println!(
        "the buyers' machine, which shares the host's cores: as sale answers came, a woken buyer waited for its turn p50/p99/max {}/{}/{} ms (in the buyers' figures, not the host's)",
        buyers_lag["p50"], buyers_lag["p99"], buyers_lag["max"]
    );
    println!("\n{}", node_line(&per_node, &peaks));
    let expired = by_status.get("expired").copied().unwrap_or(0);
    println!(
        "\nsold {held} / {} (first wave {first_wave}, resold {resold}); paid {paid} of {payers} payers; expired {expired}; orders in Postgres {by_status:?}; left in Redis {left}",
        args.stock
    );
    println!(
        "503s by who gave them: {unavailable:?}; buys told \"try again\": {try_again} of {buys} ({:.3} %)",
        try_again_share * 100.0
    );
    println!(
        "payers: order in Postgres after the buy {landed_after}, paid after the buy {paid_after} (of a {} s window)",
        args.payment_timeout_s
    );
    println!("{}", money.line());
    println!("{}", heard.line());
    println!("buyers who gave up after {TRIES} tries: {:?}", r.gave_up);
    println!(
        "requests without a response: {failed} of {} ({:.3} %, at most {:.0} %): {failures:?}",
        answered as u64 + failed,
        failed_share * 100.0,
        MAX_FAILED_SHARE * 100.0
    );
    println!(
        "oversold = {oversold}, lost = {lost}, reconcile drift = {drift}\nreport: {}/report.json, chart: {}/chart.svg",
        args.out, args.out
    );
    let mut wrong = Vec::new();
    if oversold != 0 || lost != 0 || drift != json!(0) {
        wrong.push(format!(
            "the books do not balance: oversold {oversold}, lost {lost}, drift {drift}"
        ));
    }
    if paid == 0 {
        wrong.push("no payment went through".to_owned());
    }
    wrong.extend(money.wrong());
    wrong.extend(heard.wrong());
    if failed_share > MAX_FAILED_SHARE {
        wrong.push(format!(
            "{failed} requests got no response ({:.2} % > {:.0} %)",
            failed_share * 100.0,
            MAX_FAILED_SHARE * 100.0
        ));
    }
    anyhow::ensure!(wrong.is_empty(), "the sale failed: {}", wrong.join("; "));
    Ok(())
}

/// The event's orders in Postgres: order id → status.
async fn orders_in_postgres(pg: &PgServer) -> Result<HashMap<String, String>> {
    let db = pg.client().await?;
    let rows = db
        .query(
            "SELECT order_id, status FROM orders WHERE event_id = $1",
            &[&EVENT],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Units left in each stock shard in Redis (the admin API's event status).
async fn stock_by_shard(addr: SocketAddr) -> Result<Vec<i64>> {
    let call = Call::get(format!("/admin/events/{EVENT}"), Some(ADMIN_TOKEN.into()));
    let (_, status) = once(addr, call).await?;
    let status: Value = serde_json::from_slice(&status)?;
    Ok(serde_json::from_value(status["stock_by_shard"].clone()).unwrap_or_default())
}

/// The reconcile job's drift for the event (Redis's books against Postgres's); the call is
/// recorded with the sale's (a job route: critical).
async fn reconcile_drift(sale: &Sale) -> Result<Value> {
    let call = Call::post(
        format!("/admin/jobs/reconcile?event={EVENT}"),
        Some(ADMIN_TOKEN.into()),
        &json!({}),
    );
    let books = sale.ask("reconcile job", call).await;
    let books = books.ok_or_else(|| anyhow::anyhow!("reconcile: no answer"))?;
    Ok(books.body["events"][0]["drift"].clone())
}

/// The books after the sale.
#[derive(Debug, PartialEq)]
struct Books {
    /// Orders in Postgres by status.
    by_status: BTreeMap<String, usize>,
    /// Units held in Postgres: orders pending payment or paid.
    held: usize,
    /// Units left in Redis, over every shard.
    left: i64,
    /// Units sold beyond the stock: held past it, plus one per shard below zero.
    oversold: i64,
    /// Accepted orders that never reached Postgres.
    lost: usize,
}

/// The books from the orders in Postgres (`in_pg`: id → status), the orders the buys accepted,
/// the stock on sale and the units left per shard.
fn tally(
    in_pg: &HashMap<String, String>,
    accepted: &HashSet<String>,
    stock: u64,
    shards: &[i64],
) -> Books {
    let lost = accepted.iter().filter(|o| !in_pg.contains_key(*o)).count();
    let by_status: BTreeMap<String, usize> = in_pg.values().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.clone()).or_default() += 1;
        m
    });
    let held = by_status.get("pending_payment").copied().unwrap_or(0)
        + by_status.get("paid").copied().unwrap_or(0);
    let oversold =
        (held as i64 - stock as i64).max(0) + shards.iter().filter(|s| **s < 0).count() as i64;
    Books {
        by_status,
        held,
        left: shards.iter().sum(),
        oversold,
        lost,
    }
}

/// Per endpoint: requests, busiest second, latency percentiles (of every answer, and of those
/// the host did not shed, as the buyers measured them, at their sockets and at the host) and
/// statuses.
fn endpoint_table(samples: &[Sample]) -> Value {
    let mut by: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        by.entry(s.endpoint).or_default().push(s);
    }
    let mut out = serde_json::Map::new();
    for (name, list) in by {
        let mut lat: Vec<u64> = list.iter().map(|s| s.latency_us).collect();
        lat.sort_unstable();
        let pct = |p: f64| percentile(&lat, p).unwrap_or(0) as f64 / 1000.0;
        let answered = sorted(list.iter().filter(|s| !s.shed).map(|s| s.latency_us));
        let at_host = sorted(list.iter().filter(|s| !s.shed).filter_map(|s| s.host_us));
        let at_socket = sorted(list.iter().filter(|s| !s.shed).filter_map(|s| s.socket_us));
        let (answered_p99, at_host_p99) = (ms(&answered, 0.99), ms(&at_host, 0.99));
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
                "p50_ms": pct(0.5), "p95_ms": pct(0.95), "p99_ms": pct(0.99),
                "answered_p99_ms": answered_p99,
                "answered_at_socket_p99_ms": ms(&at_socket, 0.99),
                "answered_at_host_p99_ms": at_host_p99, "statuses": statuses,
            }),
        );
    }
    Value::Object(out)
}

/// How late the buyers' runtime was when the sale class's answers came, in ms: for each
/// answered request of that class, the first lateness sampled at or after it finished (its
/// buyer waited about as long to read it); p50, p99, max over those requests.
fn lag_at_sale_answers(lag: &[(u64, u64)], samples: &[Sample]) -> Value {
    let late = sorted(
        samples
            .iter()
            .filter(|s| s.class == Some(Class::Sale) && !s.shed)
            .filter_map(|s| {
                let at = lag.partition_point(|(t, _)| *t < s.at_ms);
                lag.get(at).map(|(_, us)| *us)
            }),
    );
    json!({ "p50": ms(&late, 0.5), "p99": ms(&late, 0.99), "max": ms(&late, 1.0) })
}

/// Microsecond figures, sorted for [`ms`].
fn sorted(us: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut us: Vec<u64> = us.collect();
    us.sort_unstable();
    us
}

/// The `p` percentile (1.0: the maximum) of `sorted` microseconds, in milliseconds.
fn ms(sorted: &[u64], p: f64) -> Option<f64> {
    percentile(sorted, p).map(|us| us as f64 / 1000.0)
}

/// Per request class (every one of them, most protected first): requests sent, answered (any
/// answer but the host's shed `503`), shed by the host, without a response (`failed`, by
/// class), the answered ones' latency percentiles as the buyers measured them, their p99 at the
/// buyers' sockets (request sent to answer received, as the kernel stamped them: without the
/// wait of a buyer's task for its turn, which a buyer on a device of their own never has) and
/// their p99 at the host (as it said, less a first request's wait for its first byte) and, of
/// that, the p99 wait for an instance slot; the rest being the network and the accept queue.
fn class_table(samples: &[Sample], failed: &BTreeMap<Class, u64>) -> Value {
    let mut out = serde_json::Map::new();
    for class in Class::ALL {
        let of: Vec<&Sample> = samples.iter().filter(|s| s.class == Some(class)).collect();
        let answered = sorted(of.iter().filter(|s| !s.shed).map(|s| s.latency_us));
        let at_host = sorted(of.iter().filter(|s| !s.shed).filter_map(|s| s.host_us));
        let at_socket = sorted(of.iter().filter(|s| !s.shed).filter_map(|s| s.socket_us));
        let queued = sorted(of.iter().filter(|s| !s.shed).filter_map(|s| s.queued_us));
        let no_response = failed.get(&class).copied().unwrap_or(0);
        out.insert(
            class.as_str().to_owned(),
            json!({
                "requests": of.len() as u64 + no_response, "answered": answered.len(),
                "shed": of.len() - answered.len(), "no_response": no_response,
                "answered_p50_ms": ms(&answered, 0.5), "answered_p99_ms": ms(&answered, 0.99),
                "answered_at_socket_p99_ms": ms(&at_socket, 0.99),
                "answered_at_host_p99_ms": ms(&at_host, 0.99),
                "answered_queued_p99_ms": ms(&queued, 0.99),
            }),
        );
    }
    Value::Object(out)
}

/// Prints the class table as Markdown, most protected class first, after a blank line.
fn print_classes(classes: &Value) {
    println!(
        "\n| class | requests | answered | shed by the host | no response | answered p50 ms | answered p99 ms | at the buyers' sockets p99 ms | at the host p99 ms | waiting for a slot p99 ms |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let ms = |v: &Value| v.as_f64().map_or("-".to_owned(), |ms| format!("{ms:.1}"));
    for class in Class::ALL {
        let c = &classes[class.as_str()];
        println!(
            "| {class} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c["requests"],
            c["answered"],
            c["shed"],
            c["no_response"],
            ms(&c["answered_p50_ms"]),
            ms(&c["answered_p99_ms"]),
            ms(&c["answered_at_socket_p99_ms"]),
            ms(&c["answered_at_host_p99_ms"]),
            ms(&c["answered_queued_p99_ms"]),
        );
    }
}

/// Each node's script calls over the sale (the buyers', the scheduled jobs', the stock
/// sampler's), its share, and its busiest sampling interval.
fn node_line(per_node: &[u64], peaks: &[f64]) -> String {
    let total = per_node.iter().sum::<u64>().max(1) as f64;
    let calls: Vec<String> = per_node
        .iter()
        .map(|&c| format!("{c} ({:.0} %)", c as f64 * 100.0 / total))
        .collect();
    let peaks: Vec<String> = peaks.iter().map(|p| format!("{p:.0}")).collect();
    format!(
        "Redis scripts per node (buyers, jobs, stock sampler): {}; busiest 500 ms: {} scripts/s",
        calls.join(" / "),
        peaks.join(" / ")
    )
}

/// Prints the endpoint table as Markdown, after a blank line.
fn print_endpoints(endpoints: &Value) {
    println!(
        "\n| endpoint | requests | req/s (busy 1 s) | p50 ms | p95 ms | p99 ms | answered p99 ms | at the buyers' sockets p99 ms | at the host p99 ms | statuses |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for (name, e) in endpoints.as_object().into_iter().flatten() {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            e["requests"],
            e["peak_rps"],
            e["p50_ms"],
            e["p95_ms"],
            e["p99_ms"],
            e["answered_p99_ms"],
            e["answered_at_socket_p99_ms"],
            e["answered_at_host_p99_ms"],
            e["statuses"]
        );
    }
}

/// Orders paid in Postgres.
fn paid_orders(in_pg: &HashMap<String, String>) -> usize {
    in_pg.values().filter(|s| *s == "paid").count()
}

/// The money's side of the sale, from the provider's records and ours.
struct Money {
    sessions: usize,
    sessions_expired: usize,
    charged: usize,
    webhooks: WebhookStats,
    api_calls: usize,
    rate_limited: usize,
    paid_orders: usize,
    /// Provider payments naming one of ours whose order is not paid and that are not refunded.
    charged_not_paid: Vec<String>,
    /// Payments that paid nothing (`refund_due`…`refunded` here), refunds the provider made,
    /// and the first of those not refunded at the end.
    refunds_owed: usize,
    refunds_paid: usize,
    refunds_unpaid: Vec<String>,
    /// Orders paid twice, and the buyers whose poll showed the refund.
    paid_twice: usize,
    refunds_shown: usize,
}

impl Money {
    async fn of(
        provider: &StripeSandbox,
        pg: &PgServer,
        paid_orders: usize,
        outcome: &Outcome,
    ) -> Result<Money> {
        let sessions = provider.sessions();
        let charged = provider.payment_intents();
        let calls = provider.calls();
        let db = pg.client().await?;
        let mut charged_not_paid = Vec::new();
        for pi in &charged {
            let Some(payment_id) = pi.metadata.get("payment_id") else {
                continue;
            };
            if pi.amount_refunded == pi.amount {
                continue;
            }
            let row = db
                .query_opt(
                    "SELECT o.status FROM payments p JOIN orders o USING (order_id)
                         WHERE p.payment_id = $1",
                    &[payment_id],
                )
                .await?;
            let status: Option<String> = row.map(|r| r.get(0));
            if status.as_deref() != Some("paid") {
                charged_not_paid.push(format!("{} ({status:?})", pi.id));
            }
        }
        let owed = db
            .query(
                "SELECT provider_ref, status FROM provider_payments WHERE status <> 'paid'
                     ORDER BY provider_ref",
                &[],
            )
            .await?;
        let refunds_unpaid: Vec<String> = owed
            .iter()
            .filter(|r| r.get::<_, String>(1) != "refunded")
            .map(|r| format!("{} ({})", r.get::<_, String>(0), r.get::<_, String>(1)))
            .collect();
        let refunds_paid = provider
            .refunds()
            .iter()
            .filter(|r| r.status == "succeeded")
            .count();
        Ok(Money {
            refunds_owed: owed.len(),
            refunds_paid,
            refunds_unpaid,
            paid_twice: outcome.paid_twice,
            refunds_shown: outcome.refunds_shown,
            sessions: sessions.len(),
            sessions_expired: sessions.iter().filter(|s| s.status == "expired").count(),
            charged: charged.len(),
            webhooks: provider.webhook_stats(),
            api_calls: calls.len(),
            rate_limited: calls.iter().filter(|c| c.status == 429).count(),
            paid_orders,
            charged_not_paid,
        })
    }

    fn json(&self) -> Value {
        let w = &self.webhooks;
        json!({
            "sessions": self.sessions, "sessions_expired": self.sessions_expired,
            "charged": self.charged, "api_calls": self.api_calls,
            "api_calls_rate_limited": self.rate_limited,
            "api_calls_per_paid_order": self.per_paid(),
            "webhooks_delivered": w.delivered, "webhook_attempts": w.attempts,
            "webhook_failed_attempts": w.failed_attempts, "webhooks_retried": w.retried,
            "webhook_failed_by_status": w.failed_statuses,
            "webhooks_pending": w.pending + w.held, "webhooks_exhausted": w.exhausted,
            "charged_not_paid": self.charged_not_paid,
            "refunds_owed": self.refunds_owed, "refunds_paid": self.refunds_paid,
            "refunds_unpaid": self.refunds_unpaid,
            "orders_paid_twice": self.paid_twice, "refunds_shown_to_buyers": self.refunds_shown,
        })
    }

    fn per_paid(&self) -> f64 {
        self.api_calls as f64 / self.paid_orders.max(1) as f64
    }

    fn line(&self) -> String {
        let w = &self.webhooks;
        format!(
            "provider: {} sessions ({} expired by timeout release before their units went back), {} charged; API calls {} ({} rate limited), {:.2} per paid order; webhooks delivered {} in {} attempts ({} retried; failed attempts {:?}), {} still pending; charged but not paid: {}\nrefunds: {} payments paid nothing ({} orders paid twice), {} refunded by the provider, {} not refunded; buyers whose poll showed the refund: {} of {}",
            self.sessions,
            self.sessions_expired,
            self.charged,
            self.api_calls,
            self.rate_limited,
            self.per_paid(),
            w.delivered,
            w.attempts,
            w.retried,
            w.failed_statuses,
            w.pending + w.held,
            self.charged_not_paid.len(),
            self.refunds_owed,
            self.paid_twice,
            self.refunds_paid,
            self.refunds_unpaid.len(),
            self.refunds_shown,
            self.paid_twice,
        )
    }

    /// What must not be: a buyer charged whose order is not paid and who was not refunded; a
    /// refund still owed at the end; a buyer not shown their refund.
    fn wrong(&self) -> Vec<String> {
        let mut wrong = Vec::new();
        if !self.charged_not_paid.is_empty() {
            wrong.push(format!(
                "charged at the provider but not paid here: {:?}",
                self.charged_not_paid
            ));
        }
        if !self.refunds_unpaid.is_empty() {
            wrong.push(format!("refunds not paid: {:?}", self.refunds_unpaid));
        }
        if self.refunds_shown < self.paid_twice {
            wrong.push(format!(
                "{} of {} buyers paid twice were not shown their refund",
                self.paid_twice - self.refunds_shown,
                self.paid_twice
            ));
        }
        wrong
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(endpoint: &'static str, at_ms: u64, latency_us: u64, status: u16) -> Sample {
        Sample {
            endpoint,
            class: None,
            at_ms,
            latency_us,
            host_us: None,
            socket_us: None,
            queued_us: None,
            status,
            shed: false,
        }
    }

    fn orders(list: &[(&str, &str)]) -> HashMap<String, String> {
        list.iter()
            .map(|(o, s)| (o.to_string(), s.to_string()))
            .collect()
    }

    fn ids(list: &[&str]) -> HashSet<String> {
        list.iter().map(|o| o.to_string()).collect()
    }

    /// Pending and paid orders hold units; released ones do not.
    #[test]
    fn tally_counts_held_units_by_status() {
        let in_pg = orders(&[("a", "paid"), ("b", "pending_payment"), ("c", "released")]);
        let books = tally(&in_pg, &ids(&["a", "b", "c"]), 5, &[1, 2]);
        assert_eq!(
            books,
            Books {
                by_status: BTreeMap::from([
                    ("paid".into(), 1),
                    ("pending_payment".into(), 1),
                    ("released".into(), 1),
                ]),
                held: 2,
                left: 3,
                oversold: 0,
                lost: 0,
            }
        );
    }

    #[test]
    fn tally_counts_accepted_orders_missing_from_postgres_as_lost() {
        let in_pg = orders(&[("a", "paid")]);
        let books = tally(&in_pg, &ids(&["a", "b", "c"]), 5, &[0]);
        assert_eq!(books.lost, 2);
    }

    /// Units held past the stock and every shard below zero count as oversold.
    #[test]
    fn tally_counts_oversold_units() {
        let in_pg = orders(&[("a", "paid"), ("b", "paid"), ("c", "pending_payment")]);
        let books = tally(&in_pg, &ids(&["a", "b", "c"]), 2, &[-1, 0, -2]);
        assert_eq!(books.oversold, 1 + 2);
        assert_eq!(books.left, -3);
    }

    /// Each answered sale request takes the lateness sampled when it finished.
    #[test]
    fn lag_is_taken_when_each_sale_answer_came() {
        let lag = [(10, 900_000), (100, 1_000), (200, 3_000), (300, 2_000)];
        let sale = |at_ms, shed| Sample {
            class: Some(Class::Sale),
            shed,
            ..sample("buy", at_ms, 1_000, 202)
        };
        let samples = [
            sale(150, false),
            sale(250, false),
            sale(90, false),
            sale(20, true),
            sample("poll", 5, 1_000, 200),
        ];
        assert_eq!(
            lag_at_sale_answers(&lag, &samples),
            json!({ "p50": 2.0, "p99": 3.0, "max": 3.0 })
        );
        assert_eq!(
            lag_at_sale_answers(&[], &samples),
            json!({ "p50": null, "p99": null, "max": null })
        );
    }

    /// Each class counts its requests, answered and shed apart; failures come by class; a
    /// class that sent nothing is there with zeros.
    #[test]
    fn class_table_per_class() {
        let classed = |class, latency_us, status, shed| Sample {
            class: Some(class),
            shed,
            ..sample("x", 0, latency_us, status)
        };
        let samples = [
            Sample {
                host_us: Some(1_500),
                socket_us: Some(2_500),
                queued_us: None,
                ..classed(Class::Critical, 4_000, 200, false)
            },
            classed(Class::Critical, 1_000, 503, true),
            classed(Class::Read, 2_000, 200, false),
            sample("unrouted", 0, 9_000, 404),
        ];
        let failed = BTreeMap::from([(Class::Read, 2)]);
        let table = class_table(&samples, &failed);
        assert_eq!(
            table["critical"],
            json!({
                "requests": 2, "answered": 1, "shed": 1, "no_response": 0,
                "answered_p50_ms": 4.0, "answered_p99_ms": 4.0,
                "answered_at_socket_p99_ms": 2.5, "answered_at_host_p99_ms": 1.5,
                "answered_queued_p99_ms": null,
            })
        );
        assert_eq!(table["read"]["requests"], 3);
        assert_eq!(table["read"]["no_response"], 2);
        assert_eq!(
            table["entry"],
            json!({
                "requests": 0, "answered": 0, "shed": 0, "no_response": 0,
                "answered_p50_ms": null, "answered_p99_ms": null,
                "answered_at_socket_p99_ms": null, "answered_at_host_p99_ms": null,
                "answered_queued_p99_ms": null,
            })
        );
        assert_eq!(table.as_object().unwrap().len(), Class::ALL.len());
    }

    #[test]
    fn node_line_gives_calls_shares_and_peaks() {
        assert_eq!(
            node_line(&[300, 100], &[1_200.0, 400.0]),
            "Redis scripts per node (buyers, jobs, stock sampler): 300 (75 %) / 100 (25 %); busiest 500 ms: 1200 / 400 scripts/s"
        );
    }

    /// Percentiles are in ms (the answered p99 without the host's shed answers), the peak is the
    /// busiest whole second, statuses are counted.
    #[test]
    fn endpoint_table_per_endpoint() {
        let mut samples: Vec<Sample> = (0..100)
            .map(|i| sample("buy", 900 + i * 5, (i + 1) * 1_000, 202))
            .collect();
        samples.push(sample("poll", 50, 2_500, 200));
        samples.push(sample("poll", 60, 3_500, 404));
        samples.push(Sample {
            shed: true,
            ..sample("poll", 70, 1_000, 503)
        });
        assert_eq!(
            endpoint_table(&samples),
            json!({
                "buy": {
                    "requests": 100, "peak_rps": 80, "p50_ms": 51.0, "p95_ms": 96.0,
                    "p99_ms": 100.0, "answered_p99_ms": 100.0, "answered_at_socket_p99_ms": null,
                    "answered_at_host_p99_ms": null,
                    "statuses": { "202": 100 },
                },
                "poll": {
                    "requests": 3, "peak_rps": 3, "p50_ms": 2.5, "p95_ms": 3.5,
                    "p99_ms": 3.5, "answered_p99_ms": 3.5, "answered_at_socket_p99_ms": null,
                    "answered_at_host_p99_ms": null,
                    "statuses": { "200": 1, "404": 1, "503": 1 },
                },
            })
        );
    }
}
