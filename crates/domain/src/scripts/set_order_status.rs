//! `lua/set_order_status.lua`: mirrors final order states (`paid`, `expired`) in Redis; an
//! expired order's unit goes back to its shard exactly once. Final states are never replaced.

use super::ScriptError;
use super::set_order_status_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::{OrderStatus, ShardKeys};
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
    /// The status it sets.
    pub fn status(self) -> OrderStatus {
        match self {
            Final::Paid => OrderStatus::Paid,
            Final::Expired => OrderStatus::Expired,
        }
    }
}

/// Runs it for `orders`; returns how many units went back to their shards.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    status: Final,
    orders: &[String],
) -> Result<u64, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        status: status.status().as_str().to_owned(),
        order_ids: orders.to_vec(),
    };
    let mut r = call_ok(store, keys, args)?;
    Ok(OkReply::read(&mut r)?.released)
}
