//! `lua/shard_picture.lua`: a slot learns which shards of its event held stock at the drain's
//! last read.

use super::ScriptError;
use super::shard_picture_contract::{Args, Keys, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Tells shard slot `k` which shards held stock (`stocks[s]` units in shard `s`).
pub fn run(store: &impl Store, k: &EventKeys, stocks: &[u64]) -> Result<(), ScriptError> {
    let keys = Keys { empty: k.empty() };
    let args = Args {
        picture: stocks
            .iter()
            .map(|&units| if units > 0 { '1' } else { '0' })
            .collect(),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
