//! `lua/shard_settle.lua`: a lender forgets transfers whose credit is confirmed.

use super::ScriptError;
use super::shard_settle_contract::{Args, Keys, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Forgets `transfer_ids` at shard slot `k`.
pub fn run(store: &impl Store, k: &EventKeys, transfer_ids: &[String]) -> Result<(), ScriptError> {
    let keys = Keys { lent: k.lent() };
    let args = Args {
        transfer_ids: transfer_ids.to_vec(),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
