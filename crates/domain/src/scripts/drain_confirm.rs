//! `lua/drain_confirm.lua`: after the Postgres commit, marks orders confirmed, moves the
//! drained counter once per order, acknowledges the entries and trims the stream.

use super::ScriptError;
use super::drain_confirm_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// Runs it with (stream id, order id) pairs; returns how many orders were newly confirmed.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    committed: &[(&str, &str)],
) -> Result<u64, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        entries: super::flat_pairs(committed.iter().copied()),
    };
    let mut r = call_ok(store, keys, args)?;
    Ok(OkReply::read(&mut r)?.confirmed)
}
