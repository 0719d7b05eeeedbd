//! Signing as the Standard Webhooks specification says (`spec/standard-webhooks.md`, "Signature
//! scheme"): `webhook-signature` is `v1,` and the base64 of the HMAC-SHA256 of
//! `{webhook-id}.{webhook-timestamp}.{body}`, keyed by the secret's bytes (the base64 after
//! `whsec_`); several signatures, space-separated, while a secret is being rotated.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// An endpoint's signing secret: `whsec_` and the base64 of 24 to 64 random bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

/// The prefix the specification gives secrets.
pub const PREFIX: &str = "whsec_";

/// Bytes of a secret this side makes (the specification asks for 24 to 64).
const NEW_SECRET_BYTES: usize = 32;

impl Secret {
    /// A new random secret.
    pub fn generate() -> Self {
        let mut bytes = vec![0; NEW_SECRET_BYTES];
        getrandom::fill(&mut bytes).expect("the platform's random source");
        Secret(bytes)
    }

    /// The secret `text` spells (`whsec_…`), if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = STANDARD.decode(text.strip_prefix(PREFIX)?).ok()?;
        (24..=64).contains(&bytes.len()).then_some(Secret(bytes))
    }

    /// Its text, as the receiver configures it.
    pub fn expose(&self) -> String {
        format!("{PREFIX}{}", STANDARD.encode(&self.0))
    }

    /// The `v1` signature of a message.
    pub fn sign(&self, msg_id: &str, timestamp_s: u64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp_s.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// `webhook-signature`: one signature per secret, space-separated.
pub fn signature_header(secrets: &[Secret], msg_id: &str, timestamp_s: u64, body: &[u8]) -> String {
    secrets
        .iter()
        .map(|s| s.sign(msg_id, timestamp_s, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the specification's reference libraries (`standardwebhooks` on PyPI signs
    /// it to the same value).
    #[test]
    fn signs_the_reference_example() {
        let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            secret.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1614265330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_rotation_signs_with_both() {
        let (new, old) = (Secret::generate(), Secret::generate());
        let header = signature_header(&[new.clone(), old.clone()], "msg_1", 1, b"{}");
        let parts: Vec<_> = header.split(' ').collect();
        assert_eq!(
            parts,
            [new.sign("msg_1", 1, b"{}"), old.sign("msg_1", 1, b"{}")]
        );
    }

    #[test]
    fn secrets_round_trip_and_bad_ones_are_refused() {
        let secret = Secret::generate();
        assert_eq!(Secret::parse(&secret.expose()), Some(secret));
        assert_eq!(
            Secret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            None,
            "no prefix"
        );
        assert_eq!(Secret::parse("whsec_c2hvcnQ="), None, "too short");
        assert_eq!(Secret::parse("whsec_***"), None, "not base64");
    }
}
