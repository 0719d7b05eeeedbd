//! What an operator does: create and update events, warm up stock, flip switches and limits,
//! deny users and addresses, run the lottery draw, read an event's state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ApiError;
use crate::event::{EventConfig, EventId, Switches};
use crate::keys::EventKeys;
use crate::sale::ok_or_refusal;
use crate::scripts;
use crate::store::Store;

fn with_prefix(k: &EventKeys, fields: Vec<(&'static str, String)>) -> Vec<String> {
    let mut args = vec![k.prefix().to_owned()];
    for (f, v) in fields {
        args.push(f.to_owned());
        args.push(v);
    }
    args
}

/// Creates or updates an event. Stock and shards are frozen once warmed up. Returns whether it
/// was created.
pub fn upsert_event(
    store: &impl Store,
    event: &EventId,
    config: &EventConfig,
) -> Result<bool, ApiError> {
    config.validate()?;
    let k = EventKeys::new(event);
    // The scheduled jobs find events through the registry, a slot of its own (so a second
    // call). Registered first: if the configuration write then fails, the jobs meet an entry
    // without configuration and skip it; the other way round, a failure in between would leave
    // a sellable event the drain never visits.
    store.run(
        &scripts::REGISTER_EVENT,
        &[crate::keys::REGISTRY.to_owned()],
        &[String::new(), event.as_str().to_owned()],
    )?;
    let r = ok_or_refusal(store.run(
        &scripts::UPSERT_EVENT,
        &[k.cfg()],
        &with_prefix(&k, config.fields()),
    )?)?;
    Ok(r.int(1)? == 1)
}

/// The result of a warm-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warmed {
    /// Units written.
    pub stock: u64,
    /// Over this many shards.
    pub shards: u32,
}

/// Writes the stock into its shards, once, before the sale.
pub fn warm_up(store: &impl Store, event: &EventId) -> Result<Warmed, ApiError> {
    let k = EventKeys::new(event);
    let r = ok_or_refusal(store.run(
        &scripts::WARMUP,
        &[k.cfg(), k.nonempty()],
        &[k.prefix().to_owned()],
    )?)?;
    Ok(Warmed {
        stock: r.int(1)? as u64,
        shards: r.int(2)? as u32,
    })
}

/// Applies live switches and limits.
pub fn set_switches(
    store: &impl Store,
    event: &EventId,
    switches: &Switches,
) -> Result<(), ApiError> {
    let k = EventKeys::new(event);
    ok_or_refusal(store.run(
        &scripts::SET_FIELDS,
        &[k.cfg()],
        &with_prefix(&k, switches.fields()?),
    )?)?;
    Ok(())
}

/// Users and client addresses to keep out of an event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenyList {
    /// User ids.
    #[serde(default)]
    pub users: Vec<String>,
    /// Client addresses (IP, as Spin's `spin-client-addr` gives it without the port).
    #[serde(default)]
    pub addrs: Vec<String>,
}

/// Adds to an event's deny lists.
pub fn deny(store: &impl Store, event: &EventId, list: &DenyList) -> Result<(), ApiError> {
    if list.users.is_empty() && list.addrs.is_empty()
        || list.users.len() + list.addrs.len() > 10_000
    {
        return Err(ApiError::bad_request(
            "invalid_deny_list",
            "give 1-10000 users or addrs",
        ));
    }
    let k = EventKeys::new(event);
    let mut args = vec![k.prefix().to_owned(), list.users.len().to_string()];
    args.extend(list.users.iter().cloned());
    args.extend(list.addrs.iter().cloned());
    ok_or_refusal(store.run(
        &scripts::DENY,
        &[k.cfg(), k.denied_users(), k.denied_addrs()],
        &args,
    )?)?;
    Ok(())
}

/// Winners drawn per script call: small enough that no call blocks Redis for long.
pub const DRAW_PAGE: u32 = 5_000;

/// Runs the lottery draw, `page` winners per script call; returns how many were admitted.
/// A draw cut short (a lost connection) resumes where it stopped when called again.
pub fn draw(store: &impl Store, event: &EventId, page: u32) -> Result<u64, ApiError> {
    let k = EventKeys::new(event);
    loop {
        let r = ok_or_refusal(store.run(
            &scripts::DRAW,
            &[k.cfg(), k.admitted(), k.registrants()],
            &[k.prefix().to_owned(), page.max(1).to_string()],
        )?)?;
        if r.int(2)? == 1 {
            return Ok(r.int(1)? as u64);
        }
    }
}

/// An event's state, for the operator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventStatus {
    /// The configuration hash as stored (strings).
    pub config: BTreeMap<String, String>,
    /// Units left per shard.
    pub stock_by_shard: Vec<i64>,
    /// Units left in all.
    pub stock_left: i64,
    /// Orders accepted.
    pub sold: i64,
    /// Orders drained into Postgres.
    pub drained: i64,
    /// Accepted orders on their way to Postgres: sold − drained − dead orders.
    pub queued: i64,
    /// Accepted orders that could not land (the dead-letter stream): an operator's job.
    pub dead_letters: i64,
    /// Entries the order stream holds (acknowledged ones are trimmed by the drain).
    pub stream_length: i64,
    /// Admission tokens handed out.
    pub admitted: i64,
    /// Lottery registrants.
    pub registrants: i64,
}

/// Reads an event's state in one script.
pub fn status(store: &impl Store, event: &EventId) -> Result<EventStatus, ApiError> {
    let k = EventKeys::new(event);
    let r = ok_or_refusal(store.run(
        &scripts::STATUS,
        &[
            k.cfg(),
            k.seq(),
            k.drained(),
            k.queue(),
            k.admitted(),
            k.registrants(),
            k.dead(),
        ],
        &[k.prefix().to_owned()],
    )?)?;
    let nfields = r.int(1)? as usize;
    let mut config = BTreeMap::new();
    for i in 0..nfields {
        config.insert(r.text(2 + 2 * i)?, r.text(3 + 2 * i)?);
    }
    let mut at = 2 + 2 * nfields;
    let shards = r.int(at)? as usize;
    at += 1;
    let stock_by_shard = (0..shards)
        .map(|i| r.int(at + i))
        .collect::<Result<Vec<_>, _>>()?;
    at += shards;
    let (sold, drained, dead_letters, dead_orders) =
        (r.int(at)?, r.int(at + 1)?, r.int(at + 2)?, r.int(at + 3)?);
    Ok(EventStatus {
        config,
        stock_left: stock_by_shard.iter().sum(),
        stock_by_shard,
        sold,
        drained,
        queued: (sold - drained - dead_orders).max(0),
        dead_letters,
        stream_length: r.int(at + 4)?,
        admitted: r.int(at + 5)?,
        registrants: r.int(at + 6)?,
    })
}
