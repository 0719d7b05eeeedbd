//! `lua/list_events.lua`: the registry of events, for the scheduled jobs and the operators'
//! list (read-only).

use super::ScriptError;
use super::list_events_contract::{Args, Keys, call_ok};
use crate::keys::Registry;
use crate::store::Store;

/// Runs it: every registered event id, as stored (the caller validates them), and whether it
/// is archived.
pub fn run(store: &impl Store) -> Result<Vec<(String, bool)>, ScriptError> {
    let keys = Keys::at(&Registry);
    let mut r = call_ok(store, keys, Args {})?;
    let mut events = Vec::new();
    while r.has_more() {
        events.push((r.next_text()?, r.next_flag()?));
    }
    Ok(events)
}
