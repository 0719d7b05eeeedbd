//! `lua/reconcile_orders.lua`: one page of an event's orders with their Redis status (HSCAN:
//! a large event never blocks Redis).

use super::{RECONCILE_ORDERS, ScriptError, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// One page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Where the next page starts; `"0"` when the walk is over.
    pub cursor: String,
    /// (order id, status) pairs; an order may repeat across pages, none is skipped.
    pub orders: Vec<(String, String)>,
}

/// Runs it from `cursor` (`"0"` to start), about `count` orders per page.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    cursor: &str,
    count: u32,
) -> Result<Page, ScriptError> {
    let mut r = call_ok(
        store,
        &RECONCILE_ORDERS,
        &[k.bought(), k.orders()],
        &[cursor.to_owned(), count.to_string()],
    )?;
    let cursor = r.next_text()?;
    let mut orders = Vec::new();
    for _ in 0..r.next_u64()? {
        orders.push((r.next_text()?, r.next_text()?));
    }
    r.finish()?;
    Ok(Page { cursor, orders })
}
