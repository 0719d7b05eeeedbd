//! `lua/draw.lua`: one page of the lottery draw (the first closes registration).

use super::ScriptError;
use super::draw_contract::{Args, Keys, OkReply, call_ok};
use crate::keys::ShardKeys;
use crate::store::Store;

/// Where the draw stands after a page: winners so far, and whether the draw is over.
pub type Drawn = OkReply;

/// Runs one page of at most `page` winners, toward `quota` winners in this slot (the first
/// page's quota stands).
pub fn run(store: &impl Store, k: &ShardKeys, page: u32, quota: u64) -> Result<Drawn, ScriptError> {
    let keys = Keys::at(k);
    let args = Args {
        page: page.max(1).to_string(),
        quota: quota.to_string(),
    };
    let mut r = call_ok(store, keys, args)?;
    Ok(OkReply::read(&mut r)?)
}
