//! `create` (with `--warmup`) and `warmup`.

use std::time::Duration;

use serde_json::{Value, json};

use super::{event_path, ms, progress, show};
use crate::api::{Api, Failure};
use crate::render;
use crate::{Cli, Create};

/// `create`: times are reckoned on the server's clock, as the sale will be.
pub fn create(cli: &Cli, api: &Api, c: &Create) -> Result<(), Failure> {
    let now = api.server_now_ms()?;
    let (start, end) = window(c, now);
    let created = api.send(
        "PUT",
        &event_path(&c.event),
        Some(&create_body(c, start, end)),
    )?;
    let mut out = json!({ "event_id": c.event, "created": created["created"], "start_ms": start, "end_ms": end });
    if c.warmup {
        out["warmup"] = warm_up(cli, api, &c.event)?;
    }
    show(cli, &out, |v| render::created(v, &c.sku, c.stock, now));
    Ok(())
}

/// `warmup`.
pub fn warmup(cli: &Cli, api: &Api, event: &str) -> Result<(), Failure> {
    let warmed = warm_up(cli, api, event)?;
    show(cli, &warmed, |v| {
        format!(
            "warmed up {event}: {} units over {} shards",
            render::num(&v["stock"]),
            v["shards"]
        )
    });
    Ok(())
}

fn warm_up(cli: &Cli, api: &Api, event: &str) -> Result<Value, Failure> {
    progress(cli, "warming up", || {
        api.send("POST", &format!("{}/warmup", event_path(event)), None)
    })
}

/// The sale's start and end (Unix ms): given, or from now and the duration (default 1h).
fn window(c: &Create, now: u64) -> (u64, u64) {
    let start = c
        .start_ms
        .unwrap_or_else(|| now + ms(c.start_in.unwrap_or_default()));
    let end = c
        .end_ms
        .unwrap_or_else(|| start + ms(c.duration.unwrap_or(Duration::from_secs(3600))));
    (start, end)
}

/// The `PUT` body of `create`: only the fields given, the server's defaults for the rest.
fn create_body(c: &Create, start: u64, end: u64) -> Value {
    let mut body = json!({
        "sku": c.sku, "unit_amount": c.price, "currency": c.currency,
        "stock": c.stock, "start_ms": start, "end_ms": end,
    });
    let mut set = |k: &str, v: Value| body[k] = v;
    if let Some(s) = c.shards {
        set("shards", json!(s));
    }
    if let Some(a) = c.admission {
        set("admission_mode", json!(a.name()));
    }
    if let Some(m) = c.multiplier {
        set("admission_multiplier", json!(m));
    }
    if let Some(d) = c.pow_difficulty {
        set("pow_difficulty", json!(d));
    }
    if let Some(t) = c.payment_timeout {
        set("payment_timeout_s", json!(t.as_secs()));
    }
    if let Some((rate, burst)) = c.user_limit {
        set("user_rate", json!(rate));
        set("user_burst", json!(burst));
    }
    if let Some((rate, burst)) = c.buy_limit {
        set("buy_rate", json!(rate));
        set("buy_burst", json!(burst));
    }
    if c.paused {
        set("enabled", json!(false));
    }
    body
}
