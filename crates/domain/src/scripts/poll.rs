//! `lua/poll.lua`: a user's result, from Redis only; and, at most once per `poll_drain_ms`, whether
//! this poll is elected to drain the event (see [`crate::sale::poll`]).

use super::poll_contract::{Args, Keys, OkReply, call};
use super::{ScriptError, code};
use crate::keys::ShardKeys;
use crate::store::Store;

/// What Redis knows of a user's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderState {
    /// The user has an order: its id, status,
    /// place in the sale, the orders drained so far, the operator's expected drain rate
    /// (orders/s; 0 when unset), and whether this poll is elected to drain the event.
    Order(OkReply),
    /// No order.
    NoOrder {
        /// And nothing left to buy.
        sold_out: bool,
    },
}

/// Runs it for `user`; `poll_drain_ms` spaces the poll-carried drains (0: never elect).
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    user: &str,
    poll_drain_ms: u64,
    home_hash: u64,
) -> Result<OrderState, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        user: user.to_owned(),
        poll_drain_ms: poll_drain_ms.to_string(),
        home_hash: home_hash.to_string(),
    };
    let (c, mut r) = call(store, keys, args)?;
    match c {
        code::OK => Ok(OrderState::Order(OkReply::read(&mut r)?)),
        code::NONE => {
            let sold_out = r.next_flag()?;
            r.finish()?;
            Ok(OrderState::NoOrder { sold_out })
        }
        c => Err(ScriptError::Refused(r.refusal(c)?)),
    }
}
