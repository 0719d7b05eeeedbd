//! `lua/issue_token.lua`: admits a user to an event, idempotently (first come, or registration
//! for the lottery).

use super::issue_token_contract::{Args, Keys, call};
use super::{ScriptError, code};
use crate::keys::EventKeys;
use crate::store::Store;

/// What the script decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issued {
    /// Admitted (now or earlier).
    Admitted,
    /// Registered for the lottery draw.
    Registered,
}

/// Runs it for `user`.
pub fn run(
    store: &impl Store,
    k: &EventKeys,
    user: &str,
    home_hash: u64,
) -> Result<Issued, ScriptError> {
    let keys = Keys {
        cfg: k.cfg(),
        admitted: k.admitted(),
        registrants: k.registrants(),
        counts: k.counts(),
        stock: k.stock(),
        empty: k.empty(),
    };
    let args = Args {
        user: user.to_owned(),
        home_hash: home_hash.to_string(),
    };
    let (c, r) = call(store, keys, args)?;
    let issued = match c {
        code::OK => Issued::Admitted,
        code::REGISTERED => Issued::Registered,
        c => return Err(ScriptError::Refused(r.refusal(c)?)),
    };
    r.finish()?;
    Ok(issued)
}
