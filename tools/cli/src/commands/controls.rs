//! Live controls: `patch` (switches and limits of an event), `deny`, `global-limit`.

use std::time::Duration;

use clap::Args;
use serde_json::{Map, Value, json};

use super::{Output, event_path, ms, parse_duration, parse_limit, show};
use crate::api::{Api, Failure};
use crate::render;

/// `patch`: sends only the changes asked for, and at least one.
pub fn patch(cli: Output, api: &Api, p: &Patch) -> Result<(), Failure> {
    let body = patch_body(api, p)?;
    if body.is_empty() {
        return Err(Failure::Usage(
            "patch needs a change: --pause, --resume, --end-in, --user-limit, ...".into(),
        ));
    }
    let body = Value::Object(body);
    api.send("PATCH", &event_path(&p.event), Some(&body))?;
    show(cli, &json!({ "event_id": p.event, "updated": body }), |v| {
        format!("updated {}: {}", p.event, render::fields(&v["updated"]))
    });
    Ok(())
}

/// The `PATCH` body: one field per flag given. `--end-in` asks the server's clock.
fn patch_body(api: &Api, p: &Patch) -> Result<Map<String, Value>, Failure> {
    let mut body = Map::new();
    if p.pause || p.resume {
        body.insert("enabled".into(), json!(p.resume));
    }
    if let Some(d) = p.end_in {
        body.insert("end_ms".into(), json!(api.server_now_ms()? + ms(d)));
    }
    if let Some((rate, burst)) = p.user_limit {
        body.insert("user_rate".into(), json!(rate));
        body.insert("user_burst".into(), json!(burst));
    }
    if let Some((rate, burst)) = p.buy_limit {
        body.insert("buy_rate".into(), json!(rate));
        body.insert("buy_burst".into(), json!(burst));
    }
    if let Some(d) = p.purchase_token_ttl {
        body.insert("purchase_token_ttl_ms".into(), json!(ms(d)));
    }
    if let Some(r) = p.drain_rate {
        body.insert("drain_rate".into(), json!(r));
    }
    if let Some(g) = p.gray {
        body.insert("gray_percent".into(), json!(g));
    }
    if let Some(limits) = &p.shadow {
        let limits: Vec<&String> = limits.iter().filter(|l| !l.is_empty()).collect();
        body.insert("shadow".into(), json!(limits));
    }
    Ok(body)
}

/// `deny`: at least one user or address.
pub fn deny(cli: Output, api: &Api, d: &Deny) -> Result<(), Failure> {
    if d.users.is_empty() && d.addrs.is_empty() {
        return Err(Failure::Usage("deny needs --user or --addr".into()));
    }
    let body = json!({ "users": d.users, "addrs": d.addrs });
    let denied = api.send(
        "POST",
        &format!("{}/deny", event_path(&d.event)),
        Some(&body),
    )?;
    show(cli, &denied, |v| {
        format!("denied {} on {}", render::num(&v["denied"]), d.event)
    });
    Ok(())
}

/// `global-limit`: sets the bucket when given both --rate and --burst, else shows it.
pub fn global_limit(
    cli: Output,
    api: &Api,
    rate: Option<f64>,
    burst: Option<u64>,
) -> Result<(), Failure> {
    let limit = match (rate, burst) {
        (Some(rate), Some(burst)) => api.send(
            "PUT",
            "/admin/limits/global",
            Some(&json!({ "rate": rate, "burst": burst })),
        )?,
        _ => api.get("/admin/limits/global")?,
    };
    show(cli, &limit, render::global_limit);
    Ok(())
}

/// `patch` flags: at least one change.
#[derive(Args)]
pub struct Patch {
    /// The event id.
    pub event: String,
    /// Pause the sale (precheck and buy answer sale_paused).
    #[arg(long, conflicts_with = "resume")]
    pub pause: bool,
    /// Resume the sale.
    #[arg(long)]
    pub resume: bool,
    /// Move the end to this long from now (server clock).
    #[arg(long, value_parser = parse_duration)]
    pub end_in: Option<Duration>,
    /// Prechecks per second per user (0 = no limit) and the bucket size: RATE,BURST.
    #[arg(long, value_parser = parse_limit)]
    pub user_limit: Option<(f64, u64)>,
    /// Buys per second for the whole event (0 = no limit) and the bucket size: RATE,BURST.
    #[arg(long, value_parser = parse_limit)]
    pub buy_limit: Option<(f64, u64)>,
    /// Lifetime of purchase tokens handed out from now on.
    #[arg(long, value_parser = parse_duration)]
    pub purchase_token_ttl: Option<Duration>,
    /// Expected drain throughput (orders/s), for the buyers' wait estimates.
    #[arg(long)]
    pub drain_rate: Option<u64>,
    /// Gray release: the share of users (0-100 %) who may pass precheck.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub gray: Option<u32>,
    /// Limits counted but not enforced: gray, user, global (comma-separated; "" for none).
    #[arg(long, value_delimiter = ',', num_args = 0..)]
    pub shadow: Option<Vec<String>>,
}

/// `deny` flags: at least one user or address.
#[derive(Args)]
pub struct Deny {
    /// The event id.
    pub event: String,
    /// A user id (repeat for more).
    #[arg(long = "user")]
    pub users: Vec<String>,
    /// A client IP address or CIDR range, e.g. 203.0.113.0/24 (repeat for more).
    #[arg(long = "addr")]
    pub addrs: Vec<String>,
}
