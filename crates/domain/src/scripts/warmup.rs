//! `lua/warmup.lua`: writes the stock into its shards before the sale, once.

use super::{ScriptError, WARMUP, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Runs it; returns the units written and the shards they went to.
pub fn run(store: &impl Store, k: &EventKeys) -> Result<(u64, u32), ScriptError> {
    let mut r = call_ok(store, &WARMUP, &[k.cfg(), k.nonempty(), k.stock()], &[])?;
    let written = (r.next_u64()?, r.next_u64()? as u32);
    r.finish()?;
    Ok(written)
}
