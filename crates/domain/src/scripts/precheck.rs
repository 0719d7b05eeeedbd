//! `lua/precheck.lua`: the gate before buy — window and switches, deny lists, one per user,
//! the admission token's version, the user's bucket — then a one-time purchase token, replacing any earlier one.

use std::net::IpAddr;

use super::ScriptError;
use super::precheck_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::EventKeys;
use crate::net;
use crate::store::Store;

/// Runs it; stores `token` as the user's purchase token and returns its lifetime in ms. A
/// client whose address is unknown (`None`) is on no address deny list.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    user: &str,
    client: Option<IpAddr>,
    admission_version: &str,
    token: &str,
    home_hash: u64,
) -> Result<u64, ScriptError> {
    let keys = Keys {
        cfg: k.cfg(),
        denied_users: k.denied_users(),
        denied_nets: k.denied_nets(),
        denied_net_lens: k.denied_net_lens(),
        bought: k.bought(),
        purchase_token: k.purchase_token(user),
        user_bucket: k.user_bucket(user),
        counts: k.counts(),
        stock: k.stock(),
        empty: k.empty(),
    };
    let args = Args {
        user: user.to_owned(),
        client_bits: client.map(net::bits).unwrap_or_default(),
        admission_version: admission_version.to_owned(),
        purchase_token: token.to_owned(),
        home_hash: home_hash.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    Ok(OkReply::read(&mut r)?.ttl_ms)
}
