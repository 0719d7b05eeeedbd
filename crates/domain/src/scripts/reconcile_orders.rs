//! `lua/reconcile_orders.lua`: one page of an event's orders with their Redis status (HSCAN:
//! a large event never blocks Redis).

use super::ScriptError;
use super::reconcile_orders_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::{OrderStatus, ShardKeys};
use crate::store::Store;

/// One page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Where the next page starts; `"0"` when the walk is over.
    pub cursor: String,
    /// (order id, status) pairs; an order may repeat across pages, none is skipped.
    pub orders: Vec<(String, OrderStatus)>,
}

/// Runs it from `cursor` (`"0"` to start), about `count` orders per page.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    cursor: &str,
    count: u32,
) -> Result<Page, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        cursor: cursor.to_owned(),
        page: count.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    let head = OkReply::read(&mut r)?;
    let mut orders = Vec::new();
    for _ in 0..head.count {
        orders.push((r.next_text()?, r.next_order_status()?));
    }
    r.finish()?;
    Ok(Page {
        cursor: head.cursor,
        orders,
    })
}
