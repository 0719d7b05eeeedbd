//! What an operator does: create and update events, warm up stock, flip switches and limits,
//! deny users and addresses, run the lottery draw, read an event's state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::event::{EventConfig, EventId, Switches};
use crate::keys::EventKeys;
use crate::scripts::{self, Refusal};
use crate::store::Store;

/// Creates or updates an event. Stock and shards are frozen once warmed up. Returns whether it
/// was created.
pub fn upsert_event(
    store: &impl Store,
    event: &EventId,
    config: &EventConfig,
) -> Result<bool, Error> {
    config.validate()?;
    let k = EventKeys::new(event);
    // The scheduled jobs find events through the registry, a slot of its own (so a second
    // call). Registered first: if the configuration write then fails, the jobs meet an entry
    // without configuration and skip it; the other way round, a failure in between would leave
    // a sellable event the drain never visits.
    scripts::register_event::run(store, event)?;
    Ok(scripts::upsert_event::run(store, &k, config.fields())?)
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
pub fn warm_up(store: &impl Store, event: &EventId) -> Result<Warmed, Error> {
    let (stock, shards) = scripts::warmup::run(store, &EventKeys::new(event))?;
    Ok(Warmed { stock, shards })
}

/// Applies live switches and limits.
pub fn set_switches(store: &impl Store, event: &EventId, switches: &Switches) -> Result<(), Error> {
    Ok(scripts::set_fields::run(
        store,
        &EventKeys::new(event),
        switches.fields()?,
    )?)
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
pub fn deny(store: &impl Store, event: &EventId, list: &DenyList) -> Result<(), Error> {
    if list.users.is_empty() && list.addrs.is_empty()
        || list.users.len() + list.addrs.len() > 10_000
    {
        return Err(Error::invalid(
            "invalid_deny_list",
            "give 1-10000 users or addrs",
        ));
    }
    Ok(scripts::deny::run(
        store,
        &EventKeys::new(event),
        &list.users,
        &list.addrs,
    )?)
}

/// Winners drawn per script call: small enough that no call blocks Redis for long.
pub const DRAW_PAGE: u32 = 5_000;

/// Runs the lottery draw, `page` winners per script call; returns how many were admitted.
/// A draw cut short (a lost connection) resumes where it stopped when called again.
pub fn draw(store: &impl Store, event: &EventId, page: u32) -> Result<u64, Error> {
    let k = EventKeys::new(event);
    loop {
        let drawn = scripts::draw::run(store, &k, page)?;
        if drawn.done {
            return Ok(drawn.winners);
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
    /// Orders paid (as mirrored in Redis by pay).
    pub paid: i64,
    /// Unpaid orders expired by timeout-release, their units back on sale.
    pub expired: i64,
    /// Requests the sale's scripts refused, by the API error code they were answered with
    /// (input errors refused before Redis — malformed requests, bad JWTs — are not counted).
    pub refusals: BTreeMap<&'static str, i64>,
}

/// Reads an event's state in one script.
pub fn status(store: &impl Store, event: &EventId) -> Result<EventStatus, Error> {
    let raw = scripts::status::run(store, &EventKeys::new(event))?;
    Ok(EventStatus {
        config: raw.config,
        stock_left: raw.stock_by_shard.iter().sum(),
        stock_by_shard: raw.stock_by_shard,
        sold: raw.sold,
        drained: raw.drained,
        queued: (raw.sold - raw.drained - raw.dead_orders).max(0),
        dead_letters: raw.dead_letters,
        stream_length: raw.stream_length,
        admitted: raw.admitted,
        registrants: raw.registrants,
        paid: raw.counts.get("paid").copied().unwrap_or(0),
        expired: raw.counts.get("expired").copied().unwrap_or(0),
        refusals: refusals_by_code(&raw.counts),
    })
}

/// The counts hash's refusal fields (reply codes) under the API codes they are answered with.
fn refusals_by_code(counts: &BTreeMap<String, i64>) -> BTreeMap<&'static str, i64> {
    let mut refusals = BTreeMap::new();
    for (field, n) in counts {
        if let Some(refusal) = field.parse().ok().and_then(Refusal::of_code) {
            *refusals.entry(Error::from(refusal).code()).or_default() += n;
        }
    }
    refusals
}
