//! `lua/register_event.lua`: adds an event to the registry the scheduled jobs walk.

use super::ScriptError;
use super::register_event_contract::{Args, Keys, call_ok};
use crate::event::EventId;
use crate::keys::Registry;
use crate::store::Store;

/// Runs it.
pub fn run(store: &impl Store, event: &EventId) -> Result<(), ScriptError> {
    let keys = Keys::at(&Registry);
    let args = Args {
        event: event.as_str().to_owned(),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
