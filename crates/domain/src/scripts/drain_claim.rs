//! `lua/drain_claim.lua`: takes or renews an event's drain lease, with a fencing token.

use super::{DRAIN_CLAIM, ScriptError, call, code};
use crate::keys::EventKeys;
use crate::store::Store;

/// The facts a drain needs, handed out with the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The fencing token: larger for every new holder.
    pub fence: i64,
    /// The event's sku.
    pub sku: String,
    /// Units put on sale.
    pub stock: i64,
    /// Seconds a buyer has to pay.
    pub payment_timeout_s: i64,
}

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

/// Runs it for `owner`, for `lease_ms`.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    owner: &str,
    lease_ms: u64,
) -> Result<Claim, ScriptError> {
    let (c, mut r) = call(
        store,
        &DRAIN_CLAIM,
        &[k.drain_lease(), k.drain_fence(), k.cfg()],
        &[owner.to_owned(), lease_ms.to_string()],
    )?;
    let claim = match c {
        code::OK => Claim::Held(Lease {
            fence: r.next_int()?,
            sku: r.next_text()?,
            stock: r.next_int()?,
            payment_timeout_s: r.next_int()?,
        }),
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
