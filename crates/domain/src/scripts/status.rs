//! `lua/status.lua`: one shard's state for the operator, in one read-only call.

use std::collections::BTreeMap;

use super::ScriptError;
use super::status_contract::{Args, Keys, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// The raw state, as Redis holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raw {
    /// The configuration hash.
    pub config: BTreeMap<String, String>,
    /// The shard's units left.
    pub stock: i64,
    /// Orders accepted.
    pub sold: i64,
    /// Orders drained.
    pub drained: i64,
    /// Entries in the dead-letter stream.
    pub dead_letters: i64,
    /// Dead letters that are sold orders.
    pub dead_orders: i64,
    /// Entries the order stream holds.
    pub stream_length: i64,
    /// Admitted users.
    pub admitted: i64,
    /// Lottery registrants.
    pub registrants: i64,
    /// The counts hash: refusals by reply code (`"5"` for `SOLD_OUT`), `paid`, `expired`.
    pub counts: BTreeMap<String, i64>,
}

/// Runs it.
pub fn run(store: &impl Store, k: &ShardKeys) -> Result<Raw, ScriptError> {
    let keys = Keys::at(k);
    let mut r = call_ok(store, keys, Args {})?;
    let mut config = BTreeMap::new();
    for _ in 0..r.next_u64()? {
        config.insert(r.next_text()?, r.next_text()?);
    }
    let mut raw = Raw {
        config,
        stock: r.next_int()?,
        sold: r.next_int()?,
        drained: r.next_int()?,
        dead_letters: r.next_int()?,
        dead_orders: r.next_int()?,
        stream_length: r.next_int()?,
        admitted: r.next_int()?,
        registrants: r.next_int()?,
        counts: BTreeMap::new(),
    };
    for _ in 0..r.next_u64()? {
        raw.counts.insert(r.next_text()?, r.next_int()?);
    }
    r.finish()?;
    Ok(raw)
}
