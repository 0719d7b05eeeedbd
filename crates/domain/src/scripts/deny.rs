//! `lua/deny.lua`: adds users and client addresses to an event's deny lists.

use super::{DENY, ScriptError, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Runs it.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    users: &[String],
    addrs: &[String],
) -> Result<(), ScriptError> {
    let mut args = vec![users.len().to_string()];
    args.extend(users.iter().cloned());
    args.extend(addrs.iter().cloned());
    call_ok(
        store,
        &DENY,
        &[k.cfg(), k.denied_users(), k.denied_addrs()],
        &args,
    )?
    .finish()?;
    Ok(())
}
