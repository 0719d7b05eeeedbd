//! The sale path, one operation per public function: issue-token, precheck, buy, poll. Each is
//! one script run (one Redis round trip); the function crates only parse and render.

use serde::Serialize;

use crate::auth;
use crate::error::{Dependency, Error, ErrorCode};
use crate::event::EventId;
use crate::ids;
use crate::keys::EventKeys;
use crate::scripts::{self, Refusal, ScriptError};
use crate::store::{Store, StoreError};

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        if e.is_transient() {
            Error::unavailable(Dependency::Redis, "the sale is busy; try again", e)
        } else {
            Error::bug(e)
        }
    }
}

/// A script's refusal in the domain's words (the edge gives each code its HTTP status).
impl From<Refusal> for Error {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::NotFound => Error::refused(ErrorCode::EventNotFound, "no such event"),
            Refusal::Paused => Error::refused_for(
                ErrorCode::SalePaused,
                "the sale is paused or not warmed up yet",
                5_000,
            ),
            Refusal::TooEarly { wait_ms } => Error::refused_for(
                ErrorCode::TooEarly,
                format!("the sale starts in {wait_ms} ms"),
                wait_ms,
            ),
            Refusal::Ended => Error::refused(ErrorCode::SaleEnded, "the sale has ended"),
            Refusal::SoldOut => Error::refused(ErrorCode::SoldOut, "sold out"),
            Refusal::BadToken => Error::refused(
                ErrorCode::BadPurchaseToken,
                "purchase token missing, used, expired or not yours: run precheck again",
            ),
            Refusal::Already { order_id } => Error::refused(
                ErrorCode::AlreadyBought,
                format!("you already have order {order_id}"),
            ),
            Refusal::Limited => Error::refused_for(
                ErrorCode::RateLimited,
                "too many requests; slow down",
                1_000,
            ),
            Refusal::Denied => {
                Error::refused(ErrorCode::Denied, "not allowed to take part in this sale")
            }
            Refusal::AdmissionClosed => Error::refused(
                ErrorCode::AdmissionClosed,
                "all admission tokens are handed out",
            ),
            Refusal::NotSelected => {
                Error::refused(ErrorCode::NotSelected, "not drawn in the lottery")
            }
            Refusal::Conflict => {
                Error::refused(ErrorCode::Conflict, "conflicts with the event's state")
            }
            // The sharded calls find the home again; one that reaches the edge is a bug.
            Refusal::WrongShard { shards } => Error::bug(format!(
                "a request reached a shard that is not its home (the event has {shards} shards)"
            )),
        }
    }
}

impl From<ScriptError> for Error {
    fn from(e: ScriptError) -> Self {
        match e {
            ScriptError::Store(e) => e.into(),
            ScriptError::Refused(r) => r.into(),
        }
    }
}

/// The outcome of issue-token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Admission {
    /// Holder of an admission token.
    Admitted {
        /// Present it to precheck.
        admission_token: String,
    },
    /// Registered for the lottery; ask again after the draw.
    Registered,
}

/// issue-token: admits `user` to `event` (first come, or registers for the lottery).
pub fn issue_token(
    store: &impl Store,
    event: &EventId,
    user: &str,
    admission_secret: &[u8],
) -> Result<Admission, Error> {
    match scripts::issue_token::run(
        store,
        &EventKeys::new(event),
        user,
        ids::home_hash(event.as_str(), user),
    )? {
        scripts::issue_token::Issued::Admitted => Ok(Admission::Admitted {
            admission_token: auth::admission_token(admission_secret, event.as_str(), user),
        }),
        scripts::issue_token::Issued::Registered => Ok(Admission::Registered),
    }
}

/// A one-time purchase token from precheck.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PurchaseToken {
    /// Present it to buy, once.
    pub purchase_token: String,
    /// Lifetime.
    pub expires_in_ms: u64,
}

/// precheck: admission token (checked here, no Redis), then in one script: sale window,
/// deny lists, one-per-user, per-user rate limit; hands out a purchase token.
pub fn precheck(
    store: &impl Store,
    event: &EventId,
    user: &str,
    client_addr: &str,
    admission_token: &str,
    admission_secret: &[u8],
) -> Result<PurchaseToken, Error> {
    auth::verify_admission(admission_secret, event.as_str(), user, admission_token)?;
    let token = ids::new_purchase_token();
    let expires_in_ms = scripts::precheck::run(
        store,
        &EventKeys::new(event),
        user,
        client_addr,
        &token,
        ids::home_hash(event.as_str(), user),
    )?;
    Ok(PurchaseToken {
        purchase_token: token,
        expires_in_ms,
    })
}

/// An accepted buy: the unit is reserved and the order intent is queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Accepted {
    /// The order.
    pub order_id: String,
    /// Always `queued` here; poll follows it.
    pub status: &'static str,
    /// Orders ahead of this one still to drain into Postgres, this one included (as poll says).
    pub position: u64,
    /// The stock shard the unit came from.
    pub shard: u32,
}

/// The place in the drain's queue of the order with sequence number `seq` when `drained`
/// orders have reached Postgres: the orders ahead of it still to drain, itself included (at
/// least 1 while it is queued; orders drain in about `seq` order).
pub fn queue_position(seq: u64, drained: u64) -> u64 {
    seq.saturating_sub(drained).max(1)
}

/// buy: one script does it all (see `shared/lua/buy.lua`).
pub fn buy(
    store: &impl Store,
    event: &EventId,
    user: &str,
    purchase_token: &str,
    now_ms: u64,
) -> Result<Accepted, Error> {
    let order_id = ids::new_order_id(now_ms);
    let home_hash = ids::home_hash(event.as_str(), user);
    let bought = scripts::buy::run(
        store,
        &EventKeys::new(event),
        user,
        purchase_token,
        home_hash,
        &order_id,
    )?;
    Ok(Accepted {
        order_id,
        status: "queued",
        position: queue_position(bought.seq, bought.drained),
        shard: bought.shard,
    })
}

/// What poll reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PollResult {
    /// Accepted, waiting for the drain into Postgres.
    Queued {
        /// The order.
        order_id: String,
        /// Orders ahead of this one still to drain, this one included.
        position: u64,
        /// Estimated time until it is confirmed.
        estimated_wait_ms: u64,
    },
    /// In Postgres, or further along (paid, expired…): the order's status as stored.
    Order {
        /// The order.
        order_id: String,
        /// `confirmed`, `paid`, `expired`, …
        state: String,
    },
    /// No order, and nothing left to buy.
    SoldOut,
    /// No order (yet).
    None,
}

/// What a poll found, and whether it was elected to drain.
#[derive(Debug, Clone)]
pub struct Polled {
    /// The answer for the buyer.
    pub result: PollResult,
    /// This poll should drain the event once it has answered ([`crate::orders::catch_up`]):
    /// its order is still queued and no other poll was elected in the last `poll_drain_ms`.
    pub drain_due: bool,
}

/// poll: the user's result, from Redis only. Where no scheduler drains every second, the
/// buyers waiting in the queue carry the drain: `poll_drain_ms > 0` elects at most one of
/// their polls per event every `poll_drain_ms` to drain after answering.
pub fn poll(
    store: &impl Store,
    event: &EventId,
    user: &str,
    poll_drain_ms: u64,
) -> Result<Polled, Error> {
    let state = scripts::poll::run(
        store,
        &EventKeys::new(event),
        user,
        poll_drain_ms,
        ids::home_hash(event.as_str(), user),
    )?;
    Ok(polled(state))
}

/// What the buyer is told of a poll script's answer.
pub(crate) fn polled(state: scripts::poll::OrderState) -> Polled {
    use scripts::poll::OrderState;
    match state {
        OrderState::Order(o) if o.status != "queued" => Polled {
            result: PollResult::Order {
                order_id: o.order_id,
                state: o.status,
            },
            drain_due: false,
        },
        OrderState::Order(o) => {
            let position = queue_position(o.seq, o.drained);
            Polled {
                result: PollResult::Queued {
                    order_id: o.order_id,
                    position,
                    estimated_wait_ms: position * 1000 / o.drain_rate.max(1),
                },
                drain_due: o.drain_due,
            }
        }
        OrderState::NoOrder { sold_out } => Polled {
            result: if sold_out {
                PollResult::SoldOut
            } else {
                PollResult::None
            },
            drain_due: false,
        },
    }
}

/// What the storefront shows of an event (the window for its countdown, units left).
pub use crate::scripts::event_info::EventInfo;

/// The storefront's event view: one cheap read-only script, safe to serve on every page load.
pub fn event_info(store: &impl Store, event: &EventId) -> Result<EventInfo, Error> {
    Ok(scripts::event_info::run(store, &EventKeys::new(event))?)
}

#[cfg(test)]
mod tests;
