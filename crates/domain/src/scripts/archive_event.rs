//! `lua/archive_event.lua`: archives a registered event, or brings it back.

use super::ScriptError;
use super::archive_event_contract::{Args, Keys, OkReply, call_ok};
use crate::event::EventId;
use crate::keys::Registry;
use crate::store::Store;

/// Runs it: returns whether the event was archived before.
pub fn run(store: &impl Store, event: &EventId, archived: bool) -> Result<bool, ScriptError> {
    let keys = Keys::at(&Registry);
    let args = Args {
        event: event.as_str().to_owned(),
        archived: if archived { "1" } else { "0" }.to_owned(),
    };
    let mut r = call_ok(store, keys, args)?;
    Ok(OkReply::read(&mut r)?.was)
}
