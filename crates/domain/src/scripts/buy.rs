//! `lua/buy.lua`: a sharded event's buy at the buyer's home shard — the whole purchase
//! while the home shard has stock, else the candidates for the tail ([`crate::sharded`]).

use super::buy_contract::{Args, Keys, OkReply, call};
use super::{ScriptError, code};
use crate::keys::ShardKeys;
use crate::store::Store;

/// An accepted buy: its place in the shard's queue, the shard, the shard's orders drained.
pub type Bought = OkReply;

/// What the home shard answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted.
    Bought(Bought),
    /// The home shard is empty: these shards may have stock.
    Tail(Vec<u32>),
}

/// What the tail brings back to the home shard.
#[derive(Debug, Clone, Default)]
pub struct Back<'a> {
    /// A transfer lent to the home shard for this buy, and its units.
    pub credit: Option<(&'a str, u64)>,
    /// Shards found empty on the way.
    pub empties: Vec<u32>,
    /// Shards a probed shard believed empty, with until when (ms): passed on.
    pub believed_empty: Vec<(u32, u64)>,
}

/// Runs it at the home shard's slot `k`.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    user: &str,
    purchase_token: &str,
    home_hash: u64,
    order_id: &str,
    back: &Back<'_>,
) -> Result<Outcome, ScriptError> {
    let (credit_id, credit_units) = back.credit.unwrap_or(("", 0));
    let args = Args {
        user: user.to_owned(),
        purchase_token: purchase_token.to_owned(),
        home_hash: home_hash.to_string(),
        order_id: order_id.to_owned(),
        credit_id: credit_id.to_owned(),
        credit_units: credit_units.to_string(),
        empties: back
            .empties
            .iter()
            .map(u32::to_string)
            .chain(
                back.believed_empty
                    .iter()
                    .map(|(s, until)| format!("{s}@{until}")),
            )
            .collect(),
    };
    let (c, mut r) = call(store, Keys::at(k, user), args)?;
    match c {
        code::OK => {
            let bought = OkReply::read(&mut r)?;
            r.finish()?;
            Ok(Outcome::Bought(bought))
        }
        code::TAIL => {
            let mut candidates = Vec::new();
            while r.has_more() {
                candidates.push(r.next_u32()?);
            }
            Ok(Outcome::Tail(candidates))
        }
        c => Err(ScriptError::Refused(r.refusal(c)?)),
    }
}
