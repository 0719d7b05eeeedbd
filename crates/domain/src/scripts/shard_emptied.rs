//! `lua/shard_emptied.lua`: a slot learns that shard `shard` just sold its last unit.

use super::ScriptError;
use super::shard_emptied_contract::{Args, Keys, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// Tells shard slot `k` that `shard` is empty.
pub fn run(store: &impl Store, k: &ShardKeys, shard: u32) -> Result<(), ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        shard: shard.to_string(),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
