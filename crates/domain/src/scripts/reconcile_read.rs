//! `lua/reconcile_read.lua`: the Redis side of an event's books at one shard (read-only).

use super::ScriptError;
use super::reconcile_read_contract::{Args, Keys, OkReply, call_ok};
use super::shard_lent::Transfer;
use crate::keys::ShardKeys;
use crate::store::Store;

/// Redis's books of one shard: units put on sale, units left, orders accepted and drained,
/// entries the order stream holds, dead letters, the dead letters that are sold orders, and
/// units lent to it that it has not credited yet.
pub type Books = OkReply;

/// Runs it at shard slot `k`, given the unsettled transfers other shards lent it.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    lent_here: &[&Transfer],
) -> Result<Books, ScriptError> {
    let args = Args {
        lent_here: super::flat_pairs(lent_here.iter().map(|t| (&t.id, t.units.to_string()))),
    };
    let mut r = call_ok(store, Keys::at(k), args)?;
    Ok(OkReply::read(&mut r)?)
}
