//! `lua/deny.lua`: adds users and client address ranges to an event's deny lists.

use super::ScriptError;
use super::deny_contract::{Args, Keys, call_ok};
use crate::keys::EventKeys;
use crate::net::Cidr;
use crate::store::Store;

/// Runs it.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    users: &[String],
    nets: &[Cidr],
) -> Result<(), ScriptError> {
    let keys = Keys {
        cfg: k.cfg(),
        denied_users: k.denied_users(),
        denied_nets: k.denied_nets(),
        denied_net_lens: k.denied_net_lens(),
    };
    let args = Args {
        users_count: users.len().to_string(),
        entries: users
            .iter()
            .cloned()
            .chain(nets.iter().map(Cidr::bits))
            .collect(),
    };
    call_ok(store, keys, args)?.finish()?;
    Ok(())
}
