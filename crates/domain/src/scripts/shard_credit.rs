//! `lua/shard_credit.lua`: a shard receives lent units, once per transfer.

use super::ScriptError;
use super::shard_credit_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// Credits transfer `transfer_id` of `units` to shard slot `k`; whether this call credited it.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    transfer_id: &str,
    units: u64,
) -> Result<bool, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        transfer_id: transfer_id.to_owned(),
        units: units.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    let credited = OkReply::read(&mut r)?.credited;
    r.finish()?;
    Ok(credited)
}
