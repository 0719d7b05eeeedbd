//! The Spin variables the functions read, in one place.
//!
//! Real Spin resolves every application variable (`spin.toml`'s `[variables]`) through its
//! providers on an instance's first outbound open, whichever the instance needs
//! (`host/src/factors/spin_costs.rs` cites the files), so the application declares only what a
//! deployment must set: where Redis and Postgres are, and the secrets. The optional knobs are
//! one variable, [`SETTINGS`], read only by the components that use them; the poll-carried
//! drain's period is a literal of the manifest's `poll` component (it follows from whether the
//! manifest has cron triggers, not from the deployment).

use crate::error::ApiError;
use seckill_domain::net::Cidr;
use seckill_domain::order_events::deliver::DeliveryOptions;
use seckill_domain::orders::DrainOptions;
use seckill_domain::provider::PaymentMode;

use crate::postgres::SpinPg;

/// Redis URL (`redis://host:port` or `rediss://user:pass@host:port`).
pub const REDIS_URL: &str = "redis_url";
/// Postgres connection string.
pub const PG_URL: &str = "pg_url";
/// HS256 key of the shop's login tokens.
pub const JWT_SECRET: &str = "jwt_secret";
/// HMAC key of admission tokens.
pub const ADMISSION_SECRET: &str = "admission_secret";
/// The operators: `name:role:secret` entries separated by commas
/// (`seckill_domain::auth::Operators`).
pub const OPERATORS: &str = "operators";
/// The payment provider's webhook signing secrets, comma-separated.
pub const PAYMENT_WEBHOOK_SECRETS: &str = "payment_webhook_secrets";
/// The schedulers' key for `?key=` (empty: that way in is off).
pub const JOB_KEY: &str = "job_key";
/// The optional settings: `name=value` pairs separated by commas (see [`Settings`]).
pub const SETTINGS: &str = "settings";
/// The `poll` component's literal: how often one poll per shard is elected to drain it.
pub const POLL_DRAIN_MS: &str = "poll_drain_ms";

/// Reads a Spin variable; a missing one is a configuration error, reported as 500.
pub fn get(name: &str) -> Result<String, ApiError> {
    spin_sdk::variables::get(name).map_err(|e| ApiError::internal(format!("variable {name}: {e}")))
}

/// Reads an optional Spin variable, falling back to `default` when it is not defined.
pub fn get_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    spin_sdk::variables::get(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The optional settings, each with its default; [`SETTINGS`] overrides any of them, e.g.
/// `drain_batch=1000,release_batch=500,trusted_proxies=10.0.0.0/16 fd00::/8`. A name that is not one of these, or a value that does
/// not parse, is a configuration error (500), not silently the default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Orders per Postgres transaction.
    pub drain_batch: usize,
    /// Transactions per drain run and shard.
    pub drain_max_batches: usize,
    /// The drain lease: how long a drainer owns a shard's queue before another may take it over.
    pub drain_lease_ms: u64,
    /// How long an entry stays with a consumer that stopped before it is delivered again.
    pub drain_reclaim_idle_ms: u64,
    /// Deliveries before an entry goes to the dead letters.
    pub drain_max_deliveries: u32,
    /// Timeout release: expired orders handled per run, units given back per shard per run.
    pub release_batch: i64,
    /// `POST /shop/demo-login` mints a buyer token for any name: for trying a sale locally.
    pub demo_login: bool,
    /// The provider's mode payments are taken in (`test` by default, `live` for real money):
    /// an event of the other mode is taken and ignored.
    pub payment_mode: PaymentMode,
    /// The proxies in front of the functions (a load balancer, an ingress), as CIDR ranges
    /// separated by spaces: only their `X-Forwarded-For` is believed
    /// ([`crate::http::client_ip`]). None by default: the peer is the client.
    pub trusted_proxies: Vec<Cidr>,
    /// The IPv6 prefix length whose addresses share one admission bucket
    /// ([`seckill_domain::net::bucket_key`]): 64 by default, 1–128.
    pub admission_ipv6_prefix: u8,
    /// Order events: how long an endpoint may fail before it is disabled (5 days)
    /// ([`DeliveryOptions::disable_after_ms`]),
    pub order_events_disable_after_s: u64,
    /// and how many days events and their delivery log are kept ([`DeliveryOptions::keep_ms`]).
    pub order_events_keep_days: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            drain_batch: 500,
            drain_max_batches: 200,
            drain_lease_ms: 30_000,
            drain_reclaim_idle_ms: 30_000,
            drain_max_deliveries: 5,
            release_batch: 1_000,
            demo_login: false,
            payment_mode: PaymentMode::Test,
            trusted_proxies: Vec::new(),
            admission_ipv6_prefix: seckill_domain::net::DEFAULT_IPV6_BUCKET_PREFIX,
            order_events_disable_after_s: seckill_domain::order_events::deliver::DISABLE_AFTER_S,
            order_events_keep_days: seckill_domain::order_events::deliver::KEEP_DAYS,
        }
    }
}

impl Settings {
    /// The settings of this deployment: [`SETTINGS`] over the defaults (a manifest that does
    /// not declare the variable gets the defaults).
    pub fn read() -> Result<Self, ApiError> {
        match spin_sdk::variables::get(SETTINGS) {
            Ok(text) => Self::parse(&text).map_err(ApiError::internal),
            Err(_) => Ok(Self::default()),
        }
    }

    /// `name=value` pairs separated by commas (blanks around them ignored) over the defaults.
    pub fn parse(text: &str) -> Result<Self, String> {
        fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
            value
                .parse()
                .map_err(|_| format!("setting {name}: {value:?} is not a whole number"))
        }
        let mut s = Self::default();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .map(|(n, v)| (n.trim(), v.trim()))
                .ok_or_else(|| format!("setting {pair:?}: expected name=value"))?;
            match name {
                "drain_batch" => s.drain_batch = number(name, value)?,
                "drain_max_batches" => s.drain_max_batches = number(name, value)?,
                "drain_lease_ms" => s.drain_lease_ms = number(name, value)?,
                "drain_reclaim_idle_ms" => s.drain_reclaim_idle_ms = number(name, value)?,
                "drain_max_deliveries" => s.drain_max_deliveries = number(name, value)?,
                "release_batch" => s.release_batch = number(name, value)?,
                "demo_login" => {
                    s.demo_login = match value {
                        "true" => true,
                        "false" => false,
                        _ => {
                            return Err(format!(
                                "setting demo_login: {value:?} is not true or false"
                            ));
                        }
                    }
                }
                "payment_mode" => s.payment_mode = PaymentMode::parse(value)?,
                "admission_ipv6_prefix" => {
                    s.admission_ipv6_prefix = number(name, value)?;
                    if !(1..=128).contains(&s.admission_ipv6_prefix) {
                        return Err(format!("setting {name}: {value} is not 1 to 128"));
                    }
                }
                "order_events_disable_after_s" => {
                    s.order_events_disable_after_s = number(name, value)?
                }
                "order_events_keep_days" => s.order_events_keep_days = number(name, value)?,
                "trusted_proxies" => {
                    s.trusted_proxies = value
                        .split_whitespace()
                        .map(str::parse)
                        .collect::<Result<_, _>>()
                        .map_err(|e| format!("setting trusted_proxies: {e}"))?;
                }
                _ => return Err(format!("setting {name:?} is not one of the settings")),
            }
        }
        Ok(s)
    }

    /// The order events' delivery options.
    pub fn order_events_options(&self) -> DeliveryOptions {
        DeliveryOptions {
            disable_after_ms: self.order_events_disable_after_s * 1000,
            keep_ms: self.order_events_keep_days * 86_400_000,
            ..DeliveryOptions::default()
        }
    }

    /// The drain's options. In the tests' build only, it also arms the drain's
    /// `fault_injection` point.
    pub fn drain_options(&self) -> DrainOptions {
        #[cfg(feature = "fault-injection")]
        if let Ok(point) = spin_sdk::variables::get("fault_injection") {
            seckill_domain::orders::fault::arm(&point);
        }
        DrainOptions {
            owner: format!("drainer-{}", seckill_domain::ids::random_hex(6)),
            batch: self.drain_batch,
            max_batches: self.drain_max_batches,
            lease_ms: self.drain_lease_ms,
            reclaim_idle_ms: self.drain_reclaim_idle_ms,
            max_deliveries: self.drain_max_deliveries,
            until: None,
        }
    }
}

/// How often one poll per shard is elected to drain after answering (the `poll` component's
/// `poll_drain_ms` literal; 0, `spin.toml`'s whose cron drains every second, turns it off).
pub fn poll_drain_ms() -> u64 {
    get_or(POLL_DRAIN_MS, 0)
}

/// The orders database.
pub fn postgres() -> Result<SpinPg, ApiError> {
    Ok(SpinPg::open(&get(PG_URL)?).map_err(seckill_domain::Error::from)?)
}

#[cfg(test)]
mod tests {
    use super::Settings;

    #[test]
    fn settings_override_the_defaults_by_name() {
        assert_eq!(Settings::parse("").unwrap(), Settings::default());
        let s = Settings::parse(
            " drain_batch=50 , demo_login=true,release_batch=7,payment_mode=live,trusted_proxies= 10.0.0.0/16  fd00::/8 ",
        )
        .unwrap();
        assert_eq!(
            s,
            Settings {
                drain_batch: 50,
                release_batch: 7,
                demo_login: true,
                payment_mode: seckill_domain::provider::PaymentMode::Live,
                trusted_proxies: vec!["10.0.0.0/16".parse().unwrap(), "fd00::/8".parse().unwrap()],
                ..Settings::default()
            }
        );
        let none = Settings::parse("trusted_proxies=").unwrap();
        assert_eq!(none.trusted_proxies, []);
    }

    #[test]
    fn a_setting_that_is_not_one_or_does_not_parse_is_an_error() {
        for bad in [
            "drain_bach=5",
            "drain_batch",
            "drain_batch=-1",
            "demo_login=yes",
            "payment_mode=production",
            "release_batch=1e3",
            "trusted_proxies=10.0.0.0/33",
            "trusted_proxies=10.0.0.0/8,fd00::/8",
            "trusted_proxies=10.0.0.0/8 proxy.internal",
        ] {
            assert!(Settings::parse(bad).is_err(), "{bad}");
        }
    }
}
