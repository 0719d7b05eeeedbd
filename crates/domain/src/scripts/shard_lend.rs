//! `lua/shard_lend.lua`: a shard lends units to another, recording the transfer until settled.

use super::ScriptError;
use super::shard_lend_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// What a lend did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lent {
    /// Units lent (0: the shard was empty).
    pub lent: u64,
    /// Units it has left.
    pub left: i64,
    /// When it lent nothing: the shards it believes empty, with until when (ms).
    pub believed_empty: Vec<(u32, u64)>,
}

/// Lends up to `units` from shard slot `k` to shard `to` as transfer `transfer_id`.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    transfer_id: &str,
    to: u32,
    units: u64,
) -> Result<Lent, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        transfer_id: transfer_id.to_owned(),
        to: to.to_string(),
        units: units.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    let ok = OkReply::read(&mut r)?;
    let mut believed_empty = Vec::new();
    while r.has_more() {
        believed_empty.push((r.next_u32()?, r.next_u64()?));
    }
    Ok(Lent {
        lent: ok.lent,
        left: ok.left,
        believed_empty,
    })
}
