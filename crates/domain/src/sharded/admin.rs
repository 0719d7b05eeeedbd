//! What an operator does to a sharded event: the master configuration in the event's own slot,
//! a copy in every shard's slot, each write stamped with one `version` so a change cut short
//! shows ([`Status::versions_agree`]) and is finished by repeating it.

use std::collections::BTreeMap;

use super::Event;
use crate::admin::{DenyList, EventStatus, Warmed, check_deny_list};
use crate::error::Error;
use crate::event::{EventConfig, EventId, Switches};
use crate::nodes::Nodes;
use crate::scripts::{self, Refusal, ScriptError, shard_warmup};
use crate::store::Store;
use crate::{clock, ids};

/// A configuration field list.
type Fields = Vec<(&'static str, String)>;

/// A new version stamp: time-ordered, unique without coordination.
fn new_version() -> String {
    ids::new_order_id(clock::now_ms())
}

/// The master's fields as shard `shard` of `shards` holds them: its index, its part of the
/// admission cap and of the event-wide buy bucket (each shard refills `buy_rate / shards`).
fn shard_fields(fields: &Fields, shard: u32, shards: u32) -> Fields {
    let get = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    };
    let n = f64::from(shards);
    let mut out: Fields = fields
        .iter()
        .filter(|(name, _)| !matches!(*name, "buy_rate" | "buy_burst"))
        .cloned()
        .collect();
    out.push(("shard", shard.to_string()));
    if let (Some(stock), Some(mult)) = (get("stock"), get("admission_multiplier")) {
        let (stock, mult): (f64, f64) = (stock.parse().unwrap_or(0.0), mult.parse().unwrap_or(1.0));
        out.push(("admission_cap", ((stock * mult) / n).ceil().to_string()));
    }
    if let (Some(rate), Some(burst)) = (get("buy_rate"), get("buy_burst")) {
        let (rate, burst): (f64, f64) = (rate.parse().unwrap_or(0.0), burst.parse().unwrap_or(0.0));
        out.push(("buy_rate", (rate / n).to_string()));
        out.push(("buy_burst", (burst / n).ceil().max(1.0).to_string()));
    }
    out
}

/// Creates or updates a sharded event: registered, then the master, then every shard's copy,
/// all with one new version. Returns whether it was created.
pub fn upsert_event<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    config: &EventConfig,
) -> Result<bool, Error> {
    config.validate()?;
    let e = Event::new(nodes, event, config.shards);
    let (store, k) = e.master()?;
    scripts::register_event::run(store, event)?;
    let mut fields = config.fields();
    fields.push(("version", new_version()));
    let created = scripts::upsert_event::run(store, &k, fields.clone())?;
    for s in e.all() {
        let (store, k) = e.slot(s)?;
        scripts::upsert_event::run(store, &k, shard_fields(&fields, s, e.shards()))?;
    }
    Ok(created)
}

/// The master configuration.
fn master_config<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
) -> Result<BTreeMap<String, String>, Error> {
    let (store, k) = Event::new(nodes, event, 1).master()?;
    Ok(scripts::status::run(store, &k)?.config)
}

/// The event as its master describes it.
fn event_of<'a, S: Store>(
    nodes: &'a Nodes<S>,
    event: &'a EventId,
    config: &BTreeMap<String, String>,
) -> Result<Event<'a, S>, Error> {
    let shards = config
        .get("shards")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Error::bug(format!("event {} has no shard count", event.as_str())))?;
    Ok(Event::new(nodes, event, shards))
}

/// Writes each shard's part of the stock (the first `stock % shards` shards hold one more),
/// then marks the master warmed. Repeating it finishes a warm-up cut short.
pub fn warm_up<S: Store>(nodes: &Nodes<S>, event: &EventId) -> Result<Warmed, Error> {
    let config = master_config(nodes, event)?;
    let e = event_of(nodes, event, &config)?;
    let stock: u64 = config
        .get("stock")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let n = u64::from(e.shards());
    let mut already = true;
    for s in e.all() {
        let units = stock / n + u64::from(u64::from(s) < stock % n);
        let (store, k) = e.slot(s)?;
        already &= shard_warmup::run(store, &k, units)?.already;
    }
    let (store, k) = e.master()?;
    if already && config.get("warmed").is_some_and(|w| w == "1") {
        return Err(Refusal::Conflict.into());
    }
    scripts::set_fields::run(store, &k, vec![("warmed", "1".into())])?;
    Ok(Warmed {
        stock,
        shards: e.shards(),
    })
}

/// Applies live switches and limits to the master and every shard, with a new version.
pub fn set_switches<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    switches: &Switches,
) -> Result<(), Error> {
    let mut fields = switches.fields()?;
    fields.push(("version", new_version()));
    let config = master_config(nodes, event)?;
    let e = event_of(nodes, event, &config)?;
    let (store, k) = e.master()?;
    scripts::set_fields::run(store, &k, fields.clone())?;
    for s in e.all() {
        let (store, k) = e.slot(s)?;
        let mut f = shard_fields(&fields, s, e.shards());
        f.retain(|(name, _)| *name != "shard");
        scripts::set_fields::run(store, &k, f)?;
    }
    Ok(())
}

/// Adds to the deny lists of every shard (each buyer is checked at home).
pub fn deny<S: Store>(nodes: &Nodes<S>, event: &EventId, list: &DenyList) -> Result<(), Error> {
    check_deny_list(list)?;
    let config = master_config(nodes, event)?;
    let e = event_of(nodes, event, &config)?;
    for s in e.all() {
        let (store, k) = e.slot(s)?;
        scripts::deny::run(store, &k, &list.users, &list.addrs)?;
    }
    Ok(())
}

/// Runs the lottery draw in every shard (each admits its part), `page` winners per call.
pub fn draw<S: Store>(nodes: &Nodes<S>, event: &EventId, page: u32) -> Result<u64, Error> {
    let config = master_config(nodes, event)?;
    let e = event_of(nodes, event, &config)?;
    let mut winners = 0;
    for s in e.all() {
        let (store, k) = e.slot(s)?;
        loop {
            let drawn = scripts::draw::run(store, &k, page)?;
            if drawn.done {
                winners += drawn.winners;
                break;
            }
        }
    }
    Ok(winners)
}

/// A sharded event's state: the sums over shards, and what only shards have.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Status {
    /// The sums, as for an event in one slot (`stock_by_shard` from each shard's slot).
    #[serde(flatten)]
    pub event: EventStatus,
    /// Every shard holds the master's configuration version: no change was cut short.
    pub versions_agree: bool,
    /// Shards that consider the event sold out.
    pub sold_out_shards: u32,
}

/// Reads the master and every shard (one script each) and sums them.
pub fn status<S: Store>(nodes: &Nodes<S>, event: &EventId) -> Result<Status, Error> {
    let config = master_config(nodes, event)?;
    let e = event_of(nodes, event, &config)?;
    let mut sum = EventStatus {
        config: config.clone(),
        ..EventStatus::empty()
    };
    let mut counts = BTreeMap::new();
    let (mut versions_agree, mut sold_out_shards) = (true, 0);
    for s in e.all() {
        let (store, k) = e.slot(s)?;
        let raw = scripts::status::run(store, &k).map_err(|e| match e {
            ScriptError::Refused(Refusal::NotFound) => Error::bug(format!(
                "shard {s} of {} has no configuration",
                event.as_str()
            )),
            e => e.into(),
        })?;
        versions_agree &= raw.config.get("version") == config.get("version");
        sold_out_shards += u32::from(raw.config.get("soldout").is_some_and(|v| v == "1"));
        sum.stock_by_shard
            .push(raw.stock_by_shard.get(s as usize).copied().unwrap_or(0));
        sum.sold += raw.sold;
        sum.drained += raw.drained;
        sum.dead_letters += raw.dead_letters;
        sum.stream_length += raw.stream_length;
        sum.admitted += raw.admitted;
        sum.registrants += raw.registrants;
        sum.queued += (raw.sold - raw.drained - raw.dead_orders).max(0);
        for (field, n) in raw.counts {
            *counts.entry(field).or_insert(0) += n;
        }
    }
    sum.stock_left = sum.stock_by_shard.iter().sum();
    sum.set_counts(&counts);
    Ok(Status {
        event: sum,
        versions_agree,
        sold_out_shards,
    })
}
