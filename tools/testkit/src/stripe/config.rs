//! How a sandbox is set up: the pinned API version, the account's keys and what a restricted
//! key may do, how webhook deliveries are retried, how refunds end, which events an endpoint
//! is sent.

use std::time::Duration;

use super::webhooks;

/// The API version the sandbox renders (see the module documentation).
pub const API_VERSION: &str = "2024-06-20";
/// The secret key every sandbox accepts unless configured otherwise.
pub const SECRET_KEY: &str = "sk_test_51SeckillSandbox0000000000000000000000000000";
/// A restricted key holding what the app needs: Checkout Sessions write, Refunds write,
/// Events read, PaymentIntents read.
pub const RESTRICTED_KEY: &str = "rk_test_51SeckillSandboxApp000000000000000000000000";
/// The sandbox's account, as 403 messages name it.
pub const ACCOUNT_ID: &str = "acct_1SeckillSandbox0";
/// How long an idempotency key's answer is kept.
pub(crate) const IDEMPOTENCY_TTL_S: i64 = 24 * 3600;

/// A restricted key's permission on a resource (<https://docs.stripe.com/keys#limit-access>:
/// "Write permissions imply read permissions").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    CheckoutSessionsRead,
    CheckoutSessionsWrite,
    PaymentIntentsRead,
    PaymentIntentsWrite,
    RefundsRead,
    RefundsWrite,
    EventsRead,
}

impl Permission {
    /// Whether holding `self` allows what `needed` allows.
    pub fn grants(self, needed: Permission) -> bool {
        use Permission::*;
        self == needed
            || matches!(
                (self, needed),
                (CheckoutSessionsWrite, CheckoutSessionsRead)
                    | (PaymentIntentsWrite, PaymentIntentsRead)
                    | (RefundsWrite, RefundsRead)
            )
    }
}

/// An API key of the sandbox's account.
#[derive(Debug, Clone)]
pub struct ApiKey {
    pub key: String,
    /// `None`: a secret key, allowed everything; `Some`: a restricted key.
    pub permissions: Option<Vec<Permission>>,
}

impl ApiKey {
    /// A secret key (`sk_test_…`).
    pub fn secret(key: &str) -> Self {
        ApiKey {
            key: key.to_owned(),
            permissions: None,
        }
    }

    /// A restricted key (`rk_test_…`) with these permissions.
    pub fn restricted(key: &str, permissions: &[Permission]) -> Self {
        ApiKey {
            key: key.to_owned(),
            permissions: Some(permissions.to_vec()),
        }
    }
}

/// How webhook deliveries are retried: Stripe's days, compressed.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts per delivery, the first included.
    pub attempts: u32,
    /// The wait after the first failure; it doubles after each (capped at a minute).
    pub first_backoff: Duration,
    /// How long one attempt waits for an answer.
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 8,
            first_backoff: Duration::from_millis(200),
            timeout: Duration::from_secs(10),
        }
    }
}

/// How a pending refund ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundOutcome {
    Succeeded,
    /// `failed`, with this `failure_reason` (`lost_or_stolen_card`,
    /// `expired_or_canceled_card`, `charge_for_pending_refund_disputed`,
    /// `insufficient_funds`, `declined`, `merchant_request`, `unknown`).
    Failed(String),
}

/// What a new refund does.
#[derive(Debug, Clone)]
pub enum RefundBehaviour {
    /// `status: succeeded` at once (card refunds in test mode).
    Succeed,
    /// `status: pending`, then `outcome` after `settle_after` (`charge.refund.updated`).
    Pending {
        settle_after: Duration,
        outcome: RefundOutcome,
    },
}

/// Which events to hold back from webhook delivery.
#[derive(Debug, Clone)]
pub enum WebhookFilter {
    All,
    /// These types (`*` wildcards allowed).
    Types(Vec<String>),
}

impl WebhookFilter {
    pub fn matches(&self, kind: &str) -> bool {
        match self {
            WebhookFilter::All => true,
            WebhookFilter::Types(t) => t.iter().any(|p| webhooks::pattern_matches(p, kind)),
        }
    }
}

/// How a sandbox starts.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The account's keys (default: [`SECRET_KEY`] and [`RESTRICTED_KEY`]).
    pub keys: Vec<ApiKey>,
    /// The account's API version: events' `api_version` (default [`API_VERSION`]).
    pub api_version: String,
    pub retry: RetryPolicy,
    pub refunds: RefundBehaviour,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            keys: vec![
                ApiKey::secret(SECRET_KEY),
                ApiKey::restricted(
                    RESTRICTED_KEY,
                    &[
                        Permission::CheckoutSessionsWrite,
                        Permission::RefundsWrite,
                        Permission::EventsRead,
                        Permission::PaymentIntentsRead,
                    ],
                ),
            ],
            api_version: API_VERSION.to_owned(),
            retry: RetryPolicy::default(),
            refunds: RefundBehaviour::Succeed,
        }
    }
}
