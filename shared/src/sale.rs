//! The sale path, one operation per public function: issue-token, precheck, buy, poll. Each is
//! one script run (one Redis round trip); the function crates only parse and render.

use serde::Serialize;

use crate::ApiError;
use crate::auth;
use crate::event::EventId;
use crate::ids;
use crate::keys::EventKeys;
use crate::scripts::{self, code};
use crate::store::{Replies, Store, StoreError};

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        if e.transient {
            ApiError::unavailable("the sale is busy; try again").with_detail(e)
        } else {
            ApiError::internal(e)
        }
    }
}

/// Turns a script's refusal into the error the client sees.
pub fn refusal(r: &Replies) -> ApiError {
    let c = r.code().unwrap_or(-1);
    match c {
        code::NOT_FOUND => ApiError::new(404, "event_not_found", "no such event"),
        code::PAUSED => ApiError::new(
            503,
            "sale_paused",
            "the sale is paused or not warmed up yet",
        )
        .retry_after_ms(5_000),
        code::TOO_EARLY => {
            let wait = r.int(1).unwrap_or(0).max(0) as u64;
            ApiError::new(425, "too_early", format!("the sale starts in {wait} ms"))
                .retry_after_ms(wait)
        }
        code::ENDED => ApiError::new(410, "sale_ended", "the sale has ended"),
        code::SOLD_OUT => ApiError::new(410, "sold_out", "sold out"),
        code::BAD_TOKEN => ApiError::new(
            403,
            "bad_purchase_token",
            "purchase token missing, used, expired or not yours: run precheck again",
        ),
        code::ALREADY => ApiError::new(
            409,
            "already_bought",
            format!("you already have order {}", r.text(1).unwrap_or_default()),
        ),
        code::LIMITED => {
            ApiError::new(429, "rate_limited", "too many requests; slow down").retry_after_ms(1_000)
        }
        code::DENIED => ApiError::new(403, "denied", "not allowed to take part in this sale"),
        code::ADMISSION_CLOSED => ApiError::new(
            410,
            "admission_closed",
            "all admission tokens are handed out",
        ),
        code::NOT_SELECTED => ApiError::new(403, "not_selected", "not drawn in the lottery"),
        code::CONFLICT => ApiError::new(409, "conflict", "conflicts with the event's state"),
        _ => ApiError::internal(format!("unexpected script reply {r:?}")),
    }
}

/// The reply when its code is OK, else the refusal it stands for.
pub(crate) fn ok_or_refusal(r: Replies) -> Result<Replies, ApiError> {
    if r.code()? == code::OK {
        Ok(r)
    } else {
        Err(refusal(&r))
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
) -> Result<Admission, ApiError> {
    let k = EventKeys::new(event);
    let r = store.run(
        &scripts::ISSUE_TOKEN,
        &[k.cfg(), k.admitted(), k.registrants()],
        &[k.prefix().to_owned(), user.to_owned()],
    )?;
    match r.code()? {
        code::OK => Ok(Admission::Admitted {
            admission_token: auth::admission_token(admission_secret, event.as_str(), user),
        }),
        code::REGISTERED => Ok(Admission::Registered),
        _ => Err(refusal(&r)),
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
) -> Result<PurchaseToken, ApiError> {
    auth::verify_admission(admission_secret, event.as_str(), user, admission_token)?;
    let k = EventKeys::new(event);
    let token = ids::new_purchase_token();
    let r = ok_or_refusal(store.run(
        &scripts::PRECHECK,
        &[
            k.cfg(),
            k.denied_users(),
            k.denied_addrs(),
            k.bought(),
            k.purchase_token(user),
            k.user_bucket(user),
        ],
        &[
            k.prefix().to_owned(),
            user.to_owned(),
            client_addr.to_owned(),
            token.clone(),
        ],
    )?)?;
    Ok(PurchaseToken {
        purchase_token: token,
        expires_in_ms: r.int(1)? as u64,
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

/// The keys `lua/buy.lua` takes, in its order (the raw-Redis benchmark sends them too).
pub fn buy_keys(k: &EventKeys, user: &str) -> [String; 8] {
    [
        k.cfg(),
        k.purchase_token(user),
        k.bought(),
        k.nonempty(),
        k.queue(),
        k.seq(),
        k.buy_bucket(),
        k.drained(),
    ]
}

/// buy: one script does it all (see `lua/buy.lua`).
pub fn buy(
    store: &impl Store,
    event: &EventId,
    user: &str,
    purchase_token: &str,
    now_ms: u64,
) -> Result<Accepted, ApiError> {
    let k = EventKeys::new(event);
    let order_id = ids::new_order_id(now_ms);
    let home_hash = ids::home_hash(event.as_str(), user);
    let r = ok_or_refusal(store.run(
        &scripts::BUY,
        &buy_keys(&k, user),
        &[
            k.prefix().to_owned(),
            user.to_owned(),
            purchase_token.to_owned(),
            home_hash.to_string(),
            order_id.clone(),
        ],
    )?)?;
    let (seq, drained) = (r.int(1)? as u64, r.int(3)? as u64);
    Ok(Accepted {
        order_id,
        status: "queued",
        position: seq.saturating_sub(drained).max(1),
        shard: r.int(2)? as u32,
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

/// poll: the user's result, from Redis only.
pub fn poll(store: &impl Store, event: &EventId, user: &str) -> Result<PollResult, ApiError> {
    let k = EventKeys::new(event);
    let r = store.run(
        &scripts::POLL,
        &[k.cfg(), k.bought(), k.drained()],
        &[k.prefix().to_owned(), user.to_owned()],
    )?;
    match r.code()? {
        code::OK => {
            let order_id = r.text(1)?;
            let state = r.text(2)?;
            if state != "queued" {
                return Ok(PollResult::Order { order_id, state });
            }
            let (seq, drained, rate) =
                (r.int(3)? as u64, r.int(4)? as u64, r.int(5)?.max(1) as u64);
            let position = seq.saturating_sub(drained).max(1);
            Ok(PollResult::Queued {
                order_id,
                position,
                estimated_wait_ms: position * 1000 / rate,
            })
        }
        code::NONE if r.int(1)? == 1 => Ok(PollResult::SoldOut),
        code::NONE => Ok(PollResult::None),
        _ => Err(refusal(&r)),
    }
}
