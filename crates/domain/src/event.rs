//! Events: their ids and their configuration, validated before anything reaches Redis.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorCode};
use crate::json_integer;

/// An event id: 1–64 of `[A-Za-z0-9_-]`, safe inside Redis keys and URLs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventId(String);

impl EventId {
    /// Validates an id from a URL.
    pub fn parse(raw: &str) -> Result<Self, Error> {
        let ok = !raw.is_empty()
            && raw.len() <= 64
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(EventId(raw.to_owned()))
        } else {
            Err(Error::invalid(
                ErrorCode::BadEventId,
                "event ids are 1-64 of [A-Za-z0-9_-]",
            ))
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How admission tokens are handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AdmissionMode {
    /// First come, first served, up to multiplier × stock.
    #[default]
    Fcfs,
    /// Users register; an operator's draw admits multiplier × stock of them at random.
    Lottery,
}

impl AdmissionMode {
    fn as_str(self) -> &'static str {
        match self {
            AdmissionMode::Fcfs => "fcfs",
            AdmissionMode::Lottery => "lottery",
        }
    }
}

/// A limit precheck applies, which an event may put in shadow mode ([`EventConfig::shadow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The gray release's share of users.
    Gray,
    /// The per-user bucket.
    User,
    /// The shard's part of the global bucket, across events.
    Global,
}

impl Limit {
    /// Its name in the configuration and the counts.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Gray => "gray",
            Limit::User => "user",
            Limit::Global => "global",
        }
    }

    /// The `shadow` field of the configuration hash: the names, comma-separated.
    fn field(limits: &[Limit]) -> String {
        let mut names: Vec<&str> = limits.iter().map(|l| l.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.join(",")
    }
}

/// An event's configuration, as an operator sends it (`PUT /admin/events/{id}`). Field names
/// are the same in JSON and in the `{sk:E}:cfg` hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventConfig {
    /// The item on sale.
    pub sku: String,
    /// The price of one unit in the currency's smallest unit (cents), as Stripe's prices.
    #[serde(deserialize_with = "json_integer::number")]
    pub unit_amount: u64,
    /// The ISO 4217 code of the price's currency, in lowercase (`eur`), as Stripe's.
    pub currency: String,
    /// Units for sale.
    #[serde(deserialize_with = "json_integer::number")]
    pub stock: u64,
    /// Stock shards ([`SHARD_COUNTS`]), at most one per unit of stock ([`Self::shard_count`]).
    #[serde(
        default = "defaults::shards",
        deserialize_with = "json_integer::number"
    )]
    pub shards: u32,
    /// Sale opens (Unix ms, server clock).
    #[serde(deserialize_with = "json_integer::number")]
    pub start_ms: u64,
    /// Sale closes (Unix ms).
    #[serde(deserialize_with = "json_integer::number")]
    pub end_ms: u64,
    /// First come or lottery.
    #[serde(default)]
    pub admission_mode: AdmissionMode,
    /// Admission opens (Unix ms); 0: as soon as the event exists.
    #[serde(default, deserialize_with = "json_integer::number")]
    pub admission_opens_ms: u64,
    /// Leading zero bits of SHA-256 an admission's proof of work must show (0: no challenge).
    #[serde(
        default = "defaults::pow_difficulty",
        deserialize_with = "json_integer::number"
    )]
    pub pow_difficulty: u32,
    /// Admissions per second per client address (token-bucket refill, in each home shard);
    /// 0 = unlimited.
    #[serde(default = "defaults::admission_addr_rate")]
    pub admission_addr_rate: f64,
    /// Per-address admission bucket capacity.
    #[serde(
        default = "defaults::admission_addr_burst",
        deserialize_with = "json_integer::number"
    )]
    pub admission_addr_burst: u32,
    /// Admission tokens per unit of stock (10 → 2,000,000 tokens for 200,000 items).
    #[serde(
        default = "defaults::multiplier",
        deserialize_with = "json_integer::number"
    )]
    pub admission_multiplier: u32,
    /// Unpaid orders are released after this long.
    #[serde(
        default = "defaults::payment_timeout_s",
        deserialize_with = "json_integer::number"
    )]
    pub payment_timeout_s: u64,
    /// How long a purchase token from precheck stays valid.
    #[serde(
        default = "defaults::purchase_token_ttl_ms",
        deserialize_with = "json_integer::number"
    )]
    pub purchase_token_ttl_ms: u64,
    /// Prechecks per second per user (token-bucket refill); 0 = unlimited.
    #[serde(default = "defaults::user_rate")]
    pub user_rate: f64,
    /// Per-user bucket capacity.
    #[serde(
        default = "defaults::user_burst",
        deserialize_with = "json_integer::number"
    )]
    pub user_burst: u32,
    /// Buys per second for the whole event; 0 = unlimited.
    #[serde(default)]
    pub buy_rate: f64,
    /// Event-wide buy bucket capacity.
    #[serde(default, deserialize_with = "json_integer::number")]
    pub buy_burst: u32,
    /// The operator's on/off switch.
    #[serde(default = "defaults::enabled")]
    pub enabled: bool,
    /// Expected drain throughput (orders/s), for poll's wait estimate.
    #[serde(
        default = "defaults::drain_rate",
        deserialize_with = "json_integer::number"
    )]
    pub drain_rate: u32,
    /// Gray release: the share of users (0-100 %, by a stable hash of event and user,
    /// [`crate::ids::gray_bucket`]) who may pass precheck; raising it lets more in, live.
    #[serde(
        default = "defaults::gray_percent",
        deserialize_with = "json_integer::number"
    )]
    pub gray_percent: u32,
    /// Limits counted but not enforced: a refusal they would make is counted (`shadow_<limit>`
    /// in the counts) and the request goes on, so a new limit is tried on live traffic first.
    #[serde(default)]
    pub shadow: Vec<Limit>,
}

/// The shard count of an event that names none.
pub const DEFAULT_SHARDS: u32 = 8;

/// The shard counts an event may have, and a buyer may hint (`?shards=`).
pub const SHARD_COUNTS: std::ops::RangeInclusive<u32> = 1..=256;

/// The proof-of-work difficulty of an event that names none (leading zero bits): about a
/// second (median) in the storefront's Web Worker in Chromium on a 2-core server
/// (`tests/browser/pow-bench.mjs`), 2^20 hashes a bot pays per admission.
pub const DEFAULT_POW_DIFFICULTY: u32 = 20;

/// The hardest proof of work an event may ask (2^24 hashes: many seconds on a phone).
pub const MAX_POW_DIFFICULTY: u32 = 24;

mod defaults {
    pub fn shards() -> u32 {
        super::DEFAULT_SHARDS
    }
    pub fn multiplier() -> u32 {
        10
    }
    pub fn payment_timeout_s() -> u64 {
        900
    }
    pub fn purchase_token_ttl_ms() -> u64 {
        60_000
    }
    pub fn user_rate() -> f64 {
        1.0
    }
    pub fn user_burst() -> u32 {
        5
    }
    pub fn enabled() -> bool {
        true
    }
    pub fn drain_rate() -> u32 {
        20_000
    }
    pub fn gray_percent() -> u32 {
        100
    }
    pub fn pow_difficulty() -> u32 {
        super::DEFAULT_POW_DIFFICULTY
    }
    /// A crowd behind one address (a campus, a carrier's NAT) is admitted 200 at once, then 20
    /// a second: 72,000 an hour, each one still solving its own proof of work.
    pub fn admission_addr_rate() -> f64 {
        20.0
    }
    pub fn admission_addr_burst() -> u32 {
        200
    }
}

/// The latest time an event may name, Unix ms: the end of year 9999. Times go through the Lua
/// scripts, whose numbers are doubles; this is far below 2^53, so none is ever rounded (or,
/// returned to Redis as an integer, overflowed).
pub const MAX_TIME_MS: u64 = 253_402_300_799_999;

/// `ms` as field `name` may hold it.
fn check_time(name: &str, ms: u64) -> Result<(), Error> {
    match ms <= MAX_TIME_MS {
        true => Ok(()),
        false => Err(invalid(format!(
            "{name} must be at most {MAX_TIME_MS} (the end of year 9999)"
        ))),
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid(ErrorCode::InvalidConfig, message)
}

fn is_currency(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_lowercase())
}

fn check_pow_difficulty(bits: u32) -> Result<(), Error> {
    if bits > MAX_POW_DIFFICULTY {
        return Err(invalid(format!(
            "pow_difficulty must be 0-{MAX_POW_DIFFICULTY}"
        )));
    }
    Ok(())
}

fn check_gray_percent(percent: u32) -> Result<(), Error> {
    if percent > 100 {
        return Err(invalid("gray_percent must be 0-100"));
    }
    Ok(())
}

pub(crate) fn check_limit(name: &str, rate: f64, burst: u32) -> Result<(), Error> {
    // 0 disables the limit; otherwise at least one token per 1000 s keeps bucket TTLs sane.
    if !rate.is_finite() || rate < 0.0 || (rate > 0.0 && rate < 0.001) || rate > 1e9 {
        return Err(invalid(format!(
            "{name}_rate must be 0 (unlimited) or 0.001-1e9"
        )));
    }
    if rate > 0.0 && burst == 0 {
        return Err(invalid(format!(
            "{name}_burst must be >= 1 when {name}_rate > 0"
        )));
    }
    Ok(())
}

impl EventConfig {
    /// Checks every field; nothing invalid reaches Redis.
    pub fn validate(&self) -> Result<(), Error> {
        // Characters, as JSON Schema's `maxLength` counts them (api/openapi.yaml).
        if self.sku.is_empty() || self.sku.chars().count() > 128 {
            return Err(invalid("sku must be 1-128 characters"));
        }
        // Postgres cannot store NUL in text: such a sku would make every order a dead letter.
        if self.sku.chars().any(char::is_control) {
            return Err(invalid("sku must not contain control characters"));
        }
        if self.unit_amount == 0 || self.unit_amount > 99_999_999_999 {
            return Err(invalid(
                "unit_amount must be 1-99999999999 (smallest currency unit)",
            ));
        }
        if !is_currency(&self.currency) {
            return Err(invalid(
                "currency must be a three-letter ISO 4217 code in lowercase (eur)",
            ));
        }
        if self.stock > 1_000_000_000 {
            return Err(invalid("stock must be <= 1e9"));
        }
        if !SHARD_COUNTS.contains(&self.shards) {
            return Err(invalid(format!(
                "shards must be {}-{}",
                SHARD_COUNTS.start(),
                SHARD_COUNTS.end()
            )));
        }
        check_time("start_ms", self.start_ms)?;
        check_time("end_ms", self.end_ms)?;
        check_time("admission_opens_ms", self.admission_opens_ms)?;
        if self.start_ms >= self.end_ms {
            return Err(invalid("start_ms must be before end_ms"));
        }
        if !(1..=1000).contains(&self.admission_multiplier) {
            return Err(invalid("admission_multiplier must be 1-1000"));
        }
        if !(1_000..=600_000).contains(&self.purchase_token_ttl_ms) {
            return Err(invalid("purchase_token_ttl_ms must be 1000-600000"));
        }
        if !(1..=86_400).contains(&self.payment_timeout_s) {
            return Err(invalid("payment_timeout_s must be 1-86400"));
        }
        check_pow_difficulty(self.pow_difficulty)?;
        check_gray_percent(self.gray_percent)?;
        check_limit("user", self.user_rate, self.user_burst)?;
        check_limit("buy", self.buy_rate, self.buy_burst)?;
        check_limit(
            "admission_addr",
            self.admission_addr_rate,
            self.admission_addr_burst,
        )?;
        Ok(())
    }

    /// The shards the event gets: `shards`, but never more than its stock (and at least one).
    /// A shard beyond the stock would start empty, and a buyer homed there could only buy
    /// through the tail; with at most one shard per unit, warm-up gives every shard a unit.
    pub fn shard_count(&self) -> u32 {
        self.shards
            .min(u32::try_from(self.stock).unwrap_or(u32::MAX))
            .max(1)
    }

    /// The `{sk:E}:cfg` fields, in HSET order.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("sku", self.sku.clone()),
            ("unit_amount", self.unit_amount.to_string()),
            ("currency", self.currency.clone()),
            ("stock", self.stock.to_string()),
            ("shards", self.shard_count().to_string()),
            ("start_ms", self.start_ms.to_string()),
            ("end_ms", self.end_ms.to_string()),
            ("admission_mode", self.admission_mode.as_str().to_owned()),
            (
                "admission_multiplier",
                self.admission_multiplier.to_string(),
            ),
            ("admission_opens_ms", self.admission_opens_ms.to_string()),
            ("pow_difficulty", self.pow_difficulty.to_string()),
            ("admission_addr_rate", self.admission_addr_rate.to_string()),
            (
                "admission_addr_burst",
                self.admission_addr_burst.to_string(),
            ),
            ("payment_timeout_s", self.payment_timeout_s.to_string()),
            (
                "purchase_token_ttl_ms",
                self.purchase_token_ttl_ms.to_string(),
            ),
            ("user_rate", self.user_rate.to_string()),
            ("user_burst", self.user_burst.to_string()),
            ("buy_rate", self.buy_rate.to_string()),
            ("buy_burst", self.buy_burst.to_string()),
            ("enabled", if self.enabled { "1" } else { "0" }.to_owned()),
            ("drain_rate", self.drain_rate.to_string()),
            ("gray_percent", self.gray_percent.to_string()),
            ("shadow", Limit::field(&self.shadow)),
        ]
    }

    /// The configuration a `{sk:E}:cfg` hash holds: the inverse of [`EventConfig::fields`]
    /// (the hash's other fields, its state, are left out). `None` when the hash is not a
    /// valid configuration.
    pub fn from_fields(hash: &BTreeMap<String, String>) -> Option<EventConfig> {
        use serde_json::Value;
        let mut json = serde_json::Map::new();
        for (name, _) in Self::example().fields() {
            let Some(raw) = hash.get(name) else { continue };
            let value = match name {
                "sku" | "currency" | "admission_mode" => Value::String(raw.clone()),
                "enabled" => Value::Bool(raw == "1"),
                "shadow" => raw
                    .split(',')
                    .filter(|n| !n.is_empty())
                    .map(|n| Value::String(n.to_owned()))
                    .collect(),
                _ => serde_json::from_str(raw).ok()?,
            };
            json.insert(name.to_owned(), value);
        }
        serde_json::from_value(Value::Object(json)).ok()
    }

    /// A configuration with every field, for its field names.
    fn example() -> EventConfig {
        EventConfig {
            sku: String::new(),
            unit_amount: 0,
            currency: String::new(),
            stock: 0,
            shards: 1,
            start_ms: 0,
            end_ms: 0,
            admission_mode: AdmissionMode::Fcfs,
            admission_opens_ms: 0,
            pow_difficulty: 0,
            admission_addr_rate: 0.0,
            admission_addr_burst: 0,
            admission_multiplier: 1,
            payment_timeout_s: 0,
            purchase_token_ttl_ms: 0,
            user_rate: 0.0,
            user_burst: 0,
            buy_rate: 0.0,
            buy_burst: 0,
            enabled: true,
            drain_rate: 0,
            gray_percent: 0,
            shadow: Vec::new(),
        }
    }
}

/// Live changes an operator may make during a sale (`PATCH /admin/events/{id}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Switches {
    /// Open or pause the sale.
    pub enabled: Option<bool>,
    /// Move the end.
    #[serde(default, deserialize_with = "json_integer::optional")]
    pub end_ms: Option<u64>,
    /// Per-user precheck limit.
    pub user_rate: Option<f64>,
    /// Per-user precheck bucket capacity.
    #[serde(default, deserialize_with = "json_integer::optional")]
    pub user_burst: Option<u32>,
    /// Event-wide buy limit.
    pub buy_rate: Option<f64>,
    /// Event-wide buy bucket capacity.
    #[serde(default, deserialize_with = "json_integer::optional")]
    pub buy_burst: Option<u32>,
    /// Purchase token lifetime.
    #[serde(default, deserialize_with = "json_integer::optional")]
    pub purchase_token_ttl_ms: Option<u64>,
    /// Expected drain throughput, for wait estimates.
    #[serde(default, deserialize_with = "json_integer::optional")]
    pub drain_rate: Option<u32>,
    /// Move the admission opening.
    #[serde(default, deserialize_with = "json_integer::optional")]
    pub admission_opens_ms: Option<u64>,
    /// The proof of work new admissions must show.
    #[serde(default, deserialize_with = "json_integer::optional")]
    pub pow_difficulty: Option<u32>,
    /// Per-address admission limit.
    pub admission_addr_rate: Option<f64>,
    /// Per-address admission bucket capacity.
    #[serde(default, deserialize_with = "json_integer::optional")]
    pub admission_addr_burst: Option<u32>,
    /// The gray release's share of users, 0-100 %.
    #[serde(default, deserialize_with = "json_integer::optional")]
    pub gray_percent: Option<u32>,
    /// The limits in shadow mode (all of them: `[]` enforces every limit).
    pub shadow: Option<Vec<Limit>>,
}

impl Switches {
    /// Checks and returns the fields to set; an empty change is refused.
    pub fn fields(&self) -> Result<Vec<(&'static str, String)>, Error> {
        let mut f = Vec::new();
        if let Some(v) = self.enabled {
            f.push(("enabled", if v { "1" } else { "0" }.to_owned()));
        }
        if let Some(v) = self.end_ms {
            check_time("end_ms", v)?;
            f.push(("end_ms", v.to_string()));
        }
        // A rate and its bucket capacity change together: a bucket of capacity 0 with a rate
        // would refuse everything.
        for (name, rate_field, burst_field, rate, burst) in [
            (
                "user",
                "user_rate",
                "user_burst",
                self.user_rate,
                self.user_burst,
            ),
            (
                "buy",
                "buy_rate",
                "buy_burst",
                self.buy_rate,
                self.buy_burst,
            ),
            (
                "admission_addr",
                "admission_addr_rate",
                "admission_addr_burst",
                self.admission_addr_rate,
                self.admission_addr_burst,
            ),
        ] {
            match (rate, burst) {
                (Some(rate), Some(burst)) => {
                    check_limit(name, rate, burst)?;
                    f.push((rate_field, rate.to_string()));
                    f.push((burst_field, burst.to_string()));
                }
                (None, None) => {}
                _ => {
                    return Err(invalid(format!(
                        "set {name}_rate and {name}_burst together"
                    )));
                }
            }
        }
        if let Some(v) = self.admission_opens_ms {
            check_time("admission_opens_ms", v)?;
            f.push(("admission_opens_ms", v.to_string()));
        }
        if let Some(v) = self.pow_difficulty {
            check_pow_difficulty(v)?;
            f.push(("pow_difficulty", v.to_string()));
        }
        if let Some(v) = self.purchase_token_ttl_ms {
            if !(1_000..=600_000).contains(&v) {
                return Err(invalid("purchase_token_ttl_ms must be 1000-600000"));
            }
            f.push(("purchase_token_ttl_ms", v.to_string()));
        }
        if let Some(v) = self.drain_rate {
            f.push(("drain_rate", v.to_string()));
        }
        if let Some(v) = self.gray_percent {
            check_gray_percent(v)?;
            f.push(("gray_percent", v.to_string()));
        }
        if let Some(v) = &self.shadow {
            f.push(("shadow", Limit::field(v)));
        }
        if f.is_empty() {
            return Err(invalid("nothing to change"));
        }
        Ok(f)
    }
}

#[cfg(test)]
pub(crate) mod tests;
