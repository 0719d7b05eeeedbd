//! `lua/set_order_status.lua`: mirrors final order states (`paid`, `expired`) in Redis; an
//! expired order's unit goes back to its shard exactly once. Final states are never replaced.

use super::{SET_ORDER_STATUS, ScriptError, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// A final state Redis mirrors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Final {
    /// Paid.
    Paid,
    /// Expired unpaid: the unit goes back on sale.
    Expired,
}

impl Final {
    /// The status word.
    pub fn as_str(self) -> &'static str {
        match self {
            Final::Paid => "paid",
            Final::Expired => "expired",
        }
    }
}

/// Runs it for `orders`; returns how many units went back to their shards.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    status: Final,
    orders: &[String],
) -> Result<u64, ScriptError> {
    let mut args = vec![status.as_str().to_owned()];
    args.extend(orders.iter().cloned());
    let mut r = call_ok(
        store,
        &SET_ORDER_STATUS,
        &[
            k.cfg(),
            k.nonempty(),
            k.drained(),
            k.stock(),
            k.orders(),
            k.counts(),
        ],
        &args,
    )?;
    let released = r.next_u64()?;
    r.finish()?;
    Ok(released)
}
