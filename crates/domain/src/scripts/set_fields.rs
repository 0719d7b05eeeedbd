//! `lua/set_fields.lua`: changes fields of an existing event, live (switches and limits); an
//! `end_ms` not after the event's start is a conflict.

use super::{SET_FIELDS, ScriptError, call_ok, pairs};
use crate::keys::EventKeys;
use crate::store::Store;

/// Runs it with the fields to change.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    fields: Vec<(&'static str, String)>,
) -> Result<(), ScriptError> {
    call_ok(store, &SET_FIELDS, &[k.cfg()], &pairs(fields))?.finish()?;
    Ok(())
}
