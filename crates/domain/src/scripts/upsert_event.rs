//! `lua/upsert_event.lua`: creates or updates an event's configuration; stock and shards are
//! frozen once warmed up.

use super::{ScriptError, UPSERT_EVENT, call_ok, pairs};
use crate::keys::EventKeys;
use crate::store::Store;

/// Runs it with the configuration's fields; returns whether the event was created.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    fields: Vec<(&'static str, String)>,
) -> Result<bool, ScriptError> {
    let mut r = call_ok(store, &UPSERT_EVENT, &[k.cfg()], &pairs(fields))?;
    let created = r.next_int()? == 1;
    r.finish()?;
    Ok(created)
}
