//! `lua/list_events.lua`: the registry of events, for the scheduled jobs (read-only).

use super::ScriptError;
use super::list_events_contract::{Args, Keys, call_ok};
use crate::keys::REGISTRY;
use crate::store::Store;

/// Runs it: every registered event id, as stored (the caller validates them).
pub fn run(store: &impl Store) -> Result<Vec<String>, ScriptError> {
    let keys = Keys {
        registry: REGISTRY.to_owned(),
    };
    let mut r = call_ok(store, keys, Args {})?;
    let mut ids = Vec::new();
    while r.has_more() {
        ids.push(r.next_text()?);
    }
    Ok(ids)
}
