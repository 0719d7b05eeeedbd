//! `lua/deny.lua`: adds users and client address ranges to an event's deny lists.

use super::ScriptError;
use super::deny_contract::{Args, Keys, call_ok};
use crate::keys::ShardKeys;
use crate::net::Cidr;
use crate::store::Store;

/// Runs it.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    users: &[String],
    nets: &[Cidr],
) -> Result<(), ScriptError> {
    let keys = Keys::at(k);
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
