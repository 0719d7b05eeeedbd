//! `lua/job_lease.lua`: one run of each job at a time across the fleet.

use super::ScriptError;
use super::job_lease_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::Registry;
use crate::store::Store;

/// Claims `job`'s lease for `owner` for `ttl_ms`: `Ok(())`, or how long (ms) another run still
/// holds it.
pub fn take(
    store: &impl Store,
    job: &str,
    owner: &str,
    ttl_ms: u64,
) -> Result<Result<(), u64>, ScriptError> {
    let ok = call(store, job, "take", owner, ttl_ms)?;
    Ok(if ok.held { Ok(()) } else { Err(ok.wait_ms) })
}

/// Hands back `owner`'s lease of `job`, if it still holds it.
pub fn give(store: &impl Store, job: &str, owner: &str) -> Result<(), ScriptError> {
    call(store, job, "give", owner, 0).map(drop)
}

fn call(
    store: &impl Store,
    job: &str,
    action: &str,
    owner: &str,
    ttl_ms: u64,
) -> Result<OkReply, ScriptError> {
    let keys = Keys::at(&Registry, job);
    let args = Args {
        action: action.to_owned(),
        owner: owner.to_owned(),
        ttl_ms: ttl_ms.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    let ok = OkReply::read(&mut r)?;
    r.finish()?;
    Ok(ok)
}
