//! The client's side of the admission gate: finding a nonce such that SHA-256 of
//! `challenge:nonce` starts with `difficulty` zero bits, as the storefront's Web Worker does.
//! Written apart from the app's checker, so the two hold each other to the scheme.

use sha2::{Digest, Sha256};

/// Leading zero bits of `hash`.
fn zero_bits(hash: &[u8]) -> u32 {
    let mut bits = 0;
    for &b in hash {
        if b != 0 {
            return bits + b.leading_zeros();
        }
        bits += 8;
    }
    bits
}

/// Whether `nonce` solves `challenge` at `difficulty`.
pub fn solves(challenge: &str, nonce: &str, difficulty: u32) -> bool {
    zero_bits(&Sha256::digest(format!("{challenge}:{nonce}"))) >= difficulty
}

/// The first decimal nonce that solves `challenge` at `difficulty`.
pub fn solve(challenge: &str, difficulty: u32) -> String {
    (0u64..)
        .map(|n| n.to_string())
        .find(|n| solves(challenge, n, difficulty))
        .expect("a nonce exists")
}
