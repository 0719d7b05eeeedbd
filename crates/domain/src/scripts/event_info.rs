//! `lua/event_info.lua`: the storefront's view of an event — window, switches, units left — in
//! one cheap read-only call.

use super::ScriptError;
use super::event_info_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::Slot;
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
    /// Stock shards: buyers send it (`?shards=`), so each request goes straight home.
    pub shards: u32,
    /// The price of a unit, in the currency's smallest unit.
    pub unit_amount: u64,
    /// Lowercase ISO 4217.
    pub currency: String,
    /// Admission opens (server time in ms; 0: open).
    pub admission_opens_ms: u64,
    /// The admission's proof of work (leading zero bits).
    pub pow_difficulty: u32,
}

/// Runs it.
pub fn run(store: &impl Store, k: &impl Slot) -> Result<EventInfo, ScriptError> {
    let keys = Keys::at(k);
    let mut r = call_ok(store, keys, Args {})?;
    let ok = OkReply::read(&mut r)?;
    Ok(EventInfo {
        sku: ok.sku,
        stock: ok.stock,
        stock_left: ok.stock_left,
        start_ms: ok.start_ms,
        end_ms: ok.end_ms,
        admission_mode: ok.admission_mode,
        enabled: ok.enabled,
        warmed: ok.warmed,
        sold_out: ok.sold_out,
        shards: ok.shards,
        unit_amount: ok.unit_amount,
        currency: ok.currency,
        admission_opens_ms: ok.admission_opens_ms,
        pow_difficulty: ok.pow_difficulty,
    })
}
