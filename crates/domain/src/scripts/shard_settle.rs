//! `lua/shard_settle.lua`: a lender forgets transfers whose credit is confirmed.

use super::ScriptError;
use super::shard_settle_contract::{Args, Keys, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// Forgets `transfer_ids` at shard slot `k`.
pub fn run(store: &impl Store, k: &ShardKeys, transfer_ids: &[String]) -> Result<(), ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        transfer_ids: transfer_ids.to_vec(),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
