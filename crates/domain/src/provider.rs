//! The payment provider's webhooks, as Stripe documents them: the `Stripe-Signature` header
//! (`t=<unix s>,v1=<hex>[,v1=<hex>…]`, HMAC-SHA256 of `t.body` under the endpoint's signing
//! secret, every `v1` checked in constant time, a tolerance on `t` against replays) and the
//! event we act on, `payment_intent.succeeded`, whose `metadata.payment_id` names our payment.

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

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

/// A provider event, as far as we read it.
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    /// The provider's event id (`evt_…`): the same on every redelivery.
    pub id: String,
    /// The event's type (`payment_intent.succeeded`).
    #[serde(rename = "type")]
    pub kind: String,
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
}

/// What a provider event asks of us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A payment succeeded.
    Succeeded(Succeeded),
    /// An event of a kind we do not act on (answered 200, as the provider expects).
    Ignored {
        /// The provider's event id.
        event_id: String,
        /// Its type.
        kind: String,
    },
}

/// Reads a verified body: a `payment_intent.succeeded` event, or one we ignore.
pub fn parse(body: &[u8]) -> Result<Notice, Error> {
    let malformed =
        |e: String| Error::invalid(ErrorCode::MalformedJson, format!("provider event: {e}"));
    let event: Event = serde_json::from_slice(body).map_err(|e| malformed(e.to_string()))?;
    if event.kind != "payment_intent.succeeded" {
        return Ok(Notice::Ignored {
            event_id: event.id,
            kind: event.kind,
        });
    }
    #[derive(Deserialize)]
    struct Intent {
        id: String,
        amount_received: i64,
        currency: String,
        #[serde(default)]
        metadata: std::collections::BTreeMap<String, String>,
    }
    let intent: Intent =
        serde_json::from_value(event.data.object).map_err(|e| malformed(e.to_string()))?;
    let payment_id = intent
        .metadata
        .get("payment_id")
        .cloned()
        .ok_or_else(|| malformed("the payment intent has no metadata.payment_id".into()))?;
    Ok(Notice::Succeeded(Succeeded {
        event_id: event.id,
        reference: intent.id,
        payment_id,
        amount: intent.amount_received,
        currency: intent.currency.to_ascii_lowercase(),
    }))
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
    fn a_succeeded_intent_names_our_payment_and_other_kinds_are_ignored() {
        let body = br#"{"id":"evt_9","type":"payment_intent.succeeded","data":{"object":
            {"id":"pi_3","amount_received":1999,"currency":"EUR","metadata":{"payment_id":"pay_1"}}}}"#;
        assert_eq!(
            parse(body).unwrap(),
            Notice::Succeeded(Succeeded {
                event_id: "evt_9".into(),
                reference: "pi_3".into(),
                payment_id: "pay_1".into(),
                amount: 1999,
                currency: "eur".into(),
            })
        );
        let other = br#"{"id":"evt_2","type":"charge.refunded","data":{"object":{}}}"#;
        assert!(matches!(parse(other).unwrap(), Notice::Ignored { .. }));
        let no_metadata = br#"{"id":"evt_3","type":"payment_intent.succeeded","data":{"object":
            {"id":"pi_3","amount_received":1,"currency":"eur"}}}"#;
        assert_eq!(
            parse(no_metadata).unwrap_err().code(),
            ErrorCode::MalformedJson
        );
    }

    #[test]
    fn the_secrets_variable_lists_one_or_more() {
        assert_eq!(secrets(" a ,b,").unwrap(), ["a", "b"]);
        assert!(secrets(" , ").is_err());
    }
}
