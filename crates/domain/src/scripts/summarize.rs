//! `lua/summarize.lua`: the event's own slot learns its shards' units left (for the storefront).

use super::ScriptError;
use super::summarize_contract::{Args, Keys, call_ok};
use crate::keys::Slot;
use crate::store::Store;

/// Writes `units` (per shard, in order) into the event's own slot `k`.
pub fn run(store: &impl Store, k: &impl Slot, units: &[u64]) -> Result<(), ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        units: units.iter().map(u64::to_string).collect(),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
