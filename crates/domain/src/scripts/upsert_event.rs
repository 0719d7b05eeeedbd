//! `lua/upsert_event.lua`: creates or updates an event's configuration; stock and shards are
//! frozen once warmed up.

use super::ScriptError;
use super::upsert_event_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::Slot;
use crate::store::Store;

/// Runs it with the configuration's fields; returns whether the event was created.
pub fn run(
    store: &impl Store,
    k: &impl Slot,
    fields: Vec<(&'static str, String)>,
) -> Result<bool, ScriptError> {
    let args = Args {
        fields: super::flat_pairs(fields),
    };
    let mut r = call_ok(store, Keys::at(k), args)?;
    Ok(OkReply::read(&mut r)?.created)
}
