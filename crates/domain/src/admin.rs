//! What an operator does: create and update events, warm up stock, flip switches and limits,
//! deny users and addresses, run the lottery draw, read an event's state. An event's master
//! configuration lives in its own slot, a copy in every shard's slot ([`crate::sharded`]), each
//! write stamped with one `version`, so a change cut short shows ([`Status::versions_agree`])
//! and is finished by repeating it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorCode};
use crate::event::{EventConfig, EventId, Switches};
use crate::keys::{MasterKeys, OrderStatus};
use crate::net::Cidr;
use crate::nodes::Nodes;
use crate::scripts::{self, Refusal, ScriptError, warmup};
use crate::sharded::EventShards;
use crate::sql::Sql;
use crate::store::Store;
use crate::{auth, clock, ids};

/// The result of a warm-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warmed {
    /// Units written.
    pub stock: u64,
    /// Over this many shards.
    pub shards: u32,
}

/// Users and client addresses to keep out of an event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenyList {
    /// User ids (the JWT `sub`: 1-128 printable ASCII characters, no spaces).
    #[serde(default)]
    pub users: Vec<String>,
    /// Client addresses and ranges ([`Cidr`]: `a.b.c.d/n`, `v6/n`, or one address).
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
/// addrs: 50 × (49 characters + 2 quotes) + 49 commas = 50 × 51 + 49 =  2,599 bytes
/// in all                                                            15,571 bytes of 16,384
/// ```
///
/// which leaves 813 bytes for whitespace.
pub const DENY_MAX_EACH: usize = 50;

/// The longest range: an IPv4-mapped IPv6 address written out in full, with a prefix
/// (`0000:0000:0000:0000:0000:ffff:255.255.255.255/128`).
pub const ADDR_MAX_LEN: usize = 49;

/// Checks a deny list before it reaches Redis: 1-50 entries in each list, at least one in
/// all, and every entry able to match: a user id as a JWT's `sub` must be, an address or range
/// as [`Cidr`] parses one (at most [`ADDR_MAX_LEN`] characters). Returns the ranges.
pub fn check_deny_list(list: &DenyList) -> Result<Vec<Cidr>, Error> {
    let refuse = |message: String| Error::invalid(ErrorCode::InvalidDenyList, message);
    if list.users.is_empty() && list.addrs.is_empty() {
        return Err(refuse("give at least one user or addr".into()));
    }
    if list.users.len() > DENY_MAX_EACH || list.addrs.len() > DENY_MAX_EACH {
        return Err(refuse(format!(
            "give at most {DENY_MAX_EACH} users and {DENY_MAX_EACH} addrs"
        )));
    }
    if !list.users.iter().all(|u| auth::check_user_id(u).is_ok()) {
        return Err(refuse(
            "users are 1-128 printable ASCII characters without spaces".into(),
        ));
    }
    list.addrs
        .iter()
        .map(|a| match a.parse::<Cidr>() {
            Ok(net) if a.len() <= ADDR_MAX_LEN => Ok(net),
            // One message for every bad entry: the API lists it (`x-refused-beyond-schema`).
            _ => Err(refuse(format!(
                "addrs are IP addresses or CIDR ranges (a.b.c.d/n, v6/n) of at most \
                 {ADDR_MAX_LEN} characters"
            ))),
        })
        .collect()
}

/// Winners drawn per script call: small enough that no call blocks Redis for long.
pub const DRAW_PAGE: u32 = 5_000;

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
    /// Refusals the limits in shadow mode would have made, by limit (`gray`, `user`, `global`):
    /// counted, not answered.
    pub shadowed: BTreeMap<String, i64>,
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
            shadowed: BTreeMap::new(),
        }
    }

    /// Takes `paid`, `expired` and the refusals from a counts hash.
    pub(crate) fn set_counts(&mut self, counts: &BTreeMap<String, i64>) {
        let count = |status: OrderStatus| counts.get(status.as_str()).copied().unwrap_or(0);
        self.paid = count(OrderStatus::Paid);
        self.expired = count(OrderStatus::Expired);
        self.refusals = refusals_by_code(counts);
        self.shadowed = counts
            .iter()
            .filter_map(|(field, n)| Some((field.strip_prefix("shadow_")?.to_owned(), *n)))
            .collect();
    }
}

/// A configuration field list.
type Fields = Vec<(&'static str, String)>;

/// A new version stamp: time-ordered, unique without coordination.
fn new_version() -> String {
    ids::new_order_id(clock::now_ms())
}

/// The master's fields as shard `shard` of `shards` holds them: its index, its part of the
/// admission cap (`multiplier × stock` split exactly: the first `cap % shards` shards admit one
/// more) and of the event-wide buckets, the buy bucket and each address's admission bucket
/// (each shard refills `rate / shards`, holds `burst / shards` rounded up, at least 1). Each
/// part binds the buyers homed on that shard, which the home hash spreads evenly; a crowd that
/// all hashes to one shard is admitted up to that shard's part only.
fn shard_fields(fields: &Fields, shard: u32, shards: u32) -> Fields {
    let get = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    };
    let n = f64::from(shards);
    let mut out: Fields = fields
        .iter()
        .filter(|(name, _)| !BUCKETS.iter().any(|(r, b)| name == r || name == b))
        .cloned()
        .collect();
    out.push(("shard", shard.to_string()));
    if let (Some(stock), Some(mult)) = (get("stock"), get("admission_multiplier")) {
        let cap = stock.parse::<u64>().unwrap_or(0) * mult.parse::<u64>().unwrap_or(1);
        let part = cap / u64::from(shards) + u64::from(u64::from(shard) < cap % u64::from(shards));
        out.push(("admission_cap", part.to_string()));
    }
    for (rate_name, burst_name) in BUCKETS {
        if let (Some(rate), Some(burst)) = (get(rate_name), get(burst_name)) {
            let (rate, burst): (f64, f64) =
                (rate.parse().unwrap_or(0.0), burst.parse().unwrap_or(0.0));
            out.push((rate_name, (rate / n).to_string()));
            out.push((burst_name, (burst / n).ceil().max(1.0).to_string()));
        }
    }
    out
}

/// The event-wide token buckets each shard holds a part of: (rate field, burst field).
const BUCKETS: [(&str, &str); 2] = [
    ("buy_rate", "buy_burst"),
    ("admission_addr_rate", "admission_addr_burst"),
];

/// Creates or updates a sharded event: registered, then the master, then every shard's copy,
/// all with one new version. Returns whether it was created, and its shard count (the
/// config's, at most one per unit of stock: [`EventConfig::shard_count`]).
pub fn upsert_event<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    config: &EventConfig,
) -> Result<(bool, u32), Error> {
    config.validate()?;
    let e = EventShards::new(nodes, event, config.shard_count());
    let (store, k) = e.master()?;
    scripts::register_event::run(store, event)?;
    let mut fields = config.fields();
    fields.push(("version", new_version()));
    let created = scripts::upsert_event::run(store, &k, fields.clone())?;
    for s in e.all() {
        let (store, k) = e.slot(s)?;
        scripts::upsert_event::run(store, &k, shard_fields(&fields, s, e.shards()))?;
    }
    // One more live event (or a new shard count, or a new end): the global bucket's parts.
    crate::global_limit::respread(nodes, clock::now_ms())?;
    Ok((created, e.shards()))
}

/// An event's configuration as an operator's write left it: whether the write created the
/// event, its shard count, and the master's configuration before (none for a new event) and
/// after, for the audit and the config center.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configured {
    /// The event did not exist before.
    pub created: bool,
    /// Its shard count.
    pub shards: u32,
    /// The configuration before the write.
    pub before: Option<Config>,
    /// The configuration after it.
    pub after: Option<Config>,
}

/// Creates or updates `event` with `config` ([`upsert_event`], which refuses an invalid one
/// before it writes anything), reading its configuration before and after.
pub fn configure<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    config: &EventConfig,
) -> Result<Configured, Error> {
    let before = self::config(nodes, event)?;
    let (created, shards) = upsert_event(nodes, event, config)?;
    Ok(Configured {
        created,
        shards,
        before,
        after: self::config(nodes, event)?,
    })
}

/// Applies version `version` of `event`'s configuration again, as a new version: read from
/// the config center ([`crate::versions::config_at`]), then [`configure`]d.
pub fn roll_back<S: Store>(
    nodes: &Nodes<S>,
    db: &impl Sql,
    event: &EventId,
    version: i64,
) -> Result<Configured, Error> {
    let config = crate::versions::config_at(db, event, version)?;
    configure(nodes, event, &config)
}

/// Writes each shard's part of the stock (the first `stock % shards` shards hold one more),
/// then marks the master warmed. Repeating it finishes a warm-up cut short.
pub fn warm_up<S: Store>(nodes: &Nodes<S>, event: &EventId) -> Result<Warmed, Error> {
    let (e, config) = EventShards::open(nodes, event)?;
    let stock: u64 = config
        .get("stock")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let n = u64::from(e.shards());
    let mut already = true;
    let mut held = Vec::new();
    for s in e.all() {
        let units = stock / n + u64::from(u64::from(s) < stock % n);
        let (store, k) = e.slot(s)?;
        let warmed = warmup::run(store, &k, units)?;
        already &= warmed.already;
        held.push(warmed.units);
    }
    // The storefront reads units left from the event's own slot (the drain keeps it current).
    crate::sharded::transfer::summarize(&e, &held)?;
    let (store, k) = e.master()?;
    if already && config.get("warmed").is_some_and(|w| w == "1") {
        return Err(Refusal::Conflict.into());
    }
    scripts::set_fields::run(store, &k, vec![("warmed", "1".into())])?;
    Ok(Warmed {
        stock,
        shards: e.shards(),
    })
}

/// An event's configuration hash, as its master holds it (strings).
pub type Config = BTreeMap<String, String>;

/// The master's configuration, `None` when there is no such event (one HGETALL).
pub fn config<S: Store>(nodes: &Nodes<S>, event: &EventId) -> Result<Option<Config>, Error> {
    match scripts::read_config::run(nodes.for_event(event)?, &MasterKeys::new(event)) {
        Ok(config) => Ok(Some(config)),
        Err(ScriptError::Refused(Refusal::NotFound)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A configuration before and after a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// As the change read it.
    pub before: Config,
    /// What the change made of it: the fields it wrote over what it read.
    pub after: Config,
}

/// Applies live switches and limits to the master and every shard, with a new version; returns
/// the master's configuration before and after (the one read it makes anyway, and the fields
/// it wrote: no read more).
pub fn set_switches<S: Store>(
    nodes: &Nodes<S>,
    event: &EventId,
    switches: &Switches,
) -> Result<Changed, Error> {
    let mut fields = switches.fields()?;
    fields.push(("version", new_version()));
    let (e, before) = EventShards::open(nodes, event)?;
    let (store, k) = e.master()?;
    scripts::set_fields::run(store, &k, fields.clone())?;
    for s in e.all() {
        let (store, k) = e.slot(s)?;
        let mut f = shard_fields(&fields, s, e.shards());
        f.retain(|(name, _)| *name != "shard");
        scripts::set_fields::run(store, &k, f)?;
    }
    let mut after = before.clone();
    after.extend(fields.into_iter().map(|(name, v)| (name.to_owned(), v)));
    Ok(Changed { before, after })
}

/// Adds to the deny lists of every shard (each buyer is checked at home).
pub fn deny<S: Store>(nodes: &Nodes<S>, event: &EventId, list: &DenyList) -> Result<(), Error> {
    let nets = check_deny_list(list)?;
    let (e, _) = EventShards::open(nodes, event)?;
    for s in e.all() {
        let (store, k) = e.slot(s)?;
        scripts::deny::run(store, &k, &list.users, &nets)?;
    }
    Ok(())
}

/// Runs the lottery draw: multiplier × stock winners (or every registrant, if fewer) drawn
/// uniformly from the registrants of all shards, `page` per script call. First every shard
/// closes its registration (`drawing`), which fixes each shard's pool (its registrants, the
/// drawn ones included: a draw only moves users to the admitted). Then [`lottery_quotas`]
/// allots the winners to the shards as a uniform draw over the union would, and each shard
/// pops its quota at random. The allotment is a function of the event and the pools, so a
/// draw cut short and repeated (or run twice at once) allots the same; each shard keeps its
/// first quota anyway.
pub fn draw<S: Store>(nodes: &Nodes<S>, event: &EventId, page: u32) -> Result<u64, Error> {
    let (e, config) = EventShards::open(nodes, event)?;
    let field = |name: &str| config.get(name).map(String::as_str);
    if field("admission_mode") != Some("lottery") || field("drawn") == Some("1") {
        return Err(Refusal::Conflict.into());
    }
    let number = |name: &str| field(name).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let mut pools = Vec::new();
    for s in e.all() {
        let (store, k) = e.slot(s)?;
        scripts::set_fields::run(store, &k, vec![("drawing", "1".into())])?;
        // Registrants as status counts them while drawing: the drawn ones included.
        pools.push(scripts::status::run(store, &k)?.registrants as u64);
    }
    let wanted = number("stock") * number("admission_multiplier").max(1);
    let quotas = lottery_quotas(event, &pools, wanted);
    let mut winners = 0;
    for (s, quota) in e.all().zip(quotas) {
        let (store, k) = e.slot(s)?;
        loop {
            match scripts::draw::run(store, &k, page, quota) {
                Ok(drawn) if drawn.done => {
                    winners += drawn.winners;
                    break;
                }
                Ok(_) => {}
                // Drawn by a call cut short after this shard: its winners stand.
                Err(ScriptError::Refused(Refusal::Conflict)) => {
                    winners += scripts::status::run(store, &k)?.admitted as u64;
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    let (store, k) = e.master()?;
    scripts::set_fields::run(store, &k, vec![("drawn", "1".into())])?;
    Ok(winners)
}

/// How many of `wanted` winners each shard gets when they are drawn uniformly from the union of
/// the shards' pools (`pools[s]` users each; every registrant if fewer): a multivariate
/// hypergeometric draw, shard by shard (shard s's count is hypergeometric given what the shards
/// before it took). Each registrant's chance is the same whichever shard is their home. Seeded
/// by the event and the pools, so every call for the same draw answers the same.
pub fn lottery_quotas(event: &EventId, pools: &[u64], wanted: u64) -> Vec<u64> {
    use rand_distr::{Distribution, Hypergeometric};
    use rand_pcg::{Pcg64, rand_core::SeedableRng};

    let sizes: Vec<String> = pools.iter().map(u64::to_string).collect();
    let mut parts = vec![event.as_str(), "lottery"];
    parts.extend(sizes.iter().map(String::as_str));
    let mut rng = Pcg64::seed_from_u64(ids::hash64(&parts));
    let mut population: u64 = pools.iter().sum();
    let mut left = wanted.min(population);
    pools
        .iter()
        .map(|&pool| {
            let taken = Hypergeometric::new(population, pool, left)
                .map(|law| law.sample(&mut rng))
                .unwrap_or(0);
            population -= pool;
            left -= taken;
            taken
        })
        .collect()
}

/// A sharded event's state: the sums over shards, and what only shards have.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Status {
    /// The sums, as for an event in one slot (`stock_by_shard` from each shard's slot).
    #[serde(flatten)]
    pub event: EventStatus,
    /// Every shard holds the master's configuration version: no change was cut short.
    pub versions_agree: bool,
}

/// Reads the master and every shard (one script each) and sums them.
pub fn status<S: Store>(nodes: &Nodes<S>, event: &EventId) -> Result<Status, Error> {
    let (e, config) = EventShards::open(nodes, event)?;
    let mut sum = EventStatus {
        config: config.clone(),
        ..EventStatus::empty()
    };
    let mut counts = BTreeMap::new();
    let mut versions_agree = true;
    for s in e.all() {
        let (store, k) = e.slot(s)?;
        let raw = scripts::status::run(store, &k).map_err(|e| match e {
            ScriptError::Refused(Refusal::NotFound) => Error::bug(format!(
                "shard {s} of {} has no configuration",
                event.as_str()
            )),
            e => e.into(),
        })?;
        versions_agree &= raw.config.get("version") == config.get("version");
        sum.stock_by_shard.push(raw.stock);
        sum.sold += raw.sold;
        sum.drained += raw.drained;
        sum.dead_letters += raw.dead_letters;
        sum.stream_length += raw.stream_length;
        sum.admitted += raw.admitted;
        sum.registrants += raw.registrants;
        sum.queued += (raw.sold - raw.drained - raw.dead_orders).max(0);
        for (field, n) in raw.counts {
            *counts.entry(field).or_insert(0) += n;
        }
    }
    sum.stock_left = sum.stock_by_shard.iter().sum();
    sum.set_counts(&counts);
    Ok(Status {
        event: sum,
        versions_agree,
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

    #[test]
    fn lottery_quotas_draw_exactly_the_winners_from_what_each_shard_has() {
        let event = EventId::parse("lucky").unwrap();
        for (pools, wanted, total) in [
            (vec![1, 0, 2, 0], 2, 2),
            (vec![3, 3], 100, 6),
            (vec![0, 0], 5, 0),
            (vec![400_000, 350_000, 250_000], 600_000, 600_000),
        ] {
            let quotas = lottery_quotas(&event, &pools, wanted);
            assert_eq!(quotas.iter().sum::<u64>(), total, "{pools:?}");
            assert!(quotas.iter().zip(&pools).all(|(q, p)| q <= p), "{quotas:?}");
            assert_eq!(quotas, lottery_quotas(&event, &pools, wanted), "repeatable");
        }
    }

    #[test]
    fn every_registrant_has_the_same_chance_whichever_their_shard() {
        // Over many draws, shard s's mean quota is wanted × pool_s / total: a uniform draw
        // over the union, not the even split of the cap that strands winners on empty shards.
        let (pools, wanted, draws) = ([10u64, 0, 30, 60], 20u64, 4000);
        let mut sums = [0u64; 4];
        for d in 0..draws {
            let event = EventId::parse(&format!("e{d}")).unwrap();
            for (sum, q) in sums.iter_mut().zip(lottery_quotas(&event, &pools, wanted)) {
                *sum += q;
            }
        }
        for (s, pool) in pools.iter().enumerate() {
            let mean = sums[s] as f64 / f64::from(draws);
            let expected = (wanted * pool) as f64 / 100.0;
            assert!(
                (mean - expected).abs() < 0.15,
                "shard {s}: {mean} vs {expected}"
            );
        }
    }

    #[test]
    fn each_shard_holds_its_exact_part_of_the_admission_cap_and_the_event_wide_buckets() {
        let fields: Fields = vec![
            ("stock", "10".into()),
            ("admission_multiplier", "3".into()),
            ("buy_rate", "100".into()),
            ("buy_burst", "10".into()),
            ("admission_addr_rate", "20".into()),
            ("admission_addr_burst", "200".into()),
        ];
        let parts: Vec<Fields> = (0..4).map(|s| shard_fields(&fields, s, 4)).collect();
        let field = |f: &Fields, name: &str| f.iter().find(|(n, _)| *n == name).unwrap().1.clone();
        let caps: Vec<u64> = parts
            .iter()
            .map(|f| field(f, "admission_cap").parse().unwrap())
            .collect();
        assert_eq!(caps, [8, 8, 7, 7], "30 split exactly");
        for (s, f) in parts.iter().enumerate() {
            assert_eq!(field(f, "shard"), s.to_string());
            assert_eq!(
                (field(f, "buy_rate"), field(f, "buy_burst")),
                ("25".into(), "3".into())
            );
            // One address's admissions hold per event, not per shard its users home on.
            assert_eq!(
                (
                    field(f, "admission_addr_rate"),
                    field(f, "admission_addr_burst")
                ),
                ("5".into(), "50".into())
            );
            assert_eq!(
                field(f, "stock"),
                "10",
                "the event's stock, for the drain's ledger"
            );
        }
    }

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
        let longest_addr = "0000:0000:0000:0000:0000:ffff:255.255.255.255/128";
        assert_eq!(longest_addr.len(), ADDR_MAX_LEN);
        for ok in [
            list(&["bot-1138"], &[]),
            list(&[], &["203.0.113.7", "2001:db8::42", "::1"]),
            list(&[], &["198.51.100.0/24", "2001:db8::/32", "0.0.0.0/0"]),
            list(&[&longest_user], &[longest_addr]),
        ] {
            assert!(check_deny_list(&ok).is_ok(), "{ok:?}");
        }
        let nets = check_deny_list(&list(&[], &["198.51.100.9/24", "::ffff:10.0.0.1"])).unwrap();
        let shown: Vec<String> = nets.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["198.51.100.0/24", "10.0.0.1/32"],
            "canonical ranges"
        );
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
        let too_long = "0000:0000:0000:0000:0000:ffff:255.255.255.255/0128";
        for bad_addr in [
            "",
            "10.0.0.1:80x",
            "[::1]",
            "host.example",
            &"1".repeat(46),
            "10.0.0.0/33",
            "10.0.0.0/",
            "2001:db8::/129",
            too_long,
        ] {
            let message = refusal(&list(&[], &[bad_addr]));
            assert!(
                crate::event::tests::refused_beyond_schema().contains(&message),
                "{bad_addr:?}: {message:?} is not listed in api/openapi.yaml"
            );
        }
    }

    #[test]
    fn any_valid_deny_list_fits_the_body_limit() {
        let users: Vec<String> = vec!["\"".repeat(128); DENY_MAX_EACH];
        let addrs: Vec<String> =
            vec!["0000:0000:0000:0000:0000:ffff:255.255.255.255/128".into(); DENY_MAX_EACH];
        let full = DenyList { users, addrs };
        assert!(check_deny_list(&full).is_ok());
        // The edge refuses bodies over 16 KiB (seckill_spin_edge::http::MAX_BODY_BYTES).
        let body = serde_json::to_vec(&full).unwrap();
        assert_eq!(body.len(), 15_571, "the arithmetic at DENY_MAX_EACH");
        assert!(body.len() <= 16 * 1024);
        let mut over = full.clone();
        over.users.push("one-more".into());
        assert_eq!(refusal(&over), "give at most 50 users and 50 addrs");
        let mut over = full;
        over.addrs.push("10.0.0.1".into());
        assert_eq!(refusal(&over), "give at most 50 users and 50 addrs");
    }
}
