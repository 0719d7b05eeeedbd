//! Who changed what: `audit`, and the config center's `versions` and `rollback`.

use serde_json::json;

use super::Output;
use super::{event_path, show};
use crate::api::{Api, Failure};
use crate::render;

/// `audit`: the latest operators' writes, of one event or all.
pub fn audit(cli: Output, api: &Api, event: Option<&str>, limit: u32) -> Result<(), Failure> {
    let mut path = format!("/admin/audit?limit={limit}");
    if let Some(e) = event {
        path = format!("{path}&event={e}");
    }
    let records = api.get(&path)?;
    show(cli, &records, |v| {
        render::audit(v, api.server_now_ms().ok())
    });
    Ok(())
}

/// `versions`: an event's configuration versions.
pub fn versions(cli: Output, api: &Api, event: &str, limit: u32) -> Result<(), Failure> {
    let listed = api.get(&format!("{}/versions?limit={limit}", event_path(event)))?;
    show(cli, &listed, |v| {
        render::versions(v, api.server_now_ms().ok())
    });
    Ok(())
}

/// `rollback`: applies an earlier version again.
pub fn rollback(cli: Output, api: &Api, event: &str, version: i64) -> Result<(), Failure> {
    let body = json!({ "version": version });
    let done = api.send(
        "POST",
        &format!("{}/rollback", event_path(event)),
        Some(&body),
    )?;
    show(cli, &done, |_| {
        format!("rolled {event} back to version {version}")
    });
    Ok(())
}
