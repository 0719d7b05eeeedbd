//! `lua/poll.lua`: a user's result, from Redis only; and, at most once per `nudge_ms`, whether
//! this poll is elected to drain the event (see [`crate::sale::poll`]).

use super::{POLL, ScriptError, call, code};
use crate::keys::EventKeys;
use crate::store::Store;

/// What Redis knows of a user's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Polled {
    /// The user has an order.
    Order {
        /// Its id.
        order_id: String,
        /// `queued`, `confirmed`, `paid` or `expired`.
        status: String,
        /// Its place in the sale.
        seq: u64,
        /// Orders drained so far.
        drained: u64,
        /// The operator's expected drain rate (orders/s; 0 when unset).
        drain_rate: u64,
        /// This poll is elected to drain the event (its order is still queued).
        drain_due: bool,
    },
    /// No order.
    NoOrder {
        /// And nothing left to buy.
        sold_out: bool,
    },
}

/// Runs it for `user`; `nudge_ms` spaces the poll-carried drains (0: never elect).
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    user: &str,
    nudge_ms: u64,
) -> Result<Polled, ScriptError> {
    let (c, mut r) = call(
        store,
        &POLL,
        &[
            k.cfg(),
            k.bought(),
            k.drained(),
            k.orders(),
            k.drain_nudge(),
        ],
        &[user.to_owned(), nudge_ms.to_string()],
    )?;
    let polled = match c {
        code::OK => Polled::Order {
            order_id: r.next_text()?,
            status: r.next_text()?,
            seq: r.next_u64()?,
            drained: r.next_u64()?,
            drain_rate: r.next_u64()?,
            drain_due: r.next_int()? == 1,
        },
        code::NONE => Polled::NoOrder {
            sold_out: r.next_int()? == 1,
        },
        c => return Err(ScriptError::Refused(r.refusal(c)?)),
    };
    r.finish()?;
    Ok(polled)
}
