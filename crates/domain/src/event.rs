//! Events: their ids and their configuration, validated before anything reaches Redis.

use serde::{Deserialize, Serialize};

use crate::Error;

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
                "bad_event_id",
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

/// An event's configuration, as an operator sends it (`PUT /admin/events/{id}`). Field names
/// are the same in JSON and in the `{sk:E}:cfg` hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventConfig {
    /// The item on sale.
    pub sku: String,
    /// Units for sale.
    pub stock: u64,
    /// Stock shards (1–256).
    #[serde(default = "defaults::shards")]
    pub shards: u32,
    /// Sale opens (Unix ms, server clock).
    pub start_ms: u64,
    /// Sale closes (Unix ms).
    pub end_ms: u64,
    /// First come or lottery.
    #[serde(default)]
    pub admission_mode: AdmissionMode,
    /// Admission tokens per unit of stock (10 → 2,000,000 tokens for 200,000 items).
    #[serde(default = "defaults::multiplier")]
    pub admission_multiplier: u32,
    /// Unpaid orders are released after this long.
    #[serde(default = "defaults::payment_timeout_s")]
    pub payment_timeout_s: u64,
    /// How long a purchase token from precheck stays valid.
    #[serde(default = "defaults::purchase_token_ttl_ms")]
    pub purchase_token_ttl_ms: u64,
    /// Prechecks per second per user (token-bucket refill); 0 = unlimited.
    #[serde(default = "defaults::user_rate")]
    pub user_rate: f64,
    /// Per-user bucket capacity.
    #[serde(default = "defaults::user_burst")]
    pub user_burst: u32,
    /// Buys per second for the whole event; 0 = unlimited.
    #[serde(default)]
    pub buy_rate: f64,
    /// Event-wide buy bucket capacity.
    #[serde(default)]
    pub buy_burst: u32,
    /// The operator's on/off switch.
    #[serde(default = "defaults::enabled")]
    pub enabled: bool,
    /// Expected drain throughput (orders/s), for poll's wait estimate.
    #[serde(default = "defaults::drain_rate")]
    pub drain_rate: u32,
}

mod defaults {
    pub fn shards() -> u32 {
        8
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
}

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid("invalid_config", message)
}

fn check_limit(name: &str, rate: f64, burst: u32) -> Result<(), Error> {
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
        if self.sku.is_empty() || self.sku.len() > 128 {
            return Err(invalid("sku must be 1-128 characters"));
        }
        // Postgres cannot store NUL in text: such a sku would make every order a dead letter.
        if self.sku.chars().any(char::is_control) {
            return Err(invalid("sku must not contain control characters"));
        }
        if self.stock > 1_000_000_000 {
            return Err(invalid("stock must be <= 1e9"));
        }
        if !(1..=256).contains(&self.shards) {
            return Err(invalid("shards must be 1-256"));
        }
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
        check_limit("user", self.user_rate, self.user_burst)?;
        check_limit("buy", self.buy_rate, self.buy_burst)?;
        Ok(())
    }

    /// The `{sk:E}:cfg` fields, in HSET order.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("sku", self.sku.clone()),
            ("stock", self.stock.to_string()),
            ("shards", self.shards.to_string()),
            ("start_ms", self.start_ms.to_string()),
            ("end_ms", self.end_ms.to_string()),
            ("admission_mode", self.admission_mode.as_str().to_owned()),
            (
                "admission_multiplier",
                self.admission_multiplier.to_string(),
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
        ]
    }
}

/// Live changes an operator may make during a sale (`PATCH /admin/events/{id}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Switches {
    /// Open or pause the sale.
    pub enabled: Option<bool>,
    /// Move the end.
    pub end_ms: Option<u64>,
    /// Per-user precheck limit.
    pub user_rate: Option<f64>,
    /// Per-user precheck bucket capacity.
    pub user_burst: Option<u32>,
    /// Event-wide buy limit.
    pub buy_rate: Option<f64>,
    /// Event-wide buy bucket capacity.
    pub buy_burst: Option<u32>,
    /// Purchase token lifetime.
    pub purchase_token_ttl_ms: Option<u64>,
    /// Expected drain throughput, for wait estimates.
    pub drain_rate: Option<u32>,
}

impl Switches {
    /// Checks and returns the fields to set; an empty change is refused.
    pub fn fields(&self) -> Result<Vec<(&'static str, String)>, Error> {
        let mut f = Vec::new();
        if let Some(v) = self.enabled {
            f.push(("enabled", if v { "1" } else { "0" }.to_owned()));
        }
        if let Some(v) = self.end_ms {
            f.push(("end_ms", v.to_string()));
        }
        // A rate and its bucket capacity change together: a bucket of capacity 0 with a rate
        // would refuse everything.
        for (name, rate, burst) in [
            ("user", self.user_rate, self.user_burst),
            ("buy", self.buy_rate, self.buy_burst),
        ] {
            match (rate, burst) {
                (Some(rate), Some(burst)) => {
                    check_limit(name, rate, burst)?;
                    f.push((
                        if name == "user" {
                            "user_rate"
                        } else {
                            "buy_rate"
                        },
                        rate.to_string(),
                    ));
                    f.push((
                        if name == "user" {
                            "user_burst"
                        } else {
                            "buy_burst"
                        },
                        burst.to_string(),
                    ));
                }
                (None, None) => {}
                _ => {
                    return Err(invalid(format!(
                        "set {name}_rate and {name}_burst together"
                    )));
                }
            }
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
        if f.is_empty() {
            return Err(invalid("nothing to change"));
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> EventConfig {
        serde_json::from_str(r#"{"sku":"x","stock":10,"start_ms":1,"end_ms":2}"#).unwrap()
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
                r#"{"sku":"x","stock":1,"start_ms":1,"end_ms":2,"typo":1}"#
            )
            .is_err()
        );
    }

    #[test]
    fn event_ids_are_key_safe() {
        assert!(EventId::parse("sale-2026_11").is_ok());
        for bad in ["", "a}b", "a b", "a:b", &"x".repeat(65)] {
            assert!(EventId::parse(bad).is_err(), "{bad}");
        }
    }
}
