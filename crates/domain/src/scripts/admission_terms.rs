//! `lua/admission_terms.lua`: the difficulty an admission challenge asks now, read at the
//! user's home shard.

use super::ScriptError;
use super::admission_terms_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::Slot;
use crate::store::Store;

/// Runs it; returns the event's proof-of-work difficulty.
pub fn run(store: &impl Store, k: &impl Slot, home_hash: u64) -> Result<u32, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        home_hash: home_hash.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    Ok(OkReply::read(&mut r)?.difficulty)
}
