//! The admission gate's proof of work: a stateless challenge the server signs (bound to event,
//! user, expiry and difficulty) and a nonce the client finds, such that SHA-256 of
//! `challenge:nonce` starts with `difficulty` zero bits. Checked here without Redis; the
//! admission script then marks the challenge used and compares its difficulty with the event's
//! current one, in the round trip admission makes anyway.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorCode};
use crate::ids;

/// How long a challenge may be solved and used: minutes at the hardest difficulty on a slow
/// phone, too short to stock solutions before admission opens.
pub const CHALLENGE_TTL_MS: u64 = 120_000;

/// The longest nonce taken (a decimal counter needs at most 20 digits).
const MAX_NONCE_LEN: usize = 32;

/// A challenge as handed to the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Challenge {
    /// Opaque: hash it as it is, `challenge:nonce`.
    pub challenge: String,
    /// Leading zero bits the hash must show.
    pub difficulty: u32,
    /// After this (Unix ms) it is refused.
    pub expires_ms: u64,
}

/// A solved challenge, checked: what the admission script needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof {
    /// The difficulty it was issued (and solved) at.
    pub difficulty: u32,
    /// Its random id: used once.
    pub id: String,
    /// How long it stays valid: how long its "used" mark must be kept.
    pub ttl_ms: u64,
}

fn mac(secret: &[u8], payload: &str) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    m.update(b"seckill-pow\n");
    m.update(payload.as_bytes());
    m
}

/// A new challenge for `user` at `event`, signed with `secret`.
pub fn issue(secret: &[u8], event: &str, user: &str, difficulty: u32, now_ms: u64) -> Challenge {
    let expires_ms = now_ms + CHALLENGE_TTL_MS;
    let id = ids::random_hex(16);
    let payload = format!("{event}\n{user}\n{expires_ms}\n{difficulty}\n{id}");
    let sig = mac(secret, &payload).finalize().into_bytes();
    Challenge {
        challenge: format!("c1.{}.{}", B64.encode(&payload), B64.encode(sig)),
        difficulty,
        expires_ms,
    }
}

fn bad(message: &str) -> Error {
    Error::refused(ErrorCode::BadChallenge, message)
}

/// Checks `nonce` solves `challenge` for `user` at `event`: signed by us, theirs, not expired,
/// and the hash has the difficulty it names.
pub fn verify(
    secret: &[u8],
    event: &str,
    user: &str,
    challenge: &str,
    nonce: &str,
    now_ms: u64,
) -> Result<Proof, Error> {
    let mut parts = challenge.split('.');
    let (Some("c1"), Some(payload), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("malformed challenge"));
    };
    let payload = B64
        .decode(payload)
        .ok()
        .and_then(|p| String::from_utf8(p).ok())
        .ok_or_else(|| bad("malformed challenge"))?;
    let sig = B64.decode(sig).map_err(|_| bad("malformed challenge"))?;
    mac(secret, &payload)
        .verify_slice(&sig)
        .map_err(|_| bad("not a challenge of ours"))?;
    let fields: Vec<&str> = payload.split('\n').collect();
    let [for_event, for_user, expires_ms, difficulty, id] = fields[..] else {
        return Err(bad("malformed challenge"));
    };
    if for_event != event || for_user != user {
        return Err(bad("the challenge is for another event or user"));
    }
    let expires_ms: u64 = expires_ms.parse().map_err(|_| bad("malformed challenge"))?;
    let difficulty: u32 = difficulty.parse().map_err(|_| bad("malformed challenge"))?;
    if now_ms >= expires_ms {
        return Err(bad("the challenge has expired: ask for a new one"));
    }
    let nonce_ok = !nonce.is_empty()
        && nonce.len() <= MAX_NONCE_LEN
        && nonce.bytes().all(|b| b.is_ascii_alphanumeric());
    if !nonce_ok {
        return Err(bad("the nonce is 1-32 letters or digits"));
    }
    if leading_zero_bits(challenge, nonce) < difficulty {
        return Err(bad("the nonce does not solve the challenge"));
    }
    Ok(Proof {
        difficulty,
        id: id.to_owned(),
        ttl_ms: expires_ms - now_ms,
    })
}

/// Leading zero bits of SHA-256(`challenge:nonce`).
pub fn leading_zero_bits(challenge: &str, nonce: &str) -> u32 {
    let hash = Sha256::new()
        .chain_update(challenge.as_bytes())
        .chain_update(b":")
        .chain_update(nonce.as_bytes())
        .finalize();
    let mut bits = 0;
    for byte in hash {
        bits += byte.leading_zeros();
        if byte != 0 {
            break;
        }
    }
    bits
}

/// Finds a nonce for `challenge` by counting up: what a client does (the storefront in a Web
/// Worker; the tests and the demo here).
pub fn solve(challenge: &Challenge) -> String {
    (0u64..)
        .map(|n| n.to_string())
        .find(|n| leading_zero_bits(&challenge.challenge, n) >= challenge.difficulty)
        .expect("some nonce solves any difficulty up to 256 bits")
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_000_000;

    fn issued(difficulty: u32) -> Challenge {
        issue(b"k", "e1", "u1", difficulty, NOW)
    }

    #[test]
    fn a_solved_challenge_verifies_with_its_difficulty_and_ttl() {
        let c = issued(8);
        let nonce = solve(&c);
        let proof = verify(b"k", "e1", "u1", &c.challenge, &nonce, NOW + 1).unwrap();
        assert_eq!((proof.difficulty, proof.ttl_ms), (8, CHALLENGE_TTL_MS - 1));
        assert_eq!(proof.id.len(), 32, "128 random bits");
        assert!(leading_zero_bits(&c.challenge, &nonce) >= 8);
    }

    #[test]
    fn forged_foreign_expired_and_unsolved_challenges_are_refused() {
        let c = issued(8);
        let nonce = solve(&c);
        let refused = |secret: &[u8], event, user, challenge: &str, nonce: &str, now| {
            verify(secret, event, user, challenge, nonce, now)
                .unwrap_err()
                .code()
        };
        let bad = ErrorCode::BadChallenge;
        assert_eq!(refused(b"x", "e1", "u1", &c.challenge, &nonce, NOW), bad);
        assert_eq!(refused(b"k", "e2", "u1", &c.challenge, &nonce, NOW), bad);
        assert_eq!(refused(b"k", "e1", "u2", &c.challenge, &nonce, NOW), bad);
        let late = NOW + CHALLENGE_TTL_MS;
        assert_eq!(refused(b"k", "e1", "u1", &c.challenge, &nonce, late), bad);
        assert_eq!(refused(b"k", "e1", "u1", "c1.AAAA.AAAA", &nonce, NOW), bad);
        assert_eq!(refused(b"k", "e1", "u1", &c.challenge, "", NOW), bad);
        assert_eq!(refused(b"k", "e1", "u1", &c.challenge, "1 2", NOW), bad);
        // A nonce that does not reach the difficulty.
        let weak = (0u64..)
            .map(|n| n.to_string())
            .find(|n| leading_zero_bits(&c.challenge, n) < 8)
            .unwrap();
        assert_eq!(refused(b"k", "e1", "u1", &c.challenge, &weak, NOW), bad);
        // A lower difficulty written into the payload breaks the signature.
        let (_, rest) = c.challenge.split_once('.').unwrap();
        let (payload, sig) = rest.split_once('.').unwrap();
        let payload = String::from_utf8(B64.decode(payload).unwrap()).unwrap();
        let easier = payload.replace("\n8\n", "\n0\n");
        let forged = format!("c1.{}.{sig}", B64.encode(easier));
        assert_eq!(refused(b"k", "e1", "u1", &forged, "0", NOW), bad);
    }

    #[test]
    fn difficulty_zero_takes_any_nonce() {
        let c = issued(0);
        assert!(verify(b"k", "e1", "u1", &c.challenge, "0", NOW).is_ok());
    }
}
