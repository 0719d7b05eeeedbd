//! `lua/drain_release.lua`: gives the drain lease back, if it is still ours.

use super::ScriptError;
use super::drain_release_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Runs it with the lease value `owner|fence`; returns whether the lease was still ours.
pub fn run(store: &impl Store, k: &EventKeys, lease: &str) -> Result<bool, ScriptError> {
    let keys = Keys {
        lease: k.drain_lease(),
    };
    let args = Args {
        lease: lease.to_owned(),
    };
    let mut r = call_ok(store, keys, args)?;
    Ok(OkReply::read(&mut r)?.released)
}
