//! `GET /api/events/{event_id}/orders/me`: the buyer's result, from Redis only (never Postgres),
//! cheap enough for everyone in the queue to poll every 1–3 s.
//!
//! Where no scheduler drains every second (`poll_drain_ms` > 0: the cron-free manifest), the
//! queue carries its own drain: at most one poll per shard every `poll_drain_ms` is elected
//! by the poll script and, once its answer is sent, drains its shard for up to that long.
//! The answer never waits on Postgres; Postgres sees at most one drainer per shard.

use std::time::{Duration, Instant};

use seckill_domain::event::EventId;
use seckill_domain::jobs;
use seckill_domain::nodes::Nodes;
use seckill_domain::sale::{self, Polled};
use seckill_spin_edge::config;
use seckill_spin_edge::error::ApiError;
use seckill_spin_edge::http::{self, buyer, event_id, require_method};
use seckill_spin_edge::store::{self, SpinStore};
use spin_sdk::http::{IncomingRequest, Method, Request, ResponseOutparam};
use spin_sdk::http_component;

/// Parse, apply ([`sale::poll`]), render; then, if elected, drain ([`jobs::drain_shard_until`]).
#[http_component]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    let mut elected = None;
    let response = http::serve(req, |req| match poll(&req) {
        Ok((nodes, event, polled)) => {
            if polled.drain_due {
                elected = Some((nodes, event, polled.shard));
            }
            http::respond(200, Ok(polled.result))
        }
        Err(e) => http::error(&e),
    })
    .await;
    http::send(out, response).await;
    if let Some((nodes, event, shard)) = elected {
        drain(&nodes, &event, shard);
    }
}

/// The buyer's result, with the nodes and event for the drain it may be elected to.
fn poll(req: &Request) -> Result<(Nodes<SpinStore>, EventId, Polled), ApiError> {
    require_method(req, Method::Get)?;
    let user = buyer(req)?;
    let event = event_id(req)?;
    let shards = http::shards_hint(req)?;
    let nodes = store::nodes()?;
    let polled = sale::poll(&nodes, &event, shards, &user, config::poll_drain_ms())?;
    Ok((nodes, event, polled))
}

/// The poll-carried drain, bounded by `poll_drain_ms`. The buyer has their answer already:
/// a failure here is only logged, and the next elected poll (or the scheduler) goes on. It
/// drains the buyer's home shard, whose queue the order waits in.
fn drain(nodes: &Nodes<SpinStore>, event: &EventId, shard: u32) {
    let until = Instant::now() + Duration::from_millis(config::poll_drain_ms());
    let result = config::Settings::read().and_then(|settings| {
        let store = nodes
            .for_shard(event, shard)
            .map_err(seckill_domain::Error::from)?;
        Ok(jobs::drain_shard_until(
            store,
            &config::postgres()?,
            (event, shard),
            &settings.drain_options(),
            until,
        )?)
    });
    if let Err(e) = result {
        eprintln!("poll-carried drain of {}: {e}", event.as_str());
    }
}
