//! What an operator does: create and update events, warm up stock, flip switches and limits,
//! deny users and addresses, run the lottery draw, read an event's state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::auth;
use crate::error::{Error, ErrorCode};
use crate::event::{EventConfig, EventId, Switches};
use crate::keys::EventKeys;
use crate::scripts::{self, Refusal};
use crate::store::Store;

/// Creates or updates an event. Stock and shards are frozen once warmed up. Returns whether it
/// was created.
pub fn upsert_event(
    store: &impl Store,
    event: &EventId,
    config: &EventConfig,
) -> Result<bool, Error> {
    config.validate()?;
    let k = EventKeys::new(event);
    // The scheduled jobs find events through the registry, a slot of its own (so a second
    // call). Registered first: if the configuration write then fails, the jobs meet an entry
    // without configuration and skip it; the other way round, a failure in between would leave
    // a sellable event the drain never visits.
    scripts::register_event::run(store, event)?;
    Ok(scripts::upsert_event::run(store, &k, config.fields())?)
}

/// The result of a warm-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warmed {
    /// Units written.
    pub stock: u64,
    /// Over this many shards.
    pub shards: u32,
}

/// Writes the stock into its shards, once, before the sale.
pub fn warm_up(store: &impl Store, event: &EventId) -> Result<Warmed, Error> {
    let (stock, shards) = scripts::warmup::run(store, &EventKeys::new(event))?;
    Ok(Warmed { stock, shards })
}

/// Applies live switches and limits.
pub fn set_switches(store: &impl Store, event: &EventId, switches: &Switches) -> Result<(), Error> {
    Ok(scripts::set_fields::run(
        store,
        &EventKeys::new(event),
        switches.fields()?,
    )?)
}

/// Users and client addresses to keep out of an event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenyList {
    /// User ids (the JWT `sub`: 1-128 printable ASCII characters, no spaces).
    #[serde(default)]
    pub users: Vec<String>,
    /// Client addresses (IP, as Spin's `spin-client-addr` gives it without the port).
    #[serde(default)]
    pub addrs: Vec<String>,
}

/// The most entries of each list one request may add (more take more requests: lists only
/// grow). With entries as long as they may be, both lists full still fit in the 16 KiB every
/// request body is held to (`seckill_spin_edge::http::MAX_BODY_BYTES`), written compactly with
/// JSON's short escapes, as encoders write it (api/openapi.yaml's `DenyList` states the same
/// sum):
///
/// ```text
/// `{"users":[` + `],"addrs":[` + `]}`                 = 10 + 11 + 2 =     23 bytes
/// users: 50 × (128 characters, each `"` or `\` escaped to 2 bytes,
///        + 2 quotes) + 49 commas                  = 50 × 258 + 49 = 12,949 bytes
/// addrs: 50 × (45 characters + 2 quotes) + 49 commas = 50 × 47 + 49 =  2,399 bytes
/// in all                                                            15,371 bytes of 16,384
/// ```
///
/// which leaves 1,013 bytes for whitespace.
pub const DENY_MAX_EACH: usize = 50;

/// The longest address: an IPv4-mapped IPv6 address written out in full
/// (`0000:0000:0000:0000:0000:ffff:255.255.255.255`).
pub const ADDR_MAX_LEN: usize = 45;

/// Whether `addr` can be an address `spin-client-addr` gives: 1-45 of `[0-9A-Fa-f.:]`.
fn is_addr(addr: &str) -> bool {
    (1..=ADDR_MAX_LEN).contains(&addr.len())
        && addr
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'.' || b == b':')
}

/// Checks a deny list before it reaches Redis: 1-50 entries in each list, at least one in
/// all, and every entry able to match: a user id as a JWT's `sub` must be, an address as
/// `spin-client-addr` gives one.
pub fn check_deny_list(list: &DenyList) -> Result<(), Error> {
    let refuse = |message: String| Err(Error::invalid(ErrorCode::InvalidDenyList, message));
    if list.users.is_empty() && list.addrs.is_empty() {
        return refuse("give at least one user or addr".into());
    }
    if list.users.len() > DENY_MAX_EACH || list.addrs.len() > DENY_MAX_EACH {
        return refuse(format!(
            "give at most {DENY_MAX_EACH} users and {DENY_MAX_EACH} addrs"
        ));
    }
    if !list.users.iter().all(|u| auth::check_user_id(u).is_ok()) {
        return refuse("users are 1-128 printable ASCII characters without spaces".into());
    }
    if !list.addrs.iter().all(|a| is_addr(a)) {
        return refuse(format!(
            "addrs are IP addresses: 1-{ADDR_MAX_LEN} of 0-9, a-f, A-F, '.' and ':'"
        ));
    }
    Ok(())
}

/// Adds to an event's deny lists ([`check_deny_list`] first).
pub fn deny(store: &impl Store, event: &EventId, list: &DenyList) -> Result<(), Error> {
    check_deny_list(list)?;
    Ok(scripts::deny::run(
        store,
        &EventKeys::new(event),
        &list.users,
        &list.addrs,
    )?)
}

/// Winners drawn per script call: small enough that no call blocks Redis for long.
pub const DRAW_PAGE: u32 = 5_000;

/// Runs the lottery draw, `page` winners per script call; returns how many were admitted.
/// A draw cut short (a lost connection) resumes where it stopped when called again.
pub fn draw(store: &impl Store, event: &EventId, page: u32) -> Result<u64, Error> {
    let k = EventKeys::new(event);
    loop {
        let drawn = scripts::draw::run(store, &k, page)?;
        if drawn.done {
            return Ok(drawn.winners);
        }
    }
}

/// An event's state, for the operator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventStatus {
    /// The configuration hash as stored (strings).
    pub config: BTreeMap<String, String>,
    /// Units left per shard.
    pub stock_by_shard: Vec<i64>,
    /// Units left in all.
    pub stock_left: i64,
    /// Orders accepted.
    pub sold: i64,
    /// Orders drained into Postgres.
    pub drained: i64,
    /// Accepted orders on their way to Postgres: sold − drained − dead orders.
    pub queued: i64,
    /// Accepted orders that could not land (the dead-letter stream): an operator's job.
    pub dead_letters: i64,
    /// Entries the order stream holds (acknowledged ones are trimmed by the drain).
    pub stream_length: i64,
    /// Admission tokens handed out.
    pub admitted: i64,
    /// Lottery registrants.
    pub registrants: i64,
    /// Orders paid (as mirrored in Redis by pay).
    pub paid: i64,
    /// Unpaid orders expired by timeout-release, their units back on sale.
    pub expired: i64,
    /// Requests the sale's scripts refused, by the API error code they were answered with
    /// (input errors refused before Redis — malformed requests, bad JWTs — are not counted).
    pub refusals: BTreeMap<&'static str, i64>,
}

impl EventStatus {
    /// Nothing yet: the start of a sum over shards.
    pub(crate) fn empty() -> Self {
        EventStatus {
            config: BTreeMap::new(),
            stock_by_shard: Vec::new(),
            stock_left: 0,
            sold: 0,
            drained: 0,
            queued: 0,
            dead_letters: 0,
            stream_length: 0,
            admitted: 0,
            registrants: 0,
            paid: 0,
            expired: 0,
            refusals: BTreeMap::new(),
        }
    }

    /// Takes `paid`, `expired` and the refusals from a counts hash.
    pub(crate) fn set_counts(&mut self, counts: &BTreeMap<String, i64>) {
        self.paid = counts.get("paid").copied().unwrap_or(0);
        self.expired = counts.get("expired").copied().unwrap_or(0);
        self.refusals = refusals_by_code(counts);
    }
}

/// Reads an event's state in one script.
pub fn status(store: &impl Store, event: &EventId) -> Result<EventStatus, Error> {
    let raw = scripts::status::run(store, &EventKeys::new(event))?;
    Ok(EventStatus {
        config: raw.config,
        stock_left: raw.stock_by_shard.iter().sum(),
        stock_by_shard: raw.stock_by_shard,
        sold: raw.sold,
        drained: raw.drained,
        queued: (raw.sold - raw.drained - raw.dead_orders).max(0),
        dead_letters: raw.dead_letters,
        stream_length: raw.stream_length,
        admitted: raw.admitted,
        registrants: raw.registrants,
        paid: raw.counts.get("paid").copied().unwrap_or(0),
        expired: raw.counts.get("expired").copied().unwrap_or(0),
        refusals: refusals_by_code(&raw.counts),
    })
}

/// The counts hash's refusal fields (reply codes) under the API codes they are answered with.
fn refusals_by_code(counts: &BTreeMap<String, i64>) -> BTreeMap<&'static str, i64> {
    let mut refusals = BTreeMap::new();
    for (field, n) in counts {
        if let Some(refusal) = field.parse().ok().and_then(Refusal::of_code) {
            *refusals
                .entry(Error::from(refusal).code().as_str())
                .or_default() += n;
        }
    }
    refusals
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(users: &[&str], addrs: &[&str]) -> DenyList {
        DenyList {
            users: users.iter().map(|s| s.to_string()).collect(),
            addrs: addrs.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn refusal(list: &DenyList) -> String {
        match check_deny_list(list) {
            Err(Error::Invalid { code, message }) => {
                assert_eq!(code, ErrorCode::InvalidDenyList);
                message
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn deny_lists_hold_entries_that_can_match() {
        let longest_user = "\"".repeat(128);
        let longest_addr = "0000:0000:0000:0000:0000:ffff:255.255.255.255";
        assert_eq!(longest_addr.len(), ADDR_MAX_LEN);
        for ok in [
            list(&["bot-1138"], &[]),
            list(&[], &["203.0.113.7", "2001:db8::42", "::1"]),
            list(&[&longest_user], &[longest_addr]),
        ] {
            assert!(check_deny_list(&ok).is_ok(), "{ok:?}");
        }
        // The one rule across both lists, listed in api/openapi.yaml's DenyList.
        let empty = refusal(&list(&[], &[]));
        assert_eq!(empty, "give at least one user or addr");
        assert!(crate::event::tests::refused_beyond_schema().contains(&empty));
        for bad_user in ["", "a b", "caf\u{e9}", &"x".repeat(129), "tab\there"] {
            assert!(
                refusal(&list(&[bad_user], &[])).starts_with("users are"),
                "{bad_user:?}"
            );
        }
        for bad_addr in ["", "10.0.0.1:80x", "[::1]", "host.example", &"1".repeat(46)] {
            assert!(
                refusal(&list(&[], &[bad_addr])).starts_with("addrs are"),
                "{bad_addr:?}"
            );
        }
    }

    #[test]
    fn any_valid_deny_list_fits_the_body_limit() {
        let users: Vec<String> = vec!["\"".repeat(128); DENY_MAX_EACH];
        let addrs: Vec<String> =
            vec!["0000:0000:0000:0000:0000:ffff:255.255.255.255".into(); DENY_MAX_EACH];
        let full = DenyList { users, addrs };
        assert!(check_deny_list(&full).is_ok());
        // The edge refuses bodies over 16 KiB (seckill_spin_edge::http::MAX_BODY_BYTES).
        let body = serde_json::to_vec(&full).unwrap();
        assert_eq!(body.len(), 15_371, "the arithmetic at DENY_MAX_EACH");
        assert!(body.len() <= 16 * 1024);
        let mut over = full.clone();
        over.users.push("one-more".into());
        assert_eq!(refusal(&over), "give at most 50 users and 50 addrs");
        let mut over = full;
        over.addrs.push("10.0.0.1".into());
        assert_eq!(refusal(&over), "give at most 50 users and 50 addrs");
    }
}
