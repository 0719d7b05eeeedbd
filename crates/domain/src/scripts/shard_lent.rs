//! `lua/shard_lent.lua`: the transfers a shard lent and has not settled.

use super::ScriptError;
use super::shard_lent_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// One transfer a shard lent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// Its id.
    pub id: String,
    /// The shard it went to.
    pub to: u32,
    /// Units.
    pub units: u64,
}

/// The transfers shard slot `k` lent at least `min_age_ms` ago.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    min_age_ms: u64,
) -> Result<Vec<Transfer>, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        min_age_ms: min_age_ms.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    let count = OkReply::read(&mut r)?.count;
    let mut out = Vec::new();
    for _ in 0..count {
        out.push(Transfer {
            id: r.next_text()?,
            to: r.next_u32()?,
            units: r.next_u64()?,
        });
    }
    r.finish()?;
    Ok(out)
}
