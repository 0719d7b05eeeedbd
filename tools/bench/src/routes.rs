//! The `routes` part: each hot route (admission, precheck, buy, poll) end to end, side by side
//! on four hosts: our host as it runs, and with Spin's per-request costs paid
//! (`--spin-faithful`: a new Redis connection per `open`, and the variable resolution and
//! allowed-host parsing Spin redoes per instance, `seckill_host::factors::spin_costs::SpinWork`), each
//! over `redis://` and over the Upstash REST transport (a plain-HTTP facade in this process, so
//! no TLS handshake hides the difference). Then the counts themselves (`spin_costs`).

use anyhow::Result;
use seckill_testkit::RedisServer;
use seckill_testkit::rest_facade::RestFacade;

use crate::endpoints;
use crate::fixture::{open_event, polls, prepare_buyers};
use crate::measure::{buys, endpoint_row};
use crate::options::SuiteArgs;
use crate::server::{HostProcess, point_redis_at};
use crate::spin_costs;
use crate::table::Row;

/// The rows: per host, its four routes; then the counters per route.
pub async fn rows(
    redis: &RedisServer,
    vars: &[(&'static str, String)],
    args: &SuiteArgs,
) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for rest in [false, true] {
        // One facade for both REST hosts: its pooled connections are the generator's side.
        let facade = match rest {
            true => Some(RestFacade::start_plain(&redis.url(), "routes-token").await?),
            false => None,
        };
        for faithful in [false, true] {
            let mut vars = vars.to_vec();
            if let Some(facade) = &facade {
                point_redis_at(&mut vars, facade.url(), facade.origin());
            }
            let host = HostProcess::start("spin.toml", &vars, faithful)?;
            let label = format!(
                "{}, {}",
                if faithful {
                    "host Spin-faithful"
                } else {
                    "host"
                },
                if rest { "REST" } else { "redis://" }
            );
            let id = format!("routes-{}-{}", u8::from(rest), u8::from(faithful));
            let event = open_event(redis, &id, 10_000_000)?;
            let buyers = prepare_buyers(redis, &event, args.users, &id)?;
            let host = &host;
            let row = |route: &str, calls| {
                let name = format!("{route} ({label})");
                async move {
                    let measured = endpoint_row(&name, host.addr, redis, args, calls);
                    Ok::<_, anyhow::Error>(host.measured(measured).await?.0)
                }
            };
            let admission = row("admission", endpoints::admission(&id, args)).await?;
            let precheck = row("precheck", endpoints::precheck(&event, redis, args)?).await?;
            let buy = row("buy", buys(&event, buyers.clone())).await?;
            // Those who bought poll for their order.
            let bought = (buy.requests() as usize).clamp(1, buyers.len());
            let poll = row("poll", polls(&event, &buyers[..bought])).await?;
            rows.extend([admission, precheck, buy, poll]);
        }
    }
    rows.extend(spin_costs::rows(vars).await?);
    Ok(rows)
}
