//! One hot item over many Redis nodes: a **sharded event** keeps each stock shard in a hash
//! slot of its own (`{sk:E/s}`, [`ShardKeys`]), dealt out over the nodes of `redis_url`
//! evenly ([`crate::nodes::index_for_shard`]), so one event spans every node and adds each
//! node's core to the sale.
//!
//! A buyer belongs to one shard, their **home** ([`crate::ids::home_of`]), and everything
//! their requests need lives in its slot: a copy of the event's configuration (written to every
//! shard, with a `version`), their admission, purchase token and rate bucket, one-per-user, the
//! order, the shard's order stream and counters. So admission, precheck, buy and poll are one EVALSHA each, on one node; a request
//! that reaches another slot is refused there without a change ([`Refusal::WrongShard`]) and
//! sent home once. One-per-user is exact because a user only ever buys at home.
//!
//! When the home shard is empty and others are not, the buy takes the **tail**
//! ([`crate::sale::buy`]): a unit is lent from another shard to the home shard (`shard_lend.lua`, which
//! records the transfer there) and the home shard credits it and sells it in the same script
//! (`buy.lua`, which remembers the transfer id so it credits once). Three round trips when the
//! slot's picture of the shards that hold stock is current, at most
//! [`crate::sale::MAX_BUY_ROUND_TRIPS`]. A tail cut short leaves a transfer recorded at the
//! lender and not credited: the [`transfer::repair`] credits it (once) and settles it.
//! [`transfer::rebalance`] moves stock between shards with the same two steps.
//!
//! The module is the domain's side; the scripts are `crates/domain/lua/shard_*.lua` plus the sale
//! scripts that run per slot unchanged (precheck, poll, issue-token, draw, deny, set-fields,
//! status).

pub mod transfer;

use std::collections::BTreeMap;

use crate::error::Error;
use crate::event::EventId;
use crate::ids;
use crate::keys::{MasterKeys, ShardKeys};
use crate::nodes::Nodes;
use crate::scripts::{self, Refusal, ScriptError};
use crate::store::{Store, StoreError};

/// An event's shards over the nodes: where each shard's slot is (the event's configuration is
/// [`crate::event::EventConfig`]).
pub struct EventShards<'a, S> {
    nodes: &'a Nodes<S>,
    id: &'a EventId,
    shards: u32,
}

impl<'a, S: Store> EventShards<'a, S> {
    /// `id`, with `shards` shards, over `nodes`.
    pub fn new(nodes: &'a Nodes<S>, id: &'a EventId, shards: u32) -> Self {
        EventShards {
            nodes,
            id,
            shards: shards.max(1),
        }
    }

    /// The event as its master configuration describes it (one HGETALL of the event's own
    /// slot), with that configuration. No master: [`Refusal::NotFound`].
    pub fn open(
        nodes: &'a Nodes<S>,
        id: &'a EventId,
    ) -> Result<(Self, BTreeMap<String, String>), Error> {
        let config = scripts::read_config::run(nodes.for_event(id)?, &MasterKeys::new(id))?;
        let shards = config
            .get("shards")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Error::bug(format!("event {} has no shard count", id.as_str())))?;
        Ok((EventShards::new(nodes, id, shards), config))
    }

    /// The event.
    pub fn id(&self) -> &EventId {
        self.id
    }

    /// How many shards it has.
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// Shard `shard`'s node and keys.
    pub fn slot(&self, shard: u32) -> Result<(&'a S, ShardKeys), StoreError> {
        Ok((
            self.nodes.for_shard(self.id, shard)?,
            ShardKeys::new(self.id, shard),
        ))
    }

    /// The master copy of the configuration: the event's own slot `{sk:E}`, on its node.
    pub fn master(&self) -> Result<(&'a S, MasterKeys), StoreError> {
        Ok((self.nodes.for_event(self.id)?, MasterKeys::new(self.id)))
    }

    /// Runs `f` on shard `shard`'s slot; a node that does not answer is down for the rest of
    /// the request ([`Nodes::on_shard`]).
    pub fn on_slot<T>(
        &self,
        shard: u32,
        f: impl FnOnce(&'a S, &ShardKeys) -> Result<T, ScriptError>,
    ) -> Result<T, Error> {
        let k = ShardKeys::new(self.id, shard);
        Ok(self.nodes.on_shard(self.id, shard, |store| f(store, &k))?)
    }

    /// Every shard, in order.
    pub fn all(&self) -> impl Iterator<Item = u32> {
        0..self.shards
    }
}

/// Runs `op` at `user`'s home shard (by `shards`, the caller's count). When the count was
/// stale or wrong, the slot it reached says so: [`Refusal::WrongShard`] names the event's count,
/// and [`Refusal::NotFound`] (a shard past the event's last) sends us to the master for it; `op`
/// then runs once more, at the true home. Returns the result and the event as it ran.
pub fn at_home<'a, S: Store, T>(
    nodes: &'a Nodes<S>,
    id: &'a EventId,
    shards: u32,
    user: &str,
    mut op: impl FnMut(&EventShards<'a, S>, u32, u64) -> Result<T, ScriptError>,
) -> Result<(T, EventShards<'a, S>), Error> {
    let hash = ids::home_hash(id.as_str(), user);
    let event = EventShards::new(nodes, id, shards);
    let true_count = match op(&event, ids::home_of(hash, event.shards), hash) {
        Err(ScriptError::Refused(Refusal::WrongShard { shards })) if shards != event.shards => {
            shards
        }
        Err(ScriptError::Refused(Refusal::NotFound)) => match EventShards::open(nodes, id) {
            Ok((master, _)) if master.shards != event.shards => master.shards,
            Ok(_) => return Err(Refusal::NotFound.into()),
            Err(e) => return Err(e),
        },
        other => return Ok((other?, event)),
    };
    let event = EventShards::new(nodes, id, true_count);
    let t = op(&event, ids::home_of(hash, event.shards), hash)?;
    Ok((t, event))
}
