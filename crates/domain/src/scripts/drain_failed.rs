//! `lua/drain_failed.lua`: remembers why entries failed; they stay pending and are retried,
//! then dead-lettered with that reason.

use super::ScriptError;
use super::drain_failed_contract::{Args, Keys, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// Runs it with (stream id, error) pairs.
pub fn run(store: &impl Store, k: &ShardKeys, failed: &[(&str, &str)]) -> Result<(), ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        failures: super::flat_pairs(failed.iter().copied()),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
