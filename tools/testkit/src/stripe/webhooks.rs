//! Webhook delivery as <https://docs.stripe.com/webhooks> describes it: each event of an
//! endpoint's `enabled_events` is POSTed as JSON with a `Stripe-Signature` header
//! (`t=<unix s>,v1=<hex HMAC-SHA256 of "t.body">`, one `v1` per active secret during a
//! rotation, <https://docs.stripe.com/webhooks#verify-manually>), anything but a 2xx (or no
//! answer) is retried with exponential backoff — Stripe spreads that over three days in live
//! mode and "three times over a few hours" in a sandbox; here it is compressed to
//! [`super::config::RetryPolicy`] — and each attempt is signed anew. Deliveries run in the
//! background, concurrently: Stripe does not guarantee their order either.
//!
//! The signing is the kit's own [`crate::provider::signature`], shared with
//! [`crate::Provider`]: kit code, not the app's.

/// A webhook endpoint (<https://docs.stripe.com/api/webhook_endpoints/object>).
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `we_…`.
    pub id: String,
    pub url: String,
    /// Signing secrets (`whsec_…`); several during a rotation, each signs every attempt.
    pub secrets: Vec<String>,
    /// Event types delivered there; `*` is every type.
    pub enabled_events: Vec<String>,
}

/// Where one delivery (one event to one endpoint) stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryState {
    /// Queued, in flight, or waiting to be retried.
    Pending,
    /// Held back by `StripeSandbox::hold_webhooks` until released.
    Held,
    /// Lost on purpose (`StripeSandbox::pay_without_webhooks`): never sent.
    Dropped,
    /// Answered with a 2xx.
    Delivered,
    /// Every attempt failed.
    Exhausted,
}

/// Bytes of an attempt's response body kept (the Dashboard shows a response's start).
pub const RESPONSE_SHOWN: usize = 1024;

/// One attempt: the endpoint's status, `None` when it did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub status: Option<u16>,
    /// The response's body, its first [`RESPONSE_SHOWN`] bytes (as the Dashboard shows an
    /// attempt's response).
    pub response: Option<String>,
    /// Wall-clock Unix seconds (the `t` it was signed with).
    pub at: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    pub event: usize,
    pub endpoint: usize,
    pub state: DeliveryState,
    pub attempts: Vec<Attempt>,
    /// A task is delivering it (one at a time, also across a hold and its release).
    pub running: bool,
}

/// `*` matches any run of characters: `*`, `charge.*`, `checkout.session.completed` (the
/// events list's `type` filter and an endpoint's `enabled_events`).
pub(crate) fn pattern_matches(pattern: &str, kind: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == kind;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !kind.starts_with(first) || kind.len() < first.len() + last.len() {
        return false;
    }
    if !kind.ends_with(last) {
        return false;
    }
    let mut rest = &kind[first.len()..kind.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::pattern_matches;

    #[test]
    fn wildcards() {
        assert!(pattern_matches("*", "charge.refunded"));
        assert!(pattern_matches("charge.*", "charge.refund.updated"));
        assert!(!pattern_matches("charge.*", "checkout.session.completed"));
        assert!(pattern_matches("*.completed", "checkout.session.completed"));
        assert!(pattern_matches(
            "checkout.*.expired",
            "checkout.session.expired"
        ));
        assert!(pattern_matches(
            "payment_intent.succeeded",
            "payment_intent.succeeded"
        ));
        assert!(!pattern_matches(
            "payment_intent",
            "payment_intent.succeeded"
        ));
    }
}
