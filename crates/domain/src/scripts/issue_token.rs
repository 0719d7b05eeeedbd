//! `lua/issue_token.lua`: admits a user to an event, idempotently (first come, or registration
//! for the lottery).

use super::{ISSUE_TOKEN, ScriptError, call, code};
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
pub fn run(store: &impl Store, k: &EventKeys, user: &str) -> Result<Issued, ScriptError> {
    let (c, r) = call(
        store,
        &ISSUE_TOKEN,
        &[k.cfg(), k.admitted(), k.registrants(), k.counts()],
        &[user.to_owned()],
    )?;
    match c {
        code::OK => r.finish().map(|()| Issued::Admitted).map_err(Into::into),
        code::REGISTERED => r.finish().map(|()| Issued::Registered).map_err(Into::into),
        c => Err(ScriptError::Refused(r.refusal(c)?)),
    }
}
