//! `lua/global_limit.lua`: the global bucket across events, on one node: set, then read.

use super::ScriptError;
use super::global_limit_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::Registry;
use crate::store::Store;

/// Sets the limit to `(rate, burst)` when given; returns the node's limit.
pub fn run(store: &impl Store, set: Option<(f64, u32)>) -> Result<(f64, u32), ScriptError> {
    let fields = match set {
        Some((rate, burst)) => vec![("rate", rate.to_string()), ("burst", burst.to_string())],
        None => Vec::new(),
    };
    let keys = Keys::at(&Registry);
    let mut r = call_ok(
        store,
        keys,
        Args {
            fields: super::flat_pairs(fields),
        },
    )?;
    let ok = OkReply::read(&mut r)?;
    r.finish()?;
    Ok((ok.rate.parse().unwrap_or(0.0), ok.burst))
}
