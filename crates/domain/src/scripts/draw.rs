//! `lua/draw.lua`: one page of the lottery draw (the first closes registration).

use super::{DRAW, ScriptError, call_ok};
use crate::keys::EventKeys;
use crate::store::Store;

/// Where the draw stands after a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawn {
    /// Winners so far.
    pub winners: u64,
    /// Whether the draw is over.
    pub done: bool,
}

/// Runs one page of at most `page` winners.
pub fn run(store: &impl Store, k: &EventKeys, page: u32) -> Result<Drawn, ScriptError> {
    let mut r = call_ok(
        store,
        &DRAW,
        &[k.cfg(), k.admitted(), k.registrants()],
        &[page.max(1).to_string()],
    )?;
    let drawn = Drawn {
        winners: r.next_u64()?,
        done: r.next_int()? == 1,
    };
    r.finish()?;
    Ok(drawn)
}
