//! `lua/reconcile_read.lua`: the Redis side of an event's books (read-only).

use super::ScriptError;
use super::reconcile_read_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Redis's books of one event: units put on sale, units left in the shards, orders accepted
/// and drained, entries the order stream holds, dead letters, and the dead letters that are
/// sold orders.
pub type Books = OkReply;

/// Runs it.
pub fn run(store: &impl Store, k: &EventKeys) -> Result<Books, ScriptError> {
    let keys = Keys {
        cfg: k.cfg(),
        seq: k.seq(),
        drained: k.drained(),
        queue: k.queue(),
        dead: k.dead(),
        stock: k.stock(),
        orders: k.orders(),
    };
    let mut r = call_ok(store, keys, Args {})?;
    Ok(OkReply::read(&mut r)?)
}
