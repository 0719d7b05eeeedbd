//! `lua/precheck.lua`: the gate before buy — window and switches, deny lists, one per user,
//! the admission token's version, the gray release, the user's bucket and the shard's part of
//! the global bucket (each may be in shadow mode) — then a one-time purchase token, replacing
//! any earlier one.

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
    (home_hash, gray_bucket): (u64, u32),
) -> Result<u64, ScriptError> {
    let keys = Keys {
        cfg: k.cfg(),
        denied_users: k.denied_users(),
        denied_nets: k.denied_nets(),
        denied_net_lens: k.denied_net_lens(),
        bought: k.bought(),
        purchase_token: k.purchase_token(user),
        user_bucket: k.user_bucket(user),
        global_bucket: k.global_bucket(),
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
        gray_bucket: gray_bucket.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    Ok(OkReply::read(&mut r)?.ttl_ms)
}
