//! `lua/precheck.lua`: the gate before buy — window and switches, deny lists, one per user,
//! the admission token's version, the gray release, the user's bucket and the shard's part of
//! the global bucket (each may be in shadow mode) — then a one-time purchase token, replacing
//! any earlier one.

use std::net::IpAddr;

use super::ScriptError;
use super::precheck_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::ShardKeys;
use crate::net;
use crate::store::Store;

/// Runs it; stores `token` as the user's purchase token and returns its lifetime in ms. A
/// client whose address is unknown (`None`) is on no address deny list.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    user: &str,
    client: Option<IpAddr>,
    admission_version: &str,
    token: &str,
    (home_hash, gray_bucket): (u64, u32),
) -> Result<u64, ScriptError> {
    let keys = Keys::at(k, user);
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
