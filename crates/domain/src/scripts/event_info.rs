//! `lua/event_info.lua`: the storefront's view of an event — window, switches, units left — in
//! one cheap read-only call.

use super::{EVENT_INFO, ScriptError, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// An event as a buyer may see it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EventInfo {
    /// What is on sale.
    pub sku: String,
    /// Units in the sale.
    pub stock: u64,
    /// Units left across all shards.
    pub stock_left: u64,
    /// Sale start, server time in ms.
    pub start_ms: u64,
    /// Sale end, server time in ms.
    pub end_ms: u64,
    /// `fcfs` or `lottery`.
    pub admission_mode: String,
    /// The operator's switch.
    pub enabled: bool,
    /// Stock written into its shards.
    pub warmed: bool,
    /// Every shard is empty.
    pub sold_out: bool,
}

/// Runs it.
pub fn run(store: &impl Store, k: &EventKeys) -> Result<EventInfo, ScriptError> {
    let mut r = call_ok(store, &EVENT_INFO, &[k.cfg(), k.stock()], &[])?;
    let info = EventInfo {
        sku: r.next_text()?,
        stock: r.next_u64()?,
        start_ms: r.next_u64()?,
        end_ms: r.next_u64()?,
        admission_mode: r.next_text()?,
        enabled: r.next_u64()? == 1,
        warmed: r.next_u64()? == 1,
        sold_out: r.next_u64()? == 1,
        stock_left: r.next_u64()?,
    };
    r.finish()?;
    Ok(info)
}
