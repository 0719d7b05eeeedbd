//! The registry of events each Redis node keeps (`crates/domain/lua/register_event.lua` adds to it),
//! which the scheduled jobs and the operators' event list walk, and the operators' archive
//! beside it: an ended event archived leaves the console's default list, nothing else.

use serde::Serialize;

use crate::error::{Error, ErrorCode};
use crate::event::EventId;
use crate::nodes::Nodes;
use crate::scripts;
use crate::scripts::event_info::EventInfo;
use crate::store::Store;

/// The events registered on one Redis node.
pub fn events(store: &impl Store) -> Result<Vec<EventId>, Error> {
    Ok(registered(store)?.into_iter().map(|(id, _)| id).collect())
}

/// The events registered on one Redis node, each with whether it is archived.
pub fn registered(store: &impl Store) -> Result<Vec<(EventId, bool)>, Error> {
    scripts::list_events::run(store)?
        .into_iter()
        .map(|(id, archived)| Ok((EventId::parse(&id)?, archived)))
        .collect()
}

/// An event as the operators' list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listed {
    /// The event.
    pub event_id: String,
    /// An operator archived it.
    pub archived: bool,
    /// What is on sale, and when: `None` while its configuration is missing (a creation cut
    /// short).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
    /// Sale start, server time in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_ms: Option<u64>,
    /// Sale end, server time in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
}

/// Every event of every node, sorted by id, each with its archive flag and its window.
pub fn list<S: Store>(nodes: &Nodes<S>) -> Result<Vec<Listed>, Error> {
    let mut listed: Vec<Listed> = every_event(nodes)?
        .into_iter()
        .map(|(event, archived, info)| Listed {
            event_id: event.as_str().to_owned(),
            archived,
            sku: info.as_ref().map(|i| i.sku.clone()),
            start_ms: info.as_ref().map(|i| i.start_ms),
            end_ms: info.map(|i| i.end_ms),
        })
        .collect();
    listed.sort_by(|a, b| a.event_id.cmp(&b.event_id));
    Ok(listed)
}

/// The sales anyone may go to: every event not archived and not ended at `now_ms`, with what
/// its storefront shows; one whose configuration is missing (a creation cut short) left out.
pub fn open_sales<S: Store>(
    nodes: &Nodes<S>,
    now_ms: u64,
) -> Result<Vec<(EventId, EventInfo)>, Error> {
    Ok(every_event(nodes)?
        .into_iter()
        .filter(|(_, archived, _)| !archived)
        .filter_map(|(event, _, info)| Some((event, info?)))
        .filter(|(_, info)| info.end_ms > now_ms)
        .collect())
}

/// Every registered event of every node, with its archive flag and its public info (one
/// `list_events` per node, then one `event_info` per event, on its own slot).
fn every_event<S: Store>(
    nodes: &Nodes<S>,
) -> Result<Vec<(EventId, bool, Option<EventInfo>)>, Error> {
    let mut all = Vec::new();
    for node in nodes.all() {
        for (event, archived) in registered(node?)? {
            let info = info(nodes, &event)?;
            all.push((event, archived, info));
        }
    }
    Ok(all)
}

/// The event's public info, `None` when it has no configuration.
fn info<S: Store>(nodes: &Nodes<S>, event: &EventId) -> Result<Option<EventInfo>, Error> {
    match crate::sale::event_info(nodes, event) {
        Ok(info) => Ok(Some(info)),
        Err(e) if e.code() == ErrorCode::EventNotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Archives an ended event (`archived`), or brings one back; returns whether it was archived
/// before. Archiving a sale that has not ended is `409 conflict`: it would vanish from the
/// list the operators watch it in.
pub fn set_archived<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    archived: bool,
    now_ms: u64,
) -> Result<bool, Error> {
    let info = crate::sale::event_info(nodes, event)?;
    if archived && now_ms < info.end_ms {
        return Err(Error::refused(
            ErrorCode::Conflict,
            "only an ended sale is archived: move its end first",
        ));
    }
    Ok(scripts::archive_event::run(
        nodes.for_event(event)?,
        event,
        archived,
    )?)
}
