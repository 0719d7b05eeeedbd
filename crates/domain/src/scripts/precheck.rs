//! `lua/precheck.lua`: the gate before buy — window and switches, deny lists, one per user,
//! the user's bucket — then a one-time purchase token, replacing any earlier one.

use super::{PRECHECK, ScriptError, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Runs it; stores `token` as the user's purchase token and returns its lifetime in ms.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    user: &str,
    client_addr: &str,
    token: &str,
) -> Result<u64, ScriptError> {
    let mut r = call_ok(
        store,
        &PRECHECK,
        &[
            k.cfg(),
            k.denied_users(),
            k.denied_addrs(),
            k.bought(),
            k.purchase_token(user),
            k.user_bucket(user),
            k.counts(),
        ],
        &[user.to_owned(), client_addr.to_owned(), token.to_owned()],
    )?;
    let ttl_ms = r.next_u64()?;
    r.finish()?;
    Ok(ttl_ms)
}
