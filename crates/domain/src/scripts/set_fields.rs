//! `lua/set_fields.lua`: changes fields of an existing event, live (switches and limits); an
//! `end_ms` not after the event's start is a conflict.

use super::ScriptError;
use super::set_fields_contract::{Args, Keys, call_ok};
use crate::keys::Slot;
use crate::store::Store;

/// Runs it with the fields to change.
pub fn run(
    store: &impl Store,
    k: &impl Slot,
    fields: Vec<(&'static str, String)>,
) -> Result<(), ScriptError> {
    let args = Args {
        fields: super::flat_pairs(fields),
    };
    call_ok(store, Keys::at(k), args)?.finish()?;
    Ok(())
}
