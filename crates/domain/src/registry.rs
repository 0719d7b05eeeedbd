//! The registry of events each Redis node keeps (`shared/lua/register_event.lua` adds to it),
//! which the scheduled jobs and the operators' event list walk.

use crate::error::Error;
use crate::event::EventId;
use crate::scripts;
use crate::store::Store;

/// The events registered on one Redis node.
pub fn events(store: &impl Store) -> Result<Vec<EventId>, Error> {
    scripts::list_events::run(store)?
        .iter()
        .map(|id| EventId::parse(id))
        .collect()
}
