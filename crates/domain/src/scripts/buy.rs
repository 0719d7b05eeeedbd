//! `lua/buy.lua`: the whole purchase in one atomic step — window, one per user, token, the
//! event's bucket, a unit from the home shard (or one that still has stock), the order recorded
//! and queued, the token spent.

use super::ScriptError;
use super::buy_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// An accepted buy, as the script reports it: the order's place in the sale (1 for the first
/// order), the shard the unit came from, and the orders drained into Postgres so far.
pub type Bought = OkReply;

/// The keys of `user`'s buy (the raw-Redis benchmark sends them too).
pub fn keys(k: &EventKeys, user: &str) -> Keys {
    Keys {
        cfg: k.cfg(),
        purchase_token: k.purchase_token(user),
        bought: k.bought(),
        nonempty: k.nonempty(),
        queue: k.queue(),
        seq: k.seq(),
        buy_bucket: k.buy_bucket(),
        drained: k.drained(),
        stock: k.stock(),
        orders: k.orders(),
        counts: k.counts(),
    }
}

/// The arguments: `order_id` is the new order's id, `home_hash` picks the home shard.
pub fn args(user: &str, purchase_token: &str, home_hash: u64, order_id: &str) -> Args {
    Args {
        user: user.to_owned(),
        purchase_token: purchase_token.to_owned(),
        home_hash: home_hash.to_string(),
        order_id: order_id.to_owned(),
    }
}

/// Runs it.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    user: &str,
    purchase_token: &str,
    home_hash: u64,
    order_id: &str,
) -> Result<Bought, ScriptError> {
    let args = args(user, purchase_token, home_hash, order_id);
    let mut r = call_ok(store, keys(k, user), args)?;
    Ok(OkReply::read(&mut r)?)
}
