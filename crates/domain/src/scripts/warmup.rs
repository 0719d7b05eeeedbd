//! `lua/warmup.lua`: writes the stock into its shards before the sale, once.

use super::ScriptError;
use super::warmup_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Runs it; returns the units written and the shards they went to.
pub fn run(store: &impl Store, k: &EventKeys) -> Result<(u64, u32), ScriptError> {
    let keys = Keys {
        cfg: k.cfg(),
        nonempty: k.nonempty(),
        stock: k.stock(),
    };
    let mut r = call_ok(store, keys, Args {})?;
    let written = OkReply::read(&mut r)?;
    Ok((written.stock, written.shards))
}
