//! The delivery job's outbound side: each order event POSTed to its endpoint over Spin's
//! `wasi:http` ([`crate::outbound`]), to whatever `https` host the operators registered (the
//! delivering component alone may reach any; the runtime's blocked networks keep private ones
//! out).

use seckill_domain::clock;
use seckill_domain::error::Error;
use seckill_domain::order_events::deliver::{DeliveryReport, Sender, deliver};

use crate::config;
use crate::error::ApiError;
use crate::outbound::{self, Outbound};

/// Sends to the endpoints' URLs.
pub struct Endpoints;

impl Sender for Endpoints {
    fn post(&mut self, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<u16, String> {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| format!("not an https URL: {url}"))?;
        let (authority, path) = rest
            .find(['/', '?'])
            .map_or((rest, "/"), |i| rest.split_at(i));
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_owned()
        };
        let headers: Vec<(&str, &[u8])> = headers.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
        outbound::send(&Outbound {
            https: true,
            authority,
            post: true,
            path: &path,
            headers: &headers,
            body,
        })
        .map(|(status, _)| status)
    }
}

/// One run of the delivery job, within `budget_ms`.
pub fn deliver_for(budget_ms: u64) -> Result<DeliveryReport, ApiError> {
    let settings = config::Settings::read()?;
    let db = config::postgres()?;
    let started = clock::now_ms();
    let report = deliver(
        &db,
        &mut Endpoints,
        &settings.order_events_options(),
        started,
        || clock::now_ms() >= started + budget_ms,
    )
    .map_err(Error::from)?;
    Ok(report)
}
