//! Human output: short lines, thousands separators, bars for stock.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::Value;

/// A JSON number with thousands separators (`–` when absent).
pub fn num(v: &Value) -> String {
    let Some(n) = v.as_i64() else {
        return v.as_f64().map_or("–".into(), |f| f.to_string());
    };
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// `ms` as `1h02m`, `4m05s`, `12s`, `250ms`.
pub fn span(ms: i64) -> String {
    let s = ms.abs() / 1000;
    match s {
        0 => format!("{}ms", ms.abs()),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// `events`: one line each, the id, the item and where the sale stands on the server's clock.
pub fn events(v: &Value, now: Option<u64>) -> String {
    let Some(list) = v["events"].as_array().filter(|l| !l.is_empty()) else {
        return "no events".into();
    };
    list.iter()
        .map(|e| {
            let id = e["event_id"].as_str().unwrap_or("?");
            let sku = e["sku"].as_str().unwrap_or("(no configuration)");
            let when = match (e["start_ms"].as_i64(), e["end_ms"].as_i64(), now) {
                (Some(start), Some(end), Some(now)) => {
                    let now = now as i64;
                    if now < start {
                        format!("opens in {}", span(start - now))
                    } else if now < end {
                        format!("live, ends in {}", span(end - now))
                    } else {
                        format!("ended {} ago", span(now - end))
                    }
                }
                _ => String::new(),
            };
            let archived = if e["archived"] == true {
                ", archived"
            } else {
                ""
            };
            format!("{id}  {sku}  {when}{archived}")
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `create`.
pub fn created(v: &Value, sku: &str, stock: u64, now: u64) -> String {
    let verb = if v["created"] == true {
        "created"
    } else {
        "updated"
    };
    let start = v["start_ms"].as_i64().unwrap_or(0) - now as i64;
    let when = if start > 0 {
        format!("opens in {}", span(start))
    } else {
        "open now".into()
    };
    let mut out = format!(
        "{verb} {}: {sku}, {} units, {when}, lasts {}",
        v["event_id"].as_str().unwrap_or("?"),
        num(&stock.into()),
        span(v["end_ms"].as_i64().unwrap_or(0) - v["start_ms"].as_i64().unwrap_or(0)),
    );
    if let Some(w) = v.get("warmup") {
        let _ = write!(
            out,
            "\nwarmed up: {} units over {} shards",
            num(&w["stock"]),
            w["shards"]
        );
    }
    out
}

/// `key=value` pairs of an object.
pub fn fields(v: &Value) -> String {
    v.as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// A job's report.
pub fn job(name: &str, v: &Value) -> String {
    match name {
        "drain" => drain_report(v),
        "timeout-release" => timeout_release_report(v),
        "deliver-events" => delivery_report(v),
        _ => reconcile_report(v),
    }
}

fn delivery_report(v: &Value) -> String {
    format!(
        "deliver-events: {} delivered, {} failed, {} endpoints disabled, lag at most {} ms, in {} run(s)",
        num(&v["delivered"]),
        num(&v["failed"]),
        num(&v["disabled"]),
        num(&v["max_lag_ms"]),
        num(&v["runs"])
    )
}

fn drain_report(v: &Value) -> String {
    format!(
        "drain: {} inserted, {} confirmed, {} failed, over {} events in {} run(s){}",
        num(&v["inserted"]),
        num(&v["confirmed"]),
        num(&v["failed"]),
        num(&v["events"]),
        num(&v["runs"]),
        match v["busy"].as_array() {
            Some(b) if !b.is_empty() => format!("; busy elsewhere: {}", fields_list(b)),
            _ => String::new(),
        }
    )
}

fn timeout_release_report(v: &Value) -> String {
    format!(
        "timeout-release: {} expired, {} released in {} run(s)",
        num(&v["expired"]),
        num(&v["released"]),
        num(&v["runs"])
    )
}

/// One line per event, `BAD` where the books drift.
fn reconcile_report(v: &Value) -> String {
    let events = v["events"].as_array().cloned().unwrap_or_default();
    if events.is_empty() {
        return "reconcile: no events".into();
    }
    events
        .iter()
        .map(reconciled_event)
        .collect::<Vec<_>>()
        .join("\n")
}

fn reconciled_event(e: &Value) -> String {
    let ok = e["drift"] == 0 && e["ledger_drift"] == 0;
    format!(
        "{} {}: stock {}, in Redis {}, in transit {}, in flight {}, in Postgres {}, dead letters {}, drift {}, ledger drift {}{}",
        if ok { "ok " } else { "BAD" },
        e["event_id"].as_str().unwrap_or("?"),
        num(&e["initial_stock"]),
        num(&e["remaining_in_redis"]),
        num(&e["in_transit"]),
        num(&e["in_flight"]),
        num(&e["held_in_postgres"]),
        num(&e["dead_letters"]),
        e["drift"],
        e["ledger_drift"],
        if e["repaired"] == true {
            " (repaired)"
        } else {
            ""
        }
    )
}

fn fields_list(list: &[Value]) -> String {
    list.iter()
        .map(|v| v.as_str().map_or(v.to_string(), str::to_owned))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `audit`: one record a block, newest first: who, when, what, the answer; then what changed.
pub fn audit(v: &Value, now_ms: Option<u64>) -> String {
    let records = v["records"].as_array().cloned().unwrap_or_default();
    if records.is_empty() {
        return "no changes recorded".into();
    }
    records
        .iter()
        .map(|r| {
            let at = r["at_ms"].as_i64().unwrap_or(0);
            let when = now_ms.map_or_else(
                || format!("at {at}"),
                |now| format!("{} ago", span(now as i64 - at)),
            );
            format!(
                "#{} {when} · {} ({}) · {} {} → {}\n    {}",
                r["id"],
                r["operator"].as_str().unwrap_or("?"),
                r["role"].as_str().unwrap_or("?"),
                r["method"].as_str().unwrap_or("?"),
                r["path"].as_str().unwrap_or("?"),
                r["status"],
                change(&r["before"], &r["after"]),
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `versions`: one version a block, newest first: number, when, who, what kind; then the
/// fields it changed.
pub fn versions(v: &Value, now_ms: Option<u64>) -> String {
    let listed = v["versions"].as_array().cloned().unwrap_or_default();
    if listed.is_empty() {
        return "no versions recorded".into();
    }
    listed
        .iter()
        .map(|r| version_block(r, now_ms))
        .collect::<Vec<_>>()
        .join("\n")
}

fn version_block(r: &Value, now_ms: Option<u64>) -> String {
    let at = r["at_ms"].as_i64().unwrap_or(0);
    let when = now_ms.map_or_else(
        || format!("at {at}"),
        |now| format!("{} ago", span(now as i64 - at)),
    );
    let kind = match r["rolled_back_to"].as_i64() {
        Some(to) => format!("rollback to v{to}"),
        None => text(&r["change"]),
    };
    format!(
        "v{} {when} · {} · {kind}\n    {}",
        r["version"],
        r["operator"].as_str().unwrap_or("?"),
        version_changes(r),
    )
}

/// `field: before → after`, comma-separated (`–` for a side that is absent).
fn version_changes(r: &Value) -> String {
    let side = |v: &Value| if v.is_null() { "–".into() } else { text(v) };
    let changes: Vec<String> = r["changes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            format!(
                "{}: {} → {}",
                text(&c["field"]),
                side(&c["before"]),
                side(&c["after"])
            )
        })
        .collect();
    if changes.is_empty() {
        "no field changed".into()
    } else {
        changes.join(", ")
    }
}

/// A string as is, anything else as JSON.
pub fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// `global-limit`: the bucket, and where it is spread when it was just set.
pub fn global_limit(v: &Value) -> String {
    let rate = v["rate"].as_f64().unwrap_or(0.0);
    let mut out = if rate > 0.0 {
        format!("global limit: {rate}/s, burst {}", v["burst"])
    } else {
        "global limit: off".into()
    };
    if let (Some(events), Some(shards)) = (v["events"].as_u64(), v["shards"].as_u64()) {
        out += &format!(" · spread over {shards} shards of {events} live events");
    }
    out
}

/// An order events endpoint on one line: id, URL, and how its deliveries go.
pub fn endpoint(e: &Value) -> String {
    let state = if e["enabled"].as_bool() == Some(true) {
        match e["failing_since_ms"].as_i64() {
            Some(_) => format!(
                "failing ({} attempts; last: {})",
                e["attempts"],
                e["last_error"].as_str().unwrap_or("?")
            ),
            None => "delivering".into(),
        }
    } else {
        let why = match e["disabled_by"].as_str() {
            Some("operator") => "by an operator",
            Some("gone") => "it answered 410 Gone",
            Some("failing") => "failing too long",
            _ => "no reason given",
        };
        format!("disabled: {why}")
    };
    let description = e["description"].as_str().filter(|d| !d.is_empty());
    format!(
        "{} · {}{} · {state}",
        text(&e["endpoint_id"]),
        text(&e["url"]),
        description.map_or(String::new(), |d| format!(" ({d})"))
    )
}

/// `webhooks list`: each endpoint, and what it has yet to get.
pub fn endpoints(v: &Value) -> String {
    let listed = v["endpoints"].as_array().cloned().unwrap_or_default();
    if listed.is_empty() {
        return "no endpoints".into();
    }
    let backlog = v["backlog"].as_array().cloned().unwrap_or_default();
    listed
        .iter()
        .map(|e| {
            let waiting = backlog
                .iter()
                .find(|b| b["endpoint_id"] == e["endpoint_id"])
                .filter(|b| b["pending"].as_i64() > Some(0));
            match waiting {
                Some(b) => format!(
                    "{} · {} waiting, the oldest {} old",
                    endpoint(e),
                    b["pending"],
                    span(b["oldest_ms"].as_i64().unwrap_or(0))
                ),
                None => endpoint(e),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `webhooks add` and `rotate`: the endpoint, and its secret, shown this once.
pub fn made_secret(v: &Value) -> String {
    format!(
        "{}\nsigning secret (shown once; give it to the receiver): {}",
        endpoint(&v["endpoint"]),
        text(&v["secret"])
    )
}

/// `webhooks deliveries`: one attempt a line, newest first.
pub fn deliveries(v: &Value) -> String {
    let log = v["deliveries"].as_array().cloned().unwrap_or_default();
    if log.is_empty() {
        return "no deliveries".into();
    }
    log.iter()
        .map(|d| {
            let outcome = match (d["status"].as_i64(), d["error"].as_str()) {
                (Some(status), _) => format!("answered {status}"),
                (None, Some(error)) => format!("no answer: {error}"),
                (None, None) => "no answer".into(),
            };
            format!(
                "{} · {} {} · {outcome} in {}{}",
                d["attempted_ms"],
                text(&d["msg_id"]),
                d["type"].as_str().unwrap_or("(trimmed)"),
                span(d["took_ms"].as_i64().unwrap_or(0)),
                if d["replay"].as_bool() == Some(true) {
                    " · replay"
                } else {
                    ""
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// An event's payments, one line each: who, how much, where it stands (and why a refund).
pub fn payments(v: &Value) -> String {
    let listed = v["payments"].as_array().cloned().unwrap_or_default();
    if listed.is_empty() {
        return "no payments".into();
    }
    listed
        .iter()
        .map(|p| {
            let mut status = p["status"].as_str().unwrap_or("?").replace('_', " ");
            if let Some(reason) = p["refund_reason"].as_str() {
                status = format!("{status} ({reason})");
            }
            if let Some(error) = p["refund_error"].as_str() {
                status = format!("{status}, last refund failed: {error}");
            }
            format!(
                "{} · order {} · {} · {} {} (smallest unit) · {status} · provider {}",
                p["payment_id"].as_str().unwrap_or("?"),
                p["order_id"].as_str().unwrap_or("?"),
                p["user_id"].as_str().unwrap_or("?"),
                p["amount"],
                p["currency"].as_str().unwrap_or(""),
                p["provider_ref"].as_str().unwrap_or("-"),
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What an audit record says changed: the fields that differ (`name: before → after`), else
/// what was added or returned, or the error answered.
pub fn change(before: &Value, after: &Value) -> String {
    match (before.as_object(), after.as_object()) {
        (_, Some(a)) if a.contains_key("error") => {
            format!("refused: {}", text(&after["error"]["code"]))
        }
        (Some(b), Some(a)) => {
            let changed: Vec<String> = a
                .iter()
                .filter(|(k, v)| b.get(*k) != Some(*v))
                .map(|(k, v)| format!("{k}: {} → {}", b.get(k).map_or("–".into(), text), text(v)))
                .collect();
            if changed.is_empty() {
                "no field changed".into()
            } else {
                changed.join(", ")
            }
        }
        (None, Some(_)) => fields(after),
        _ => "–".into(),
    }
}

/// A bar of `width` cells, `part` of `whole` filled.
fn bar(part: i64, whole: i64, width: usize) -> String {
    let filled = if whole > 0 {
        (part.clamp(0, whole) as usize * width).div_ceil(whole as usize)
    } else {
        0
    };
    format!("{}{}", "█".repeat(filled), "░".repeat(width - filled))
}

/// The previous frame of `status --watch`, and how long ago it was read.
type Previous<'a> = Option<(Duration, &'a Value)>;

/// `status`: the event's state; with the previous frame, per-second rates.
pub fn status(event: &str, v: &Value, previous: Previous<'_>, now_ms: Option<u64>) -> String {
    let stock: i64 = setting(v, "stock").parse().unwrap_or(0);
    [
        status_header(event, v, now_ms),
        units_left(v, stock),
        order_flow(v, previous),
        side_counts(v),
        refusals(v, previous),
        shards(v, stock),
    ]
    .concat()
}

/// A field of the event's configuration (the server sends them as strings), "" when absent.
fn setting<'a>(v: &'a Value, key: &str) -> &'a str {
    v["config"][key].as_str().unwrap_or("")
}

/// `id · sku · phase · mode`.
fn status_header(event: &str, v: &Value, now_ms: Option<u64>) -> String {
    let mode = match setting(v, "admission_mode") {
        "" => "fcfs",
        mode => mode,
    };
    format!(
        "{event} · {} · {} · {mode} mode\n",
        setting(v, "sku"),
        phase(v, now_ms)
    )
}

/// Where the sale stands: a switch that stops it first, then its window on the server's clock.
fn phase(v: &Value, now_ms: Option<u64>) -> String {
    let start: i64 = setting(v, "start_ms").parse().unwrap_or(0);
    let end: i64 = setting(v, "end_ms").parse().unwrap_or(0);
    match now_ms.map(|n| n as i64) {
        _ if setting(v, "warmed") != "1" => "not warmed up".to_owned(),
        _ if setting(v, "enabled") == "0" => "PAUSED".to_owned(),
        _ if setting(v, "soldout") == "1" => "sold out".to_owned(),
        Some(now) if now < start => format!("opens in {}", span(start - now)),
        Some(now) if now < end => format!("on sale, ends in {}", span(end - now)),
        Some(_) => "ended".to_owned(),
        None => "?".to_owned(),
    }
}

/// "  +N/s" for the number at `path` since the previous frame; nothing on the first frame.
fn per_second(v: &Value, previous: Previous<'_>, path: &str) -> String {
    match previous {
        Some((dt, p)) if dt.as_secs_f64() > 0.0 => {
            let at = |v: &Value| v.pointer(path).and_then(Value::as_i64).unwrap_or(0);
            format!("  {:+.0}/s", (at(v) - at(p)) as f64 / dt.as_secs_f64())
        }
        _ => String::new(),
    }
}

fn units_left(v: &Value, stock: i64) -> String {
    let left = v["stock_left"].as_i64().unwrap_or(0);
    format!(
        "units left    {:>12} / {}  {}\n",
        num(&left.into()),
        num(&stock.into()),
        bar(left, stock, 24)
    )
}

/// Orders through their life, each count with its rate: accepted, queued, drained, paid.
fn order_flow(v: &Value, previous: Previous<'_>) -> String {
    let mut out = String::new();
    for (label, key) in [
        ("accepted", "sold"),
        ("queued", "queued"),
        ("drained", "drained"),
        ("paid", "paid"),
    ] {
        let _ = writeln!(
            out,
            "{label:<13} {:>12}{}",
            num(&v[key]),
            per_second(v, previous, &format!("/{key}"))
        );
    }
    out
}

/// The counts off that flow: expired (units back on sale), dead letters (an operator's to
/// handle), and the lottery's admitted.
fn side_counts(v: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<13} {:>12}   unpaid, back on sale",
        "expired",
        num(&v["expired"])
    );
    let _ = writeln!(
        out,
        "{:<13} {:>12}{}",
        "dead letters",
        num(&v["dead_letters"]),
        if v["dead_letters"].as_i64().unwrap_or(0) > 0 {
            "  ← needs an operator"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "{:<13} {:>12}   registrants {}",
        "admitted",
        num(&v["admitted"]),
        num(&v["registrants"])
    );
    out
}

/// One line per refusal code, the most frequent first, each with its rate.
fn refusals(v: &Value, previous: Previous<'_>) -> String {
    let counts = refusal_counts(v);
    let mut out = format!("{:<13}", "refused");
    if counts.is_empty() {
        let _ = write!(out, " {:>12}", "none");
    }
    for (i, (code, n)) in counts.iter().enumerate() {
        let per = per_second(v, previous, &format!("/refusals/{code}"));
        if i > 0 {
            let _ = write!(out, "\n{:<13}", "");
        }
        let _ = write!(out, " {:>12}  {code}{per}", num(&(*n).into()));
    }
    out.push('\n');
    out
}

/// The refusal counts by code: the largest first, ties by code.
fn refusal_counts(v: &Value) -> Vec<(String, i64)> {
    let refusals = v["refusals"].as_object().cloned().unwrap_or_default();
    let mut counts: Vec<(String, i64)> = refusals
        .into_iter()
        .map(|(code, n)| (code, n.as_i64().unwrap_or(0)))
        .collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
}

/// Units left in each shard, four a line, each bar against an even share of the stock.
fn shards(v: &Value, stock: i64) -> String {
    let shards = v["stock_by_shard"].as_array().cloned().unwrap_or_default();
    let per = stock.max(1) / (shards.len().max(1) as i64) + 1;
    let mut out = "shards       ".to_owned();
    for (i, s) in shards.iter().enumerate() {
        if i > 0 && i % 4 == 0 {
            out.push_str("\n             ");
        }
        let _ = write!(
            out,
            " {i:>3}:{:>9} {}",
            num(s),
            bar(s.as_i64().unwrap_or(0), per, 4)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_and_spans_read_well() {
        assert_eq!(num(&json!(1234567)), "1,234,567");
        assert_eq!(num(&json!(-1000)), "-1,000");
        assert_eq!(num(&json!(12)), "12");
        assert_eq!(span(250), "250ms");
        assert_eq!(span(65_000), "1m05s");
        assert_eq!(span(3_720_000), "1h02m");
        assert_eq!(bar(1, 2, 4), "██░░");
        assert_eq!(bar(0, 0, 2), "░░");
    }

    #[test]
    fn a_version_shows_who_when_and_each_field_it_changed() {
        let v = json!({ "versions": [
            { "version": 9, "at_ms": 60_000, "operator": "ann", "change": "rollback", "rolled_back_to": 4,
              "changes": [{ "field": "gray_percent", "before": 30, "after": 100 }] },
            { "version": 4, "at_ms": 0, "operator": "bob", "change": "create", "rolled_back_to": null,
              "changes": [{ "field": "shadow", "before": null, "after": ["user"] }] },
        ]});
        assert_eq!(
            versions(&v, Some(66_000)),
            "v9 6s ago · ann · rollback to v4\n    gray_percent: 30 → 100\n\
             v4 1m06s ago · bob · create\n    shadow: – → [\"user\"]"
        );
        assert_eq!(
            global_limit(&json!({ "rate": 0.0, "burst": 0 })),
            "global limit: off"
        );
    }

    #[test]
    fn an_audit_record_shows_who_when_and_what_changed() {
        let v = json!({ "records": [{
            "id": 7, "at_ms": 1_000, "operator": "ann", "role": "operator",
            "method": "PATCH", "path": "/admin/events/e1", "event_id": "e1", "status": 200,
            "before": { "enabled": "1", "sku": "x" },
            "after": { "enabled": "0", "sku": "x", "user_rate": "2" },
        }]});
        assert_eq!(
            audit(&v, Some(66_000)),
            "#7 1m05s ago · ann (operator) · PATCH /admin/events/e1 → 200\n    \
             enabled: 1 → 0, user_rate: – → 2"
        );
        assert_eq!(
            change(&Value::Null, &json!({ "error": { "code": "forbidden" } })),
            "refused: forbidden"
        );
        assert_eq!(
            change(&Value::Null, &json!({ "admitted": 3 })),
            "admitted=3"
        );
        assert_eq!(
            audit(&json!({ "records": [] }), None),
            "no changes recorded"
        );
    }

    #[test]
    fn an_endpoint_shows_what_it_has_yet_to_get_and_each_attempt_its_event() {
        let endpoint = |id: &str| {
            json!({ "endpoint_id": id, "url": format!("https://{id}.example/h"), "description": "",
                    "enabled": true, "failing_since_ms": null })
        };
        let v = json!({
            "endpoints": [endpoint("ep_a"), endpoint("ep_b")],
            "backlog": [{ "endpoint_id": "ep_a", "pending": 3, "oldest_ms": 65_000 },
                        { "endpoint_id": "ep_b", "pending": 0, "oldest_ms": 0 }],
        });
        assert_eq!(
            endpoints(&v),
            "ep_a · https://ep_a.example/h · delivering · 3 waiting, the oldest 1m05s old\n\
             ep_b · https://ep_b.example/h · delivering"
        );
        let log = json!({ "deliveries": [
            { "attempted_ms": 9, "msg_id": "msg_x_1", "type": "order.paid", "status": 204,
              "error": null, "took_ms": 12, "replay": false },
            { "attempted_ms": 8, "msg_id": "msg_x_0", "type": null, "status": null,
              "error": "refused", "took_ms": 0, "replay": true },
        ]});
        assert_eq!(
            deliveries(&log),
            "9 · msg_x_1 order.paid · answered 204 in 12ms\n\
             8 · msg_x_0 (trimmed) · no answer: refused in 0ms · replay"
        );
    }
}
