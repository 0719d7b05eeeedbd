//! `lua/warmup.lua`: writes one shard's units into its slot, once.

use super::ScriptError;
use super::warmup_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::Slot;
use crate::store::Store;

/// The units the shard holds, and whether it was warmed before this call.
pub type Warmed = OkReply;

/// Warms shard slot `k` with `units`.
pub fn run(store: &impl Store, k: &impl Slot, units: u64) -> Result<Warmed, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        units: units.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    let warmed = OkReply::read(&mut r)?;
    r.finish()?;
    Ok(warmed)
}
