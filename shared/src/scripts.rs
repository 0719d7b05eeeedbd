//! Every Lua script, in one place. Sources live in `shared/lua/`; `build.rs` prepends
//! `common.lua` (reply codes, clock, token bucket) and computes each SHA1 at build time.

/// A Lua script and its SHA1, ready for EVALSHA.
#[derive(Debug)]
pub struct Script {
    /// File name without `.lua`.
    pub name: &'static str,
    /// Full source (common helpers + body).
    pub source: &'static str,
    /// SHA1 of `source`, hex.
    pub sha: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/scripts.rs"));

/// Reply codes, the first element of every script's reply (`lua/common.lua`).
pub mod code {
    /// Done.
    pub const OK: i64 = 0;
    /// No such event.
    pub const NOT_FOUND: i64 = 1;
    /// The operator switched the sale off.
    pub const PAUSED: i64 = 2;
    /// Before the start; the next element is the wait in ms.
    pub const TOO_EARLY: i64 = 3;
    /// After the end.
    pub const ENDED: i64 = 4;
    /// Every shard is empty.
    pub const SOLD_OUT: i64 = 5;
    /// Purchase token missing, wrong, used or expired.
    pub const BAD_TOKEN: i64 = 6;
    /// This user already has an order; the next element is its id.
    pub const ALREADY: i64 = 7;
    /// A token bucket is empty.
    pub const LIMITED: i64 = 8;
    /// User or client address on a deny list.
    pub const DENIED: i64 = 9;
    /// The admission cap (multiplier × stock) is reached.
    pub const ADMISSION_CLOSED: i64 = 10;
    /// Lottery: registered for the draw.
    pub const REGISTERED: i64 = 11;
    /// Lottery: drawn, not selected.
    pub const NOT_SELECTED: i64 = 12;
    /// The change conflicts with the event's state.
    pub const CONFLICT: i64 = 13;
    /// No order for this user.
    pub const NONE: i64 = 14;
}
