//! `lua/health.lua`: the public health summary, shared by every instance for a short window.

use super::ScriptError;
use super::health_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::Registry;
use crate::store::Store;

/// The summary stored by the last full probe, while it is fresh.
pub fn read(store: &impl Store) -> Result<Option<String>, ScriptError> {
    let summary = call(store, "read", "", 0)?;
    Ok(Some(summary).filter(|s| !s.is_empty()))
}

/// Keeps `summary` for `ttl_ms` (at least 1).
pub fn store(store: &impl Store, summary: &str, ttl_ms: u64) -> Result<(), ScriptError> {
    call(store, "store", summary, ttl_ms.max(1)).map(drop)
}

fn call(
    store: &impl Store,
    action: &str,
    summary: &str,
    ttl_ms: u64,
) -> Result<String, ScriptError> {
    let keys = Keys::at(&Registry);
    let args = Args {
        action: action.to_owned(),
        summary: summary.to_owned(),
        ttl_ms: ttl_ms.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    let ok = OkReply::read(&mut r)?;
    r.finish()?;
    Ok(ok.summary)
}
