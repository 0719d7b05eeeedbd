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
pub(crate) mod tests {
    use super::*;

    /// Every message `api/openapi.yaml` lists under an `x-refused-beyond-schema`.
    pub(crate) fn refused_beyond_schema() -> Vec<String> {
        let spec = include_str!("../../../api/openapi.yaml");
        let mut listed = Vec::new();
        let mut lines = spec.lines();
        while let Some(line) = lines.next() {
            if line.trim() == "x-refused-beyond-schema:" {
                let items = lines.clone().map_while(|l| l.trim().strip_prefix("- "));
                listed.extend(items.map(str::to_owned));
            }
        }
        listed
    }

    fn config() -> EventConfig {
        serde_json::from_str(
            r#"{"sku":"x","unit_amount":1999,"currency":"eur","stock":10,"start_ms":1,"end_ms":2}"#,
        )
        .unwrap()
    }

    #[test]
    fn a_shard_count_outside_the_range_is_invalid() {
        for (shards, valid) in [(0, false), (1, true), (256, true), (257, false)] {
            let mut c = config();
            c.stock = 1_000;
            c.shards = shards;
            assert_eq!(c.validate().is_ok(), valid, "{shards} shards");
        }
    }

    #[test]
    fn a_configuration_reads_back_from_its_hash() {
        let mut c = config();
        c.shards = c.shard_count();
        c.gray_percent = 35;
        c.shadow = vec![Limit::Global, Limit::User]; // the hash keeps them by name
        c.enabled = false;
        c.user_rate = 0.5;
        let mut hash: BTreeMap<String, String> = c
            .fields()
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v))
            .collect();
        hash.insert("version".into(), "v1".into()); // state, not configuration
        assert_eq!(EventConfig::from_fields(&hash), Some(c.clone()));
        hash.remove("gray_percent");
        hash.remove("shadow");
        let old = EventConfig::from_fields(&hash).unwrap();
        assert_eq!((old.gray_percent, old.shadow), (100, vec![]));
        hash.remove("sku");
        assert_eq!(EventConfig::from_fields(&hash), None);
    }

    #[test]
    fn defaults_and_validation() {
        let c = config();
        assert_eq!((c.shards, c.admission_multiplier, c.enabled), (8, 10, true));
        assert!(c.validate().is_ok());
        assert!(
            EventConfig {
                shards: 0,
                ..c.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            EventConfig {
                end_ms: 1,
                ..c.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            EventConfig {
                user_rate: f64::NAN,
                ..c.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            EventConfig {
                buy_rate: 5.0,
                buy_burst: 0,
                ..c
            }
            .validate()
            .is_err()
        );
        assert!(
            serde_json::from_str::<EventConfig>(
                r#"{"sku":"x","unit_amount":1,"currency":"eur","stock":1,"start_ms":1,"end_ms":2,"typo":1}"#
            )
            .is_err()
        );
    }

    /// `config()` with `field` set to `value`, written into the JSON text as it is given.
    fn config_with(field: &str, value: &str) -> Result<EventConfig, serde_json::Error> {
        let mut fields: Vec<String> = [
            ("sku", "\"x\""),
            ("unit_amount", "1999"),
            ("currency", "\"eur\""),
            ("stock", "10"),
            ("start_ms", "1"),
            ("end_ms", "2"),
        ]
        .iter()
        .filter(|(name, _)| *name != field)
        .map(|(name, v)| format!("\"{name}\":{v}"))
        .collect();
        fields.push(format!("\"{field}\":{value}"));
        serde_json::from_str(&format!("{{{}}}", fields.join(",")))
    }

    #[test]
    fn integer_fields_take_any_whole_number_in_range() {
        let c = config_with("buy_burst", "5.0").unwrap();
        assert_eq!(c.buy_burst, 5);
        assert_eq!(
            config_with("buy_burst", "35246040.0").unwrap().buy_burst,
            35_246_040
        );
        assert_eq!(config_with("buy_burst", "5e0").unwrap().buy_burst, 5);
        assert_eq!(config_with("buy_burst", "-0.0").unwrap().buy_burst, 0);
        assert_eq!(
            config_with("user_burst", "4294967295.0")
                .unwrap()
                .user_burst,
            u32::MAX
        );
        assert_eq!(config_with("stock", "1e9").unwrap().stock, 1_000_000_000);
        assert_eq!(
            config_with("end_ms", "18446744073709551615")
                .unwrap()
                .end_ms,
            u64::MAX
        );
        // 2^53 + 2 as a float is exact: the value, not a rounding of it.
        assert_eq!(
            config_with("end_ms", "9007199254740994.0").unwrap().end_ms,
            9_007_199_254_740_994
        );
        for (field, value) in [
            ("buy_burst", "5.5"),
            ("buy_burst", "0.1"),
            ("buy_burst", "-1"),
            ("buy_burst", "-1.0"),
            ("buy_burst", "4294967296"),
            ("buy_burst", "4294967296.0"),
            ("shards", "1e300"),
            ("end_ms", "18446744073709551616"),
            ("end_ms", "1.8446744073709552e19"),
            ("start_ms", "-9223372036854775809"),
            ("stock", "\"5\""),
            ("stock", "true"),
            ("stock", "null"),
        ] {
            let err = config_with(field, value).expect_err(&format!("{field}: {value}"));
            assert!(
                err.to_string()
                    .contains("expected a whole number from 0 to"),
                "{field}: {value}: {err}"
            );
        }
    }

    #[test]
    fn switches_take_whole_numbers_null_or_nothing() {
        let s: Switches = serde_json::from_str(r#"{"buy_rate":1,"buy_burst":3.0}"#).unwrap();
        assert_eq!((s.buy_rate, s.buy_burst), (Some(1.0), Some(3)));
        let s: Switches =
            serde_json::from_str(r#"{"end_ms":1767232800000.0,"drain_rate":null}"#).unwrap();
        assert_eq!(
            (s.end_ms, s.drain_rate, s.user_burst),
            (Some(1_767_232_800_000), None, None)
        );
        for bad in [
            r#"{"buy_rate":1,"buy_burst":3.5}"#,
            r#"{"purchase_token_ttl_ms":-1000.0}"#,
            r#"{"drain_rate":4294967296.0}"#,
            r#"{"end_ms":"1"}"#,
        ] {
            assert!(serde_json::from_str::<Switches>(bad).is_err(), "{bad}");
        }
        // The same shapes through serde_json::Value (the tests and the bench build configs so).
        let s: Switches =
            serde_json::from_value(serde_json::json!({ "user_rate": 2, "user_burst": 5.0 }))
                .unwrap();
        assert_eq!(s.user_burst, Some(5));
    }

    #[test]
    fn cross_field_rules_are_refused_with_their_listed_messages() {
        // api/openapi.yaml lists these messages in `x-refused-beyond-schema`.
        let message = |e: Error| match e {
            Error::Invalid { message, .. } => message,
            other => panic!("{other:?}"),
        };
        let c = config();
        assert_eq!(
            message(
                EventConfig {
                    start_ms: 2,
                    ..c.clone()
                }
                .validate()
                .unwrap_err()
            ),
            "start_ms must be before end_ms"
        );
        assert_eq!(
            message(
                EventConfig {
                    user_burst: 0,
                    ..c.clone()
                }
                .validate()
                .unwrap_err()
            ),
            "user_burst must be >= 1 when user_rate > 0"
        );
        assert_eq!(
            message(EventConfig { buy_rate: 1.0, ..c }.validate().unwrap_err()),
            "buy_burst must be >= 1 when buy_rate > 0"
        );
        for (switches, want) in [
            (
                r#"{"user_rate":1}"#,
                "set user_rate and user_burst together",
            ),
            (
                r#"{"buy_burst":1,"buy_rate":null}"#,
                "set buy_rate and buy_burst together",
            ),
            (
                r#"{"user_rate":1,"user_burst":0}"#,
                "user_burst must be >= 1 when user_rate > 0",
            ),
            (
                r#"{"buy_rate":1,"buy_burst":0}"#,
                "buy_burst must be >= 1 when buy_rate > 0",
            ),
            (r#"{"enabled":null,"end_ms":null}"#, "nothing to change"),
        ] {
            let s: Switches = serde_json::from_str(switches).unwrap();
            assert_eq!(message(s.fields().unwrap_err()), want, "{switches}");
        }
        let listed = refused_beyond_schema();
        for want in [
            "start_ms must be before end_ms",
            "user_burst must be >= 1 when user_rate > 0",
            "buy_burst must be >= 1 when buy_rate > 0",
            "set user_rate and user_burst together",
            "set buy_rate and buy_burst together",
            "nothing to change",
        ] {
            assert!(
                listed.iter().any(|l| l == want),
                "{want:?} not in {listed:?}"
            );
        }
    }

    #[test]
    fn an_event_has_a_price_in_a_lowercase_iso_currency() {
        let c = config();
        assert_eq!((c.unit_amount, c.currency.as_str()), (1999, "eur"));
        for (unit_amount, currency) in [(0, "eur"), (1, "EUR"), (1, "euro"), (1, "e1r"), (1, "")] {
            let bad = EventConfig {
                unit_amount,
                currency: currency.into(),
                ..c.clone()
            };
            assert_eq!(
                bad.validate().unwrap_err().code(),
                ErrorCode::InvalidConfig,
                "{unit_amount} {currency}"
            );
        }
        for missing in ["unit_amount", "currency"] {
            let mut v = serde_json::to_value(&c).unwrap();
            v.as_object_mut().unwrap().remove(missing);
            assert!(
                serde_json::from_value::<EventConfig>(v).is_err(),
                "{missing}"
            );
        }
    }

    #[test]
    fn times_beyond_what_lua_holds_exactly_are_refused() {
        let late = MAX_TIME_MS + 1;
        for c in [
            EventConfig {
                end_ms: late,
                ..config()
            },
            EventConfig {
                start_ms: late - 10,
                end_ms: late,
                ..config()
            },
            EventConfig {
                admission_opens_ms: late,
                ..config()
            },
        ] {
            match c.validate() {
                Err(Error::Invalid { message, .. }) => {
                    assert!(message.contains("at most 253402300799999"), "{message}")
                }
                other => panic!("{other:?}"),
            }
        }
        let c = EventConfig {
            end_ms: MAX_TIME_MS,
            ..config()
        };
        assert!(c.validate().is_ok());
        let s: Switches = serde_json::from_str(r#"{"end_ms":9223372036854775807}"#).unwrap();
        assert!(s.fields().is_err());
        let s: Switches =
            serde_json::from_str(r#"{"admission_opens_ms":9007199254740993}"#).unwrap();
        assert!(s.fields().is_err());
    }

    #[test]
    fn the_admission_gate_has_an_opening_a_difficulty_and_a_per_address_limit() {
        let c = config();
        assert_eq!(
            (
                c.admission_opens_ms,
                c.pow_difficulty,
                c.admission_addr_burst
            ),
            (0, DEFAULT_POW_DIFFICULTY, 200)
        );
        let too_hard = EventConfig {
            pow_difficulty: MAX_POW_DIFFICULTY + 1,
            ..c.clone()
        };
        assert!(too_hard.validate().is_err());
        let s: Switches = serde_json::from_str(r#"{"pow_difficulty":20}"#).unwrap();
        assert_eq!(s.fields().unwrap(), [("pow_difficulty", "20".to_owned())]);
        let s: Switches = serde_json::from_str(r#"{"pow_difficulty":25}"#).unwrap();
        assert!(s.fields().is_err());
        let s: Switches = serde_json::from_str(r#"{"admission_addr_rate":1}"#).unwrap();
        assert!(s.fields().is_err(), "a rate without its burst");
    }

    #[test]
    fn sku_length_is_counted_in_characters() {
        let c = config();
        let sku = |s: String| {
            EventConfig {
                sku: s,
                ..c.clone()
            }
            .validate()
        };
        assert!(sku("é".repeat(128)).is_ok(), "256 bytes, 128 characters");
        assert!(sku("é".repeat(129)).is_err());
        assert!(sku(String::new()).is_err());
    }

    #[test]
    fn event_ids_are_key_safe() {
        assert!(EventId::parse("sale-2026_11").is_ok());
        for bad in ["", "a}b", "a b", "a:b", &"x".repeat(65)] {
            assert!(EventId::parse(bad).is_err(), "{bad}");
        }
    }
}
