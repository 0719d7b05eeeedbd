//! `lua/deny.lua`: adds users and client addresses to an event's deny lists.

use super::ScriptError;
use super::deny_contract::{Args, Keys, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Runs it.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    users: &[String],
    addrs: &[String],
) -> Result<(), ScriptError> {
    let keys = Keys {
        cfg: k.cfg(),
        denied_users: k.denied_users(),
        denied_addrs: k.denied_addrs(),
    };
    let args = Args {
        users_count: users.len().to_string(),
        entries: users.iter().chain(addrs).cloned().collect(),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
