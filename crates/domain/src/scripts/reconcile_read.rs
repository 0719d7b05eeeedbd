//! `lua/reconcile_read.lua`: the Redis side of an event's books (read-only).

use super::{RECONCILE_READ, ScriptError, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Redis's books of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Books {
    /// Units put on sale.
    pub initial_stock: i64,
    /// Units left in the shards.
    pub remaining: i64,
    /// Orders accepted.
    pub accepted: i64,
    /// Orders drained.
    pub drained: i64,
    /// Entries the order stream holds.
    pub stream_length: i64,
    /// Entries in the dead letters.
    pub dead_letters: i64,
    /// Dead letters that are sold orders.
    pub dead_orders: i64,
}

/// Runs it.
pub fn run(store: &impl Store, k: &EventKeys) -> Result<Books, ScriptError> {
    let mut r = call_ok(
        store,
        &RECONCILE_READ,
        &[
            k.cfg(),
            k.seq(),
            k.drained(),
            k.queue(),
            k.dead(),
            k.stock(),
            k.orders(),
        ],
        &[],
    )?;
    let books = Books {
        initial_stock: r.next_int()?,
        remaining: r.next_int()?,
        accepted: r.next_int()?,
        drained: r.next_int()?,
        stream_length: r.next_int()?,
        dead_letters: r.next_int()?,
        dead_orders: r.next_int()?,
    };
    r.finish()?;
    Ok(books)
}
