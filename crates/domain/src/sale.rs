//! The sale path, one operation per public function: issue-token, precheck, buy, poll, each at
//! the buyer's home shard ([`crate::sharded`]): one script run, one Redis round trip (a buy
//! whose home shard is empty takes the tail: three, at most [`MAX_BUY_ROUND_TRIPS`]).
//! `shards` is the caller's count of the event's shards (the `shards` query parameter): a
//! stale one costs one more round trip, never a wrong answer. The function crates only parse
//! and render.

use std::net::IpAddr;

use serde::Serialize;

use crate::auth;
use crate::error::{Dependency, Error};
use crate::event::EventId;
use crate::ids;
use crate::keys::{MasterKeys, OrderStatus, RefundState};
use crate::nodes::Nodes;
use crate::pow;
use crate::scripts::buy::{self, Back, Outcome};
use crate::scripts::{self, ScriptError, shard_lend};
use crate::sharded::{EventShards, at_home};
use crate::store::Store;

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

/// A one-time purchase token from precheck.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PurchaseToken {
    /// Present it to buy, once.
    pub purchase_token: String,
    /// Lifetime.
    pub expires_in_ms: u64,
}

/// An accepted buy: the unit is reserved and the order intent is queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Accepted {
    /// The order.
    pub order_id: String,
    /// Always [`OrderStatus::Queued`] here; poll follows it.
    pub status: OrderStatus,
    /// Orders ahead of this one still to drain into Postgres, this one included (as poll says).
    pub position: u64,
    /// The buyer's home shard, which sold the unit (a unit another shard lent it included) and
    /// holds the order.
    pub shard: u32,
}

/// The place in the drain's queue of the order with sequence number `seq` when `drained`
/// orders have reached Postgres: the orders ahead of it still to drain, itself included (at
/// least 1 while it is queued; orders drain in about `seq` order).
pub fn queue_position(seq: u64, drained: u64) -> u64 {
    seq.saturating_sub(drained).max(1)
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
        /// Past queued.
        state: OrderStatus,
        /// Money the buyer paid for it that paid nothing, and where its refund stands.
        #[serde(skip_serializing_if = "Option::is_none")]
        refund: Option<Refund>,
    },
    /// No order, and nothing left to buy.
    SoldOut,
    /// No order (yet).
    None,
}

/// Payments of an order that paid nothing (a second payment, another amount, a late one), paid
/// back by the refund job ([`crate::orders::pay_back`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refund {
    /// `pending` until every one of them is refunded.
    pub state: RefundState,
    /// How many payments.
    pub payments: u64,
}

/// What a poll found, and whether it was elected to drain.
#[derive(Debug, Clone)]
pub struct Polled {
    /// The answer for the buyer.
    pub result: PollResult,
    /// This poll should drain the event once it has answered ([`crate::orders::catch_up`]):
    /// its order is still queued and no other poll was elected in the last `poll_drain_ms`.
    pub drain_due: bool,
    /// The buyer's home shard: the one whose queue an elected poll drains.
    pub shard: u32,
}

/// What the buyer at home shard `shard` is told of a poll script's answer.
fn polled(state: scripts::poll::OrderState, shard: u32) -> Polled {
    use scripts::poll::OrderState;
    match state {
        OrderState::Order(o) if o.status != OrderStatus::Queued => Polled {
            result: PollResult::Order {
                refund: RefundState::parse(&o.refund).map(|state| Refund {
                    state,
                    payments: o.refund_payments,
                }),
                order_id: o.order_id,
                state: o.status,
            },
            drain_due: false,
            shard,
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
                shard,
            }
        }
        OrderState::NoOrder { sold_out } => Polled {
            result: if sold_out {
                PollResult::SoldOut
            } else {
                PollResult::None
            },
            drain_due: false,
            shard,
        },
    }
}

/// A proof-of-work challenge for admission, at the difficulty the user's home shard holds now
/// (one read). Refused before admission opens and after the end.
pub fn admission_challenge<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    shards: u32,
    user: &str,
    admission_secret: &[u8],
    now_ms: u64,
) -> Result<pow::Challenge, Error> {
    let (difficulty, _) = at_home(nodes, event, shards, user, |e, home, hash| {
        let (store, k) = e.slot(home)?;
        scripts::admission_terms::run(store, &k, hash)
    })?;
    Ok(pow::issue(
        admission_secret,
        event.as_str(),
        user,
        difficulty,
        now_ms,
    ))
}

/// The terms `event`'s admission tokens carry now (one read of its configuration): for tools
/// that hand out tokens in bulk past the gate, as the benchmarks do.
pub fn admission_terms<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
) -> Result<auth::AdmissionTerms, Error> {
    let (_, config) = crate::sharded::EventShards::open(nodes, event)?;
    let end_ms: u64 = config
        .get("end_ms")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Error::bug("an event without end_ms"))?;
    let version = config.get("admission_version").cloned().unwrap_or_default();
    Ok(auth::AdmissionTerms::until_end(version, end_ms))
}

/// A solved admission challenge, as the client sends it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Solution {
    /// The challenge, as handed out.
    pub challenge: String,
    /// What solves it.
    pub nonce: String,
}

/// An admission request, as the function parsed it.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionRequest<'a> {
    /// The event.
    pub event: &'a EventId,
    /// Its shard count as the caller knows it (a stale one costs a round trip, not an answer).
    pub shards: u32,
    /// The buyer.
    pub user: &'a str,
    /// The client's address, for the per-address bucket, when known.
    pub client: Option<&'a str>,
    /// The solved challenge, when the buyer sent one.
    pub solution: Option<&'a Solution>,
}

/// issue-token at the home shard (each shard admits its part of multiplier × stock), behind the
/// gate: the solution is checked here, without Redis; the script refuses it when used already
/// or below the event's difficulty now, and counts the client address's admissions.
pub fn issue_token<S: Store>(
    nodes: &Nodes<S>,
    req: &AdmissionRequest<'_>,
    admission_secret: &[u8],
    now_ms: u64,
) -> Result<Admission, Error> {
    let AdmissionRequest {
        event,
        shards,
        user,
        client,
        solution,
    } = *req;
    let proof = solution
        .map(|s| {
            pow::verify(
                admission_secret,
                event.as_str(),
                user,
                &s.challenge,
                &s.nonce,
                now_ms,
            )
        })
        .transpose()?;
    let (issued, _) = at_home(nodes, event, shards, user, |e, home, hash| {
        let (store, k) = e.slot(home)?;
        scripts::issue_token::run(store, &k, user, client, proof.as_ref(), hash)
    })?;
    Ok(match issued {
        scripts::issue_token::Issued::Admitted { version, end_ms } => {
            let terms = auth::AdmissionTerms::until_end(version, end_ms);
            Admission::Admitted {
                admission_token: auth::admission_token(
                    admission_secret,
                    event.as_str(),
                    user,
                    &terms,
                ),
            }
        }
        scripts::issue_token::Issued::Registered => Admission::Registered,
    })
}

/// A precheck request, as the function parsed it.
#[derive(Debug, Clone, Copy)]
pub struct PrecheckRequest<'a> {
    /// The event.
    pub event: &'a EventId,
    /// Its shard count as the caller knows it (a stale one costs a round trip, not an answer).
    pub shards: u32,
    /// The buyer.
    pub user: &'a str,
    /// The client's address, for the deny lists' ranges, when known.
    pub client: Option<IpAddr>,
    /// The admission token the buyer holds.
    pub admission_token: &'a str,
}

/// precheck at the home shard: the admission token (no Redis), then the gate in one script,
/// which also holds the token's version against the event's.
pub fn precheck<S: Store>(
    nodes: &Nodes<S>,
    req: &PrecheckRequest<'_>,
    admission_secret: &[u8],
    now_ms: u64,
) -> Result<PurchaseToken, Error> {
    let PrecheckRequest {
        event,
        shards,
        user,
        client,
        admission_token,
    } = *req;
    let terms = auth::verify_admission(
        admission_secret,
        event.as_str(),
        user,
        admission_token,
        now_ms / 1000,
    )?;
    let token = ids::new_purchase_token();
    let gray = ids::gray_bucket(event.as_str(), user);
    let (expires_in_ms, _) = at_home(nodes, event, shards, user, |e, home, hash| {
        let (store, k) = e.slot(home)?;
        scripts::precheck::run(
            store,
            &k,
            user,
            client,
            &terms.version,
            &token,
            (hash, gray),
        )
    })?;
    Ok(PurchaseToken {
        purchase_token: token,
        expires_in_ms,
    })
}

/// An accepted buy and the Redis round trips it took (1 while the home shard has stock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bought {
    /// What the buyer is told.
    pub accepted: Accepted,
    /// Script calls this buy made.
    pub round_trips: u32,
}

/// How many of the shards its home names a buy's tail asks for a unit at most: enough that a
/// tail racing others for the last units finds one while any is left, few enough to bound its
/// round trips ([`MAX_BUY_ROUND_TRIPS`]). The list it walks is never cut to this: what each
/// probe knows to be empty is struck from all of it, so near a sell-out, when most of a
/// second-old picture has run dry, the probes reach the shards still holding the last units.
pub const TAIL_CANDIDATES: usize = 32;

/// The most Redis round trips a buy takes: home, every candidate, home.
pub const MAX_BUY_ROUND_TRIPS: u32 = TAIL_CANDIDATES as u32 + 2;

/// What a buy whose tail found no unit, while stock may be left, tells the buyer (a 503: the
/// same purchase token works on the next click).
pub const STILL_LOOKING: &str = "looking for stock on other shards; try again";

/// buy: one script at the home shard while it has stock. When it is empty, the tail: the home
/// names the shards its picture says hold stock, in a random order weighted by the units each
/// held at the drain's last summary; the tail asks them in turn for a unit, [`TAIL_CANDIDATES`]
/// at most, skipping those a probed one knows to be empty, then comes back home with it, where it
/// is credited and sold in one script. The picture comes from the drain's summary, the probes
/// and the refills, so the first candidate has a unit unless the picture is a moment old: three
/// round trips in all, [`MAX_BUY_ROUND_TRIPS`] at most, near a sell-out. A home shard that
/// finds every shard empty answers sold out; a tail whose candidates all came back empty while
/// other shards may still hold stock answers "try again" (503, [`STILL_LOOKING`]), having
/// taught the home shard which are empty.
pub fn buy<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    shards: u32,
    user: &str,
    purchase_token: &str,
    now_ms: u64,
) -> Result<Bought, Error> {
    let order_id = ids::new_order_id(now_ms);
    let mut round_trips = 0;
    let mut home = None;
    let (first, e) = at_home(nodes, event, shards, user, |e, shard, hash| {
        round_trips += 1;
        home = Some((shard, hash));
        let (store, k) = e.slot(shard)?;
        buy::run(
            store,
            &k,
            user,
            purchase_token,
            hash,
            &order_id,
            &Back::default(),
        )
    })?;
    let mut candidates = match first {
        Outcome::Bought(b) => return Ok(accepted(order_id, b, round_trips)),
        Outcome::Tail(candidates) => candidates,
    };
    let (home, hash) = home.expect("at_home ran the buy");
    let transfer_id = ids::random_hex(8);
    let mut back = Back::default();
    let mut probes = 0;
    while probes < TAIL_CANDIDATES && !candidates.is_empty() {
        let c = candidates.remove(0);
        probes += 1;
        round_trips += 1;
        // A candidate that cannot be reached is skipped, not believed empty. (Had it lent before
        // its answer was lost, the transfer is recorded there and the repair credits it home.)
        let lent = match e.slot(c) {
            Ok((store, k)) => shard_lend::run(store, &k, &transfer_id, home, 1),
            Err(e) => Err(ScriptError::Store(e)),
        };
        match lent {
            Ok(l) if l.lent > 0 => {
                back.credit = Some((&transfer_id, 1));
                if l.left == 0 {
                    back.empties.push(c); // this unit was its last
                }
                break;
            }
            Ok(l) => {
                back.empties.push(c);
                candidates.retain(|s| !l.believed_empty.iter().any(|(b, _)| b == s));
                back.believed_empty.extend(l.believed_empty);
            }
            Err(ScriptError::Store(err)) if err.is_transient() => continue,
            // A candidate's refusal speaks of that shard, not of this buyer: skip it too.
            Err(ScriptError::Refused(_)) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    round_trips += 1;
    let (store, k) = e.slot(home)?;
    match buy::run(store, &k, user, purchase_token, hash, &order_id, &back)? {
        Outcome::Bought(b) => Ok(accepted(order_id, b, round_trips)),
        Outcome::Tail(_) => Err(still_looking(&e)),
    }
}

fn accepted(order_id: String, b: buy::Bought, round_trips: u32) -> Bought {
    Bought {
        accepted: Accepted {
            order_id,
            status: OrderStatus::Queued,
            position: queue_position(b.seq, b.drained),
            shard: b.shard,
        },
        round_trips,
    }
}

/// The tail found no unit but cannot tell sold out yet: the buyer asks again (with the same
/// purchase token, still valid), and the home shard now knows more empty shards.
fn still_looking<S: Store>(e: &EventShards<'_, S>) -> Error {
    Error::unavailable(
        Dependency::Redis,
        STILL_LOOKING,
        format!("event {} tail found its candidates empty", e.id().as_str()),
    )
}

/// poll at the home shard, from Redis only. The queue position is the order's place in its
/// home shard's stream (orders drain per shard, so that is the wait it has; across shards it is
/// an approximation of the event's order).
pub fn poll<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    shards: u32,
    user: &str,
    poll_drain_ms: u64,
) -> Result<Polled, Error> {
    let mut at = 0;
    let (state, _) = at_home(nodes, event, shards, user, |e, home, hash| {
        at = home;
        let (store, k) = e.slot(home)?;
        scripts::poll::run(store, &k, user, poll_drain_ms, hash)
    })?;
    Ok(polled(state, at))
}

/// What the storefront shows of an event (the window for its countdown, units left).
pub use crate::scripts::event_info::EventInfo;

/// The storefront's event view: one cheap read-only script on the event's own slot, safe to
/// serve on every page load. Units left are as the scheduled jobs last summed the shards
/// ([`crate::sharded::transfer::summarize`]), a second or so behind.
pub fn event_info<S: Store>(nodes: &Nodes<S>, event: &EventId) -> Result<EventInfo, Error> {
    Ok(scripts::event_info::run(
        nodes.for_event(event)?,
        &MasterKeys::new(event),
    )?)
}

#[cfg(test)]
mod tests;
