//! `create` (with `--warmup`) and `warmup`.

use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use super::{Output, event_path, ms, parse_duration, parse_limit, progress, show};
use crate::api::{Api, Failure};
use crate::render;

/// `create`: times are reckoned on the server's clock, as the sale will be.
pub fn create(cli: Output, api: &Api, c: &Create) -> Result<(), Failure> {
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
pub fn warmup(cli: Output, api: &Api, event: &str) -> Result<(), Failure> {
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

fn warm_up(cli: Output, api: &Api, event: &str) -> Result<Value, Failure> {
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

/// `create` flags.
#[derive(Args)]
pub struct Create {
    /// The event id (1-64 of A-Z a-z 0-9 _ -).
    pub event: String,
    /// The item on sale.
    #[arg(long)]
    pub sku: String,
    /// The price of one unit, in the currency's smallest unit (1999 for 19.99).
    #[arg(long)]
    pub price: u64,
    /// The price's currency, lowercase ISO 4217 (eur).
    #[arg(long)]
    pub currency: String,
    /// Units for sale.
    #[arg(long)]
    pub stock: u64,
    /// Stock shards (1-256; default 8).
    #[arg(long)]
    pub shards: Option<u32>,
    /// Opens this long from now, on the server's clock (e.g. 90s, 5m).
    #[arg(long, value_parser = parse_duration, conflicts_with = "start_ms", required_unless_present = "start_ms")]
    pub start_in: Option<Duration>,
    /// Opens at this instant (Unix ms).
    #[arg(long)]
    pub start_ms: Option<u64>,
    /// Lasts this long (default 1h).
    #[arg(long, value_parser = parse_duration, conflicts_with = "end_ms")]
    pub duration: Option<Duration>,
    /// Closes at this instant (Unix ms).
    #[arg(long)]
    pub end_ms: Option<u64>,
    /// First come, first served, or a lottery.
    #[arg(long, value_enum)]
    pub admission: Option<Admission>,
    /// Admission tokens per unit (1-1000; default 10).
    #[arg(long)]
    pub multiplier: Option<u32>,
    /// Unpaid orders are released after this long (default 15m).
    #[arg(long, value_parser = parse_duration)]
    pub payment_timeout: Option<Duration>,
    /// Prechecks per second per user (0 = no limit) and the bucket size: RATE,BURST.
    #[arg(long, value_parser = parse_limit)]
    pub user_limit: Option<(f64, u64)>,
    /// Buys per second for the whole event (0 = no limit) and the bucket size: RATE,BURST.
    #[arg(long, value_parser = parse_limit)]
    pub buy_limit: Option<(f64, u64)>,
    /// Leading zero bits of the admission's proof of work (0-24; default 20, 0 = none).
    #[arg(long)]
    pub pow_difficulty: Option<u32>,
    /// Create it paused.
    #[arg(long)]
    pub paused: bool,
    /// Warm it up right after.
    #[arg(long)]
    pub warmup: bool,
}

/// Admission modes.
#[derive(Clone, Copy, ValueEnum)]
pub enum Admission {
    /// First come, first served.
    Fcfs,
    /// Registration, then a draw.
    Lottery,
}

impl Admission {
    pub fn name(self) -> &'static str {
        match self {
            Admission::Fcfs => "fcfs",
            Admission::Lottery => "lottery",
        }
    }
}
