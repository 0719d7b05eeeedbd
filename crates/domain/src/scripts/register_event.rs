//! `lua/register_event.lua`: adds an event to the registry the scheduled jobs walk.

use super::{REGISTER_EVENT, ScriptError, call_ok};
use crate::event::EventId;
use crate::keys::REGISTRY;
use crate::store::Store;

/// Runs it.
pub fn run(store: &impl Store, event: &EventId) -> Result<(), ScriptError> {
    call_ok(
        store,
        &REGISTER_EVENT,
        &[REGISTRY.to_owned()],
        &[event.as_str().to_owned()],
    )?
    .finish()?;
    Ok(())
}
