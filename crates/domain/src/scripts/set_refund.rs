//! `lua/set_refund.lua`: tells poll what is paid back to an order's buyer.

use super::ScriptError;
use super::set_refund_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::{RefundState, ShardKeys};
use crate::store::Store;

/// Records `state` for `payments` payments of `order` in shard slot `k`; false when the slot
/// holds no such order.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    order: &str,
    state: RefundState,
    payments: u64,
) -> Result<bool, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        order_id: order.to_owned(),
        state: state.as_str().to_owned(),
        payments: payments.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    Ok(OkReply::read(&mut r)?.told)
}
