//! `lua/drain_release.lua`: gives the drain lease back, if it is still ours.

use super::{DRAIN_RELEASE, ScriptError, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Runs it with the lease value `owner|fence`; returns whether the lease was still ours.
pub fn run(store: &impl Store, k: &EventKeys, lease: &str) -> Result<bool, ScriptError> {
    let mut r = call_ok(
        store,
        &DRAIN_RELEASE,
        &[k.drain_lease()],
        &[lease.to_owned()],
    )?;
    let released = r.next_int()? == 1;
    r.finish()?;
    Ok(released)
}
