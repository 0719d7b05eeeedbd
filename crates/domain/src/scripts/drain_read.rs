//! `lua/drain_read.lua`: the next batch of order intents for the lease holder (entries of a
//! drainer that died first); poison goes to the dead letters.

use super::drain_claim::Holder;
use super::drain_read_contract::{Args, Keys, OkReply, call};
use super::{ScriptError, code};
use crate::keys::ShardKeys;
use crate::store::Store;

/// One order intent from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The stream entry id.
    pub id: String,
    /// The order id.
    pub order: String,
    /// The buyer.
    pub user: String,
    /// The shard that sold it (the buyer's home; its stream is the one read).
    pub shard: i64,
    /// The order's place in its shard's sale.
    pub seq: i64,
    /// When the buy was accepted (Redis's clock, ms).
    pub created_ms: i64,
}

/// The drain's tuning that the read needs.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Entries per batch.
    pub batch: usize,
    /// An entry delivered but unacknowledged this long is taken over.
    pub reclaim_idle_ms: u64,
    /// Deliveries before an entry goes to the dead letters.
    pub max_deliveries: u32,
}

/// Runs it for the lease's `holder`; `None` when the lease moved on.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    holder: Holder<'_>,
    limits: Limits,
) -> Result<Option<Vec<Entry>>, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        owner: holder.owner.to_owned(),
        fence: holder.fence.to_string(),
        reclaim_idle_ms: limits.reclaim_idle_ms.to_string(),
        batch: limits.batch.to_string(),
        max_deliveries: limits.max_deliveries.to_string(),
    };
    let (c, mut r) = call(store, keys, args)?;
    match c {
        code::OK => {}
        code::CONFLICT => {
            r.finish()?;
            return Ok(None);
        }
        c => return Err(ScriptError::Refused(r.refusal(c)?)),
    }
    let mut entries = Vec::new();
    for _ in 0..OkReply::read(&mut r)?.count {
        entries.push(Entry {
            id: r.next_text()?,
            order: r.next_text()?,
            user: r.next_text()?,
            shard: r.next_int()?,
            seq: r.next_int()?,
            created_ms: r.next_int()?,
        });
    }
    r.finish()?;
    Ok(Some(entries))
}
