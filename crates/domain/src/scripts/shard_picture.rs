//! `lua/shard_picture.lua`: a slot learns how many units each shard of its event held at the
//! drain's last read.

use super::ScriptError;
use super::shard_picture_contract::{Args, Keys, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// Tells shard slot `k` the units each shard held (`stocks[s]` in shard `s`).
pub fn run(store: &impl Store, k: &ShardKeys, stocks: &[u64]) -> Result<(), ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        units: stocks.iter().map(u64::to_string).collect(),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
