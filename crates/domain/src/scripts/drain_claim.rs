//! `lua/drain_claim.lua`: takes or renews an event's drain lease, with a fencing token.

use super::drain_claim_contract::{Args, Keys, OkReply, call};
use super::{ScriptError, code};
use crate::keys::ShardKeys;
use crate::store::Store;

/// The facts a drain needs, handed out with the lease: the fencing token (larger for every
/// new holder), the event's sku, the units put on sale, the seconds a buyer has to pay, the
/// price (amount and currency), and the units the shard holds now.
pub type Lease = OkReply;

/// What a claim got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The lease is ours.
    Held(Lease),
    /// Someone else holds it.
    Busy,
    /// No such event (registered, never configured).
    NoEvent,
}

/// A lease as held: the owner that claimed it and the fence it got. The scripts that act only
/// for the holder check it against the lease (whose format is `crates/domain/lua/lib/lease.lua`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder<'a> {
    /// The owner that claimed it.
    pub owner: &'a str,
    /// The fence it got ([`Lease`]'s `fence`).
    pub fence: i64,
}

/// Runs it for `owner`, for `lease_ms`.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    owner: &str,
    lease_ms: u64,
) -> Result<Claim, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        owner: owner.to_owned(),
        lease_ms: lease_ms.to_string(),
    };
    let (c, mut r) = call(store, keys, args)?;
    let claim = match c {
        code::OK => return Ok(Claim::Held(OkReply::read(&mut r)?)),
        code::CONFLICT => {
            r.next_int()?; // ms left on the other holder's lease
            Claim::Busy
        }
        code::NOT_FOUND => Claim::NoEvent,
        c => return Err(ScriptError::Refused(r.refusal(c)?)),
    };
    r.finish()?;
    Ok(claim)
}
