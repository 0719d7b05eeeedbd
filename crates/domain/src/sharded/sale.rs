//! The sale on a sharded event: issue-token, precheck, buy (with its tail) and poll, each at
//! the buyer's home shard. Same answers as [`crate::sale`]; `shards` is the caller's count of
//! the event's shards (a stale one costs one more round trip, never a wrong answer).

use super::{Event, at_home};
use crate::auth;
use crate::error::{Dependency, Error};
use crate::event::EventId;
use crate::ids;
use crate::nodes::Nodes;
use crate::sale::{Accepted, Admission, Polled, PurchaseToken, queue_position};
use crate::scripts::shard_buy::{self, Back, Outcome};
use crate::scripts::{self, shard_lend};
use crate::store::Store;

/// issue-token at the home shard (each shard admits its part of multiplier × stock).
pub fn issue_token<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    shards: u32,
    user: &str,
    admission_secret: &[u8],
) -> Result<Admission, Error> {
    let (issued, _) = at_home(nodes, event, shards, user, |e, home, hash| {
        let (store, k) = e.slot(home)?;
        scripts::issue_token::run(store, &k, user, hash)
    })?;
    Ok(match issued {
        scripts::issue_token::Issued::Admitted => Admission::Admitted {
            admission_token: auth::admission_token(admission_secret, event.as_str(), user),
        },
        scripts::issue_token::Issued::Registered => Admission::Registered,
    })
}

/// precheck at the home shard: the admission token (no Redis), then the gate in one script.
pub fn precheck<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    shards: u32,
    user: &str,
    client_addr: &str,
    admission_token: &str,
    admission_secret: &[u8],
) -> Result<PurchaseToken, Error> {
    auth::verify_admission(admission_secret, event.as_str(), user, admission_token)?;
    let token = ids::new_purchase_token();
    let (expires_in_ms, _) = at_home(nodes, event, shards, user, |e, home, hash| {
        let (store, k) = e.slot(home)?;
        scripts::precheck::run(store, &k, user, client_addr, &token, hash)
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

/// buy: one script at the home shard while it has stock. When it is empty, the tail: lend a
/// unit from one of the (at most two) candidate shards it names, then come back home with it,
/// where it is credited and sold in one script — at most 4 round trips. A home shard that
/// finds every shard empty answers sold out; a tail that found both candidates empty while
/// other shards may still hold stock answers "try again" (503), having taught the home shard
/// which shards are empty.
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
    let (first, e) = at_home(nodes, event, shards, user, |e, home, hash| {
        round_trips += 1;
        let (store, k) = e.slot(home)?;
        shard_buy::run(
            store,
            &k,
            user,
            purchase_token,
            hash,
            &order_id,
            &Back::default(),
        )
    })?;
    let candidates = match first {
        Outcome::Bought(b) => return Ok(accepted(order_id, b, round_trips)),
        Outcome::Tail(candidates) => candidates,
    };
    let hash = ids::home_hash(event.as_str(), user);
    let home = (hash % u64::from(e.shards())) as u32;
    let transfer_id = ids::random_hex(8);
    let mut back = Back::default();
    for c in candidates.into_iter().take(2) {
        round_trips += 1;
        let (store, k) = e.slot(c)?;
        if shard_lend::run(store, &k, &transfer_id, home, 1)?.lent > 0 {
            back.credit = Some((&transfer_id, 1));
            break;
        }
        back.empties.push(c);
    }
    round_trips += 1;
    let (store, k) = e.slot(home)?;
    match shard_buy::run(store, &k, user, purchase_token, hash, &order_id, &back)? {
        Outcome::Bought(b) => Ok(accepted(order_id, b, round_trips)),
        Outcome::Tail(_) => Err(still_looking(&e)),
    }
}

fn accepted(order_id: String, b: shard_buy::Bought, round_trips: u32) -> Bought {
    Bought {
        accepted: Accepted {
            order_id,
            status: "queued",
            position: queue_position(b.seq, b.drained),
            shard: b.shard,
        },
        round_trips,
    }
}

/// The tail found no unit but cannot tell sold out yet: the buyer asks again (with the same
/// purchase token, still valid), and the home shard now knows more empty shards.
fn still_looking<S: Store>(e: &Event<'_, S>) -> Error {
    Error::unavailable(
        Dependency::Redis,
        "looking for stock on other shards; try again",
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
    let (state, _) = at_home(nodes, event, shards, user, |e, home, hash| {
        let (store, k) = e.slot(home)?;
        scripts::poll::run(store, &k, user, poll_drain_ms, hash)
    })?;
    Ok(crate::sale::polled(state))
}
