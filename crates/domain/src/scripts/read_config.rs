//! `lua/read_config.lua`: a slot's configuration hash, in one HGETALL.

use std::collections::BTreeMap;

use super::ScriptError;
use super::read_config_contract::{Args, Keys, call_ok};
use crate::keys::Slot;
use crate::store::Store;

/// Runs it: the configuration, field → value.
pub fn run(store: &impl Store, k: &impl Slot) -> Result<BTreeMap<String, String>, ScriptError> {
    let mut r = call_ok(store, Keys::at(k), Args {})?;
    let mut config = BTreeMap::new();
    while r.has_more() {
        config.insert(r.next_text()?, r.next_text()?);
    }
    Ok(config)
}
