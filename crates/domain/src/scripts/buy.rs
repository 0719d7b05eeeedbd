//! `lua/buy.lua`: the whole purchase in one atomic step — window, one per user, token, the
//! event's bucket, a unit from the home shard (or one that still has stock), the order recorded
//! and queued, the token spent.

use super::{BUY, ScriptError, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// An accepted buy, as the script reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bought {
    /// The order's place in the sale (1 for the first order).
    pub seq: u64,
    /// The shard the unit came from.
    pub shard: u32,
    /// Orders drained into Postgres so far.
    pub drained: u64,
}

/// The keys, in the script's order (the raw-Redis benchmark sends them too).
pub fn keys(k: &EventKeys, user: &str) -> Vec<String> {
    vec![
        k.cfg(),
        k.purchase_token(user),
        k.bought(),
        k.nonempty(),
        k.queue(),
        k.seq(),
        k.buy_bucket(),
        k.drained(),
        k.stock(),
        k.orders(),
        k.counts(),
    ]
}

/// The arguments, in the script's order.
pub fn args(user: &str, purchase_token: &str, home_hash: u64, order_id: &str) -> Vec<String> {
    vec![
        user.to_owned(),
        purchase_token.to_owned(),
        home_hash.to_string(),
        order_id.to_owned(),
    ]
}

/// Runs it: `order_id` is the new order's id, `home_hash` picks the home shard.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    user: &str,
    purchase_token: &str,
    home_hash: u64,
    order_id: &str,
) -> Result<Bought, ScriptError> {
    let mut r = call_ok(
        store,
        &BUY,
        &keys(k, user),
        &args(user, purchase_token, home_hash, order_id),
    )?;
    let bought = Bought {
        seq: r.next_u64()?,
        shard: r.next_u64()? as u32,
        drained: r.next_u64()?,
    };
    r.finish()?;
    Ok(bought)
}
