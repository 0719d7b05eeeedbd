//! The delivery job's outbound side: each order event POSTed to its endpoint over Spin's
//! `wasi:http` ([`crate::outbound`]), to whatever `https` host the operators registered (the
//! delivering component alone may reach any; the runtime's blocked networks keep private ones
//! out).

use std::time::Duration;

use seckill_domain::jobs::{self, Repeated};
use seckill_domain::order_events::deliver::{DeliveryReport, Sender};

use crate::config;
use crate::error::ApiError;
use crate::outbound::{self, Outbound};
use crate::postgres::SpinPg;

/// Sends to the endpoints' URLs.
pub struct Endpoints;

impl Sender for Endpoints {
    fn post(&mut self, url: &str, headers: &[(&str, &str)], body: &[u8]) -> Result<u16, String> {
        let (authority, path) = split(url)?;
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

/// An endpoint's `https` URL as a request names it: the authority, and the path with its query
/// (`/` when it has none; the fragment, never sent, left out).
fn split(url: &str) -> Result<(&str, String), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("not an https URL: {url}"))?;
    let rest = rest.split('#').next().unwrap_or(rest);
    let (authority, path) = rest
        .find(['/', '?'])
        .map_or((rest, ""), |i| rest.split_at(i));
    let path = match path {
        "" => "/".to_owned(),
        query if query.starts_with('?') => format!("/{query}"),
        path => path.to_owned(),
    };
    Ok((authority, path))
}

/// The delivery job over `db`, again and again for `budget` (once when it is zero).
pub fn deliver_for(db: &SpinPg, budget: Duration) -> Result<Repeated<DeliveryReport>, ApiError> {
    let settings = config::Settings::read()?;
    let opts = settings.order_events_options();
    Ok(jobs::deliver_events_for(db, &mut Endpoints, &opts, budget)?)
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn a_url_splits_into_the_authority_and_the_path_with_its_query() {
        let cases = [
            ("https://shop.example.com", ("shop.example.com", "/")),
            (
                "https://shop.example.com/hooks",
                ("shop.example.com", "/hooks"),
            ),
            (
                "https://shop.example.com:8443/a/b?x=1#frag",
                ("shop.example.com:8443", "/a/b?x=1"),
            ),
            (
                "https://shop.example.com?x=1",
                ("shop.example.com", "/?x=1"),
            ),
            ("https://[2606:4700::1111]/h", ("[2606:4700::1111]", "/h")),
        ];
        for (url, (authority, path)) in cases {
            assert_eq!(split(url), Ok((authority, path.to_owned())), "{url}");
        }
        assert!(split("http://shop.example.com/").is_err());
    }
}
