//! The delivery job's outbound side: each order event POSTed to its endpoint over Spin's
//! `wasi:http` ([`crate::outbound`]), to whatever `https` host the operators registered (the
//! delivering component alone may reach any; the runtime's blocked networks keep private ones
//! out).

use std::time::Duration;

use seckill_domain::jobs::{self, Repeated};
use seckill_domain::order_events::deliver::{DeliveryReport, Sender};
use seckill_domain::order_events::endpoints;

use crate::config;
use crate::error::ApiError;
use crate::outbound::{self, Outbound};
use crate::postgres::SpinPg;

/// Sends to the endpoints' URLs.
pub struct Endpoints;

impl Sender for Endpoints {
    fn post(&mut self, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<u16, String> {
        let (authority, path) =
            endpoints::split_url(url).ok_or_else(|| format!("not an https URL: {url}"))?;
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

/// The delivery job over `db`, again and again for `budget` (once when it is zero).
pub fn deliver_for(db: &SpinPg, budget: Duration) -> Result<Repeated<DeliveryReport>, ApiError> {
    let settings = config::Settings::read()?;
    let opts = settings.order_events_options();
    Ok(jobs::deliver_events_for(db, &mut Endpoints, &opts, budget)?)
}
