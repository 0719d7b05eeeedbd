//! `lua/list_events.lua`: the registry of events, for the scheduled jobs (read-only).

use super::{LIST_EVENTS, ScriptError, call_ok};
use crate::keys::REGISTRY;
use crate::store::Store;

/// Runs it: every registered event id, as stored (the caller validates them).
pub fn run(store: &impl Store) -> Result<Vec<String>, ScriptError> {
    let mut r = call_ok(store, &LIST_EVENTS, &[REGISTRY.to_owned()], &[])?;
    let mut ids = Vec::new();
    while r.has_more() {
        ids.push(r.next_text()?);
    }
    Ok(ids)
}
