//! Object ids shaped like Stripe's (`cs_test_` + 58 characters, `pi_` + 24, …; the prefixes
//! of <https://docs.stripe.com/api> — Stripe documents that ids are opaque, so nothing may
//! parse them) and the sandbox's clock.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// splitmix64 over a process-wide counter seeded from the clock and the pid: unique, and
/// unpredictable enough that ids from two runs never collide.
fn next_u64() -> u64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ (u64::from(std::process::id()) << 32)
    });
    let mut z = seed.wrapping_add(
        STATE
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `prefix` followed by `len` base-62 characters.
pub(crate) fn new_id(prefix: &str, len: usize) -> String {
    let mut out = String::with_capacity(prefix.len() + len);
    out.push_str(prefix);
    let mut bits = next_u64();
    let mut left = 10; // 62^10 < 2^64
    for _ in 0..len {
        if left == 0 {
            bits = next_u64();
            left = 10;
        }
        out.push(ALPHABET[(bits % 62) as usize] as char);
        bits /= 62;
        left -= 1;
    }
    out
}

/// Unix seconds of the wall clock.
pub(crate) fn wall_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The sandbox's clock: the wall clock plus an offset a test may advance, so a session's
/// 30-minute minimum lifetime, the idempotency keys' 24 h and the events' 30 days pass
/// without waiting. Webhook signatures keep the wall clock: the receiver checks them
/// against its own.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    offset_s: AtomicI64,
}

impl Clock {
    pub fn now(&self) -> i64 {
        wall_s() + self.offset_s.load(Ordering::Relaxed)
    }

    pub fn advance(&self, secs: i64) {
        self.offset_s.fetch_add(secs, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_shaped() {
        let a = new_id("cs_test_", 58);
        let b = new_id("cs_test_", 58);
        assert_ne!(a, b);
        assert_eq!(a.len(), 66);
        assert!(a[8..].bytes().all(|c| c.is_ascii_alphanumeric()));
    }
}
