//! The payment provider's webhooks, as Stripe documents them: the `Stripe-Signature` header
//! (`t=<unix s>,v1=<hex>[,v1=<hex>…]`, HMAC-SHA256 of `t.body` under the endpoint's signing
//! secret, every `v1` checked in constant time, a tolerance on `t` against replays) and the
//! event we act on, `payment_intent.succeeded`, whose `metadata.payment_id` names our payment.

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorCode};

/// How far a signature's timestamp may be from our clock (Stripe's libraries' default).
pub const TOLERANCE_S: u64 = 300;

/// The header the provider signs with.
pub const SIGNATURE_HEADER: &str = "stripe-signature";

fn bad(message: &str) -> Error {
    Error::refused(ErrorCode::BadSignature, message)
}

/// The endpoint's signing secrets, from the `payment_webhook_secrets` variable (comma-separated:
/// during a rotation the old and the new one both verify). None set is a configuration error.
pub fn secrets(variable: &str) -> Result<Vec<&str>, Error> {
    let secrets: Vec<&str> = variable
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if secrets.is_empty() {
        return Err(Error::bug("payment_webhook_secrets holds no secret"));
    }
    Ok(secrets)
}

/// Checks `header` signs `body` under one of `secrets`, within [`TOLERANCE_S`] of `now_s`.
pub fn verify(header: &str, body: &[u8], secrets: &[&str], now_s: u64) -> Result<(), Error> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for item in header.split(',') {
        match item.trim().split_once('=') {
            Some(("t", t)) => timestamp = Some(t),
            Some(("v1", v)) => signatures.push(v),
            // Other schemes (`v0`, Stripe's test scheme) are not ours to trust.
            _ => {}
        }
    }
    let t = timestamp.ok_or_else(|| bad("the signature has no timestamp"))?;
    let t_s: u64 = t
        .parse()
        .map_err(|_| bad("the signature's timestamp is not a number"))?;
    if signatures.is_empty() {
        return Err(bad("the signature has no v1 signature"));
    }
    if now_s.abs_diff(t_s) > TOLERANCE_S {
        return Err(bad("the signature's timestamp is outside the tolerance"));
    }
    let decoded: Vec<Vec<u8>> = signatures.iter().filter_map(|s| hex(s)).collect();
    let mut matched = false;
    for secret in secrets {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
        mac.update(t.as_bytes());
        mac.update(b".");
        mac.update(body);
        for sig in &decoded {
            // `verify_slice` compares in constant time; every pair is tried.
            matched |= mac.clone().verify_slice(sig).is_ok();
        }
    }
    if matched {
        Ok(())
    } else {
        Err(bad("no signature matches"))
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The provider's mode the deployment takes payments in (the `payment_mode` setting): an
/// event of the other mode (a test card on a live shop, a leftover test secret in the list) is
/// taken and ignored, never paid with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PaymentMode {
    /// Test money (Stripe's test mode, the local sandbox).
    #[default]
    Test,
    /// Real money.
    Live,
}

impl PaymentMode {
    /// `test` or `live`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "test" => Ok(PaymentMode::Test),
            "live" => Ok(PaymentMode::Live),
            other => Err(format!("payment_mode is test or live, not {other:?}")),
        }
    }

    /// Whether an event's `livemode` is this mode's.
    pub fn takes(self, livemode: bool) -> bool {
        livemode == (self == PaymentMode::Live)
    }
}

/// A provider event, as far as we read it.
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    /// The provider's event id (`evt_…`): the same on every redelivery.
    pub id: String,
    /// The event's type (`payment_intent.succeeded`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether it happened in live mode (real money) or test mode.
    #[serde(default)]
    pub livemode: bool,
    /// What it is about.
    pub data: EventData,
}

/// An event's `data`.
#[derive(Debug, Clone, Deserialize)]
pub struct EventData {
    /// The object the event is about (a PaymentIntent for the kinds we act on).
    pub object: serde_json::Value,
}

/// A payment the provider says succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Succeeded {
    /// The provider's event id.
    pub event_id: String,
    /// The provider's reference of the payment (`pi_…`).
    pub reference: String,
    /// Our payment, from the metadata the storefront handed the provider.
    pub payment_id: String,
    /// What was received, in the smallest currency unit.
    pub amount: i64,
    /// Its currency (lowercase ISO 4217).
    pub currency: String,
    /// Whether real money moved (the provider's live mode) or test money.
    pub livemode: bool,
}

/// Why a verified event changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignore {
    /// A kind of event we do not act on.
    Kind,
    /// A payment that names no payment of ours (another integration on the same account:
    /// payment links, the dashboard).
    NotOurs,
    /// A body we cannot read as an event we act on.
    Unreadable,
}

/// What a provider event asks of us. A verified event is always taken (answered 200): a
/// refusal would have the provider retry it for days and then disable the endpoint, and with
/// it the confirmation of every order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A payment succeeded.
    Succeeded(Succeeded),
    /// An event that changes nothing.
    Ignored {
        /// The provider's event id (for a body without one, one made from its digest).
        event_id: String,
        /// Why.
        why: Ignore,
    },
}

/// Reads a verified body: a `payment_intent.succeeded` event naming one of our payments, or
/// one we take and ignore.
pub fn parse(body: &[u8]) -> Notice {
    let Ok(event) = serde_json::from_slice::<Event>(body) else {
        let event_id = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("id")?.as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("unread_{}", crate::ids::hex(&Sha256::digest(body))));
        return Notice::Ignored {
            event_id,
            why: Ignore::Unreadable,
        };
    };
    let ignored = |why| Notice::Ignored {
        event_id: event.id.clone(),
        why,
    };
    if event.kind != "payment_intent.succeeded" {
        return ignored(Ignore::Kind);
    }
    #[derive(Deserialize)]
    struct Intent {
        id: String,
        amount_received: i64,
        currency: String,
        #[serde(default)]
        metadata: std::collections::BTreeMap<String, String>,
    }
    let Ok(intent) = serde_json::from_value::<Intent>(event.data.object.clone()) else {
        return ignored(Ignore::Unreadable);
    };
    let Some(payment_id) = intent.metadata.get("payment_id").cloned() else {
        return ignored(Ignore::NotOurs);
    };
    Notice::Succeeded(Succeeded {
        event_id: event.id,
        reference: intent.id,
        payment_id,
        amount: intent.amount_received,
        currency: intent.currency.to_ascii_lowercase(),
        livemode: event.livemode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stripe's scheme, written out independently of `verify`.
    fn header(secret: &str, t: u64, body: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{t}.{body}").as_bytes());
        let sig: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("t={t},v1={sig}")
    }

    const BODY: &str = r#"{"id":"evt_1","type":"payment_intent.succeeded"}"#;

    #[test]
    fn a_signature_of_any_current_secret_within_the_tolerance_verifies() {
        let now = 1_700_000_000;
        let h = header("whsec_new", now - 10, BODY);
        assert!(verify(&h, BODY.as_bytes(), &["whsec_old", "whsec_new"], now).is_ok());
        // During a rotation the provider signs with both: either secret alone verifies.
        let both = format!(
            "{},v1={}",
            header("whsec_old", now, BODY),
            header("whsec_new", now, BODY).rsplit("v1=").next().unwrap()
        );
        assert!(verify(&both, BODY.as_bytes(), &["whsec_new"], now).is_ok());
        assert!(verify(&both, BODY.as_bytes(), &["whsec_old"], now).is_ok());
    }

    #[test]
    fn forged_stale_and_malformed_signatures_are_refused() {
        let now = 1_700_000_000;
        let refused = |h: &str, body: &str| {
            verify(h, body.as_bytes(), &["whsec_k"], now)
                .unwrap_err()
                .code()
        };
        let bad = ErrorCode::BadSignature;
        assert_eq!(refused(&header("whsec_other", now, BODY), BODY), bad);
        assert_eq!(
            refused(&header("whsec_k", now, BODY), "{}"),
            bad,
            "body changed"
        );
        let old = now - TOLERANCE_S - 1;
        assert_eq!(
            refused(&header("whsec_k", old, BODY), BODY),
            bad,
            "replayed"
        );
        let ahead = now + TOLERANCE_S + 1;
        assert_eq!(refused(&header("whsec_k", ahead, BODY), BODY), bad);
        let signed = header("whsec_k", now, BODY);
        let v0_only = signed.replace("v1=", "v0=");
        for h in ["", "t=,v1=00", "v1=00", &v0_only, "t=1700000000,v1=zz"] {
            assert_eq!(refused(h, BODY), bad, "{h}");
        }
        // The timestamp is signed: moving it breaks the signature.
        let moved = signed.replace(&format!("t={now}"), &format!("t={}", now - 1));
        assert_eq!(refused(&moved, BODY), bad);
    }

    #[test]
    fn a_succeeded_intent_names_our_payment_and_every_other_verified_event_is_ignored() {
        let body = br#"{"id":"evt_9","type":"payment_intent.succeeded","data":{"object":
            {"id":"pi_3","amount_received":1999,"currency":"EUR","metadata":{"payment_id":"pay_1"}}}}"#;
        assert_eq!(
            parse(body),
            Notice::Succeeded(Succeeded {
                event_id: "evt_9".into(),
                reference: "pi_3".into(),
                payment_id: "pay_1".into(),
                amount: 1999,
                currency: "eur".into(),
                livemode: false,
            })
        );
        let live = String::from_utf8_lossy(body).replace(r#""type""#, r#""livemode":true,"type""#);
        assert!(matches!(parse(live.as_bytes()), Notice::Succeeded(s) if s.livemode));
        let ignored = |body: &[u8]| match parse(body) {
            Notice::Ignored { event_id, why } => (event_id, why),
            other => panic!("{other:?}"),
        };
        let other = br#"{"id":"evt_2","type":"charge.refunded","data":{"object":{}}}"#;
        assert_eq!(ignored(other), ("evt_2".into(), Ignore::Kind));
        let no_metadata = br#"{"id":"evt_3","type":"payment_intent.succeeded","data":{"object":
            {"id":"pi_3","amount_received":1,"currency":"eur"}}}"#;
        assert_eq!(ignored(no_metadata), ("evt_3".into(), Ignore::NotOurs));
        let odd_intent =
            br#"{"id":"evt_4","type":"payment_intent.succeeded","data":{"object":{}}}"#;
        assert_eq!(ignored(odd_intent), ("evt_4".into(), Ignore::Unreadable));
        let (id, why) = ignored(b"not json");
        assert_eq!(why, Ignore::Unreadable);
        assert!(
            id.starts_with("unread_") && id == ignored(b"not json").0,
            "{id}"
        );
    }

    #[test]
    fn the_secrets_variable_lists_one_or_more() {
        assert_eq!(secrets(" a ,b,").unwrap(), ["a", "b"]);
        assert!(secrets(" , ").is_err());
    }
}
