//! `payments`.

use super::Output;
use super::show;
use crate::api::{Api, Failure};
use crate::render;

/// `payments [--refunds]`: an empty status filter lists them all.
pub fn list(cli: Output, api: &Api, event: &str, refunds: bool, limit: u32) -> Result<(), Failure> {
    let status = if refunds { "refund_due" } else { "" };
    let path = format!("/admin/events/{event}/payments?status={status}&limit={limit}");
    let listed = api.get(&path)?;
    show(cli, &listed, render::payments);
    Ok(())
}
