//! `lua/shard_seen_empty.lua`: a slot learns that every shard of its event was seen empty.

use super::ScriptError;
use super::shard_seen_empty_contract::{Args, Keys, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Tells shard slot `k` that all `shards` shards were seen empty.
pub fn run(store: &impl Store, k: &EventKeys, shards: u32) -> Result<(), ScriptError> {
    let keys = Keys { empty: k.empty() };
    let args = Args {
        shards: shards.to_string(),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
