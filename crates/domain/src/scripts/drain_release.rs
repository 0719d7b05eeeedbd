//! `lua/drain_release.lua`: gives the drain lease back, if it is still ours.

use super::ScriptError;
use super::drain_claim::Holder;
use super::drain_release_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// Runs it for the lease's `holder`; returns whether the lease was still theirs.
pub fn run(store: &impl Store, k: &ShardKeys, holder: Holder<'_>) -> Result<bool, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        owner: holder.owner.to_owned(),
        fence: holder.fence.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    Ok(OkReply::read(&mut r)?.released)
}
