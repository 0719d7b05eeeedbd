//! `lua/drain_confirm.lua`: after the Postgres commit, marks orders confirmed, moves the
//! drained counter once per order, acknowledges the entries and trims the stream.

use super::{DRAIN_CONFIRM, ScriptError, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Runs it with (stream id, order id) pairs; returns how many orders were newly confirmed.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    committed: &[(&str, &str)],
) -> Result<u64, ScriptError> {
    let args: Vec<String> = committed
        .iter()
        .flat_map(|(id, order)| [(*id).to_owned(), (*order).to_owned()])
        .collect();
    let mut r = call_ok(
        store,
        &DRAIN_CONFIRM,
        &[k.queue(), k.drained(), k.drain_errors(), k.orders()],
        &args,
    )?;
    let confirmed = r.next_u64()?;
    r.finish()?;
    Ok(confirmed)
}
