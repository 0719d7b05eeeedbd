//! `lua/drain_failed.lua`: remembers why entries failed; they stay pending and are retried,
//! then dead-lettered with that reason.

use super::{DRAIN_FAILED, ScriptError, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Runs it with (stream id, error) pairs.
pub fn run(store: &impl Store, k: &EventKeys, failed: &[(&str, &str)]) -> Result<(), ScriptError> {
    let args: Vec<String> = failed
        .iter()
        .flat_map(|(id, error)| [(*id).to_owned(), (*error).to_owned()])
        .collect();
    call_ok(store, &DRAIN_FAILED, &[k.drain_errors()], &args)?.finish()?;
    Ok(())
}
