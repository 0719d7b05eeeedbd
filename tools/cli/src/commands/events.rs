//! `events`, `archive` and `unarchive`.

use super::Output;
use super::{event_path, show};
use crate::api::{Api, Failure};
use crate::render;

/// `events [--archived]`: the server lists them all; the archived flag picks one side.
pub fn list(cli: Output, api: &Api, archived: bool) -> Result<(), Failure> {
    let mut list = api.get("/admin/events")?;
    if let Some(events) = list["events"].as_array_mut() {
        events.retain(|e| e["archived"].as_bool().unwrap_or(false) == archived);
    }
    show(cli, &list, |v| render::events(v, api.server_now_ms().ok()));
    Ok(())
}

/// `archive` (`archived` true) and `unarchive`.
pub fn set_archived(cli: Output, api: &Api, event: &str, archived: bool) -> Result<(), Failure> {
    let method = if archived { "POST" } else { "DELETE" };
    let done = api.send(method, &format!("{}/archive", event_path(event)), None)?;
    show(cli, &done, |_| {
        let verb = if archived { "archived" } else { "unarchived" };
        format!("{verb} {event}")
    });
    Ok(())
}
