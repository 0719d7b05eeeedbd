//! `lua/issue_token.lua`: admits a user to an event, idempotently (first come, or registration
//! for the lottery), behind the admission gate: the opening time, the proof of work the guest
//! checked (used once, at the event's difficulty now) and the client address's bucket.

use super::issue_token_contract::{Args, Keys, OkReply, call};
use super::{ScriptError, code};
use crate::keys::ShardKeys;
use crate::pow::Proof;
use crate::store::Store;

/// What the script decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issued {
    /// Admitted (now or earlier), under the event's admission version; the sale ends at
    /// `end_ms`.
    Admitted {
        /// The event's `admission_version`.
        version: String,
        /// The sale's end.
        end_ms: u64,
    },
    /// Registered for the lottery draw.
    Registered,
}

/// Runs it for `user` from the client whose address bucket is `client`
/// ([`crate::net::bucket_key`]; unknown clients share one bucket), with the checked `proof` if
/// one came.
pub fn run(
    store: &impl Store,
    k: &ShardKeys,
    user: &str,
    client: Option<&str>,
    proof: Option<&Proof>,
    home_hash: u64,
) -> Result<Issued, ScriptError> {
    let keys = Keys::at(k, client.unwrap_or(""), proof.map_or("", |p| p.id.as_str()));
    let args = Args {
        user: user.to_owned(),
        home_hash: home_hash.to_string(),
        pow_bits: proof.map_or(0, |p| p.difficulty).to_string(),
        challenge_ttl_ms: proof.map_or(0, |p| p.ttl_ms.max(1)).to_string(),
    };
    let (c, mut r) = call(store, keys, args)?;
    let issued = match c {
        code::OK => {
            let ok = OkReply::read(&mut r)?;
            Issued::Admitted {
                version: ok.admission_version,
                end_ms: ok.end_ms,
            }
        }
        code::REGISTERED => Issued::Registered,
        c => return Err(ScriptError::Refused(r.refusal(c)?)),
    };
    r.finish()?;
    Ok(issued)
}
