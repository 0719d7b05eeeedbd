//! `lua/shard_lend.lua`: a shard lends units to another, recording the transfer until settled.

use super::ScriptError;
use super::shard_lend_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Units lent (0: the shard was empty) and the units it has left.
pub type Lent = OkReply;

/// Lends up to `units` from shard slot `k` to shard `to` as transfer `transfer_id`.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    transfer_id: &str,
    to: u32,
    units: u64,
) -> Result<Lent, ScriptError> {
    let keys = Keys {
        cfg: k.cfg(),
        stock: k.stock(),
        lent: k.lent(),
    };
    let args = Args {
        transfer_id: transfer_id.to_owned(),
        to: to.to_string(),
        units: units.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    let lent = OkReply::read(&mut r)?;
    r.finish()?;
    Ok(lent)
}
