//! `lua/shard_refilled.lua`: a slot learns that shard `shard` has stock again.

use super::ScriptError;
use super::shard_refilled_contract::{Args, Keys, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// Tells shard slot `k` that `shard` has stock again.
pub fn run(store: &impl Store, k: &ShardKeys, shard: u32) -> Result<(), ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        shard: shard.to_string(),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
