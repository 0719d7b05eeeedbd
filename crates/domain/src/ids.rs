//! Identifiers and randomness: home shards, order ids, one-time tokens.

use crate::error::{Error, ErrorCode};

/// An order id from a client: 1–64 hex digits (what [`new_order_id`] makes), safe inside SQL
/// parameters, Redis fields and URLs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OrderId(String);

impl OrderId {
    /// Validates an id from a URL.
    pub fn parse(raw: &str) -> Result<Self, Error> {
        if !raw.is_empty() && raw.len() <= 64 && raw.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(OrderId(raw.to_owned()))
        } else {
            Err(Error::invalid(
                ErrorCode::BadOrderId,
                "order ids are 1-64 hex digits",
            ))
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// 64-bit FNV-1a followed by SplitMix64's finalizer: FNV alone clusters sequential ids
/// ("user1", "user2", …) into neighbouring values, and uneven hashing strands stock on busy
/// shards; the finalizer spreads them over all shards.
pub fn hash64(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The hash a user's home shard is picked with ([`home_of`]), here and by the sale scripts: 31
/// bits of [`hash64`], because Lua numbers are doubles and 31 bits keep the modulo exact and
/// even.
pub fn home_hash(event: &str, user: &str) -> u64 {
    hash64(&[event, user]) & 0x7fff_ffff
}

/// The shard a user buys from first: a user's clicks always start at the same shard and users
/// spread evenly.
pub fn home_shard(event: &str, user: &str, shards: u32) -> u32 {
    home_of(home_hash(event, user), shards)
}

/// The home shard, among `shards`, of the user whose [`home_hash`] is `hash`: the one formula,
/// the one the sale scripts hold a request to (`home_hash % shards`, `not_home` in
/// `crates/domain/lua/lib/sale.lua`).
pub fn home_of(hash: u64, shards: u32) -> u32 {
    (hash % u64::from(shards.max(1))) as u32
}

/// A user's place in an event's gray release, 0-99: the user passes precheck while it is below
/// the event's `gray_percent`. Stable (raising the share only lets more in) and independent of
/// the home shard (every shard lets in the same share).
pub fn gray_bucket(event: &str, user: &str) -> u32 {
    (hash64(&["gray", event, user]) % 100) as u32
}

/// `n` random bytes, hex-encoded (WASI's random source in a guest, the OS's natively).
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).expect("the platform has a random source");
    hex(&bytes)
}

/// `bytes`, hex-encoded (lowercase).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new order id: time-ordered (ms, hex) then 64 random bits, unique without coordination.
pub fn new_order_id(now_ms: u64) -> String {
    format!("{now_ms:012x}{}", random_hex(8))
}

/// A one-time purchase token: 128 random bits.
pub fn new_purchase_token() -> String {
    random_hex(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_users_spread_evenly_over_shards() {
        for shards in [7u32, 8, 32] {
            let mut counts = vec![0u32; shards as usize];
            let users = 64_000;
            for i in 0..users {
                counts[home_shard("event-1", &format!("user{i}"), shards) as usize] += 1;
            }
            let expected = users / shards;
            for (s, c) in counts.iter().enumerate() {
                let off = (*c as f64 - expected as f64).abs() / expected as f64;
                assert!(
                    off < 0.1,
                    "shard {s} of {shards} got {c}, expected ~{expected}"
                );
            }
        }
    }

    #[test]
    fn order_ids_are_hex_of_bounded_length() {
        let made = new_order_id(1_764_000_000_000);
        assert_eq!(OrderId::parse(&made).unwrap().as_str(), made);
        for bad in ["", "xyz", "12 34", &"a".repeat(65)] {
            assert_eq!(
                OrderId::parse(bad).unwrap_err().code(),
                ErrorCode::BadOrderId,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn ids_are_unique_and_sortable_by_time() {
        let a = new_order_id(1);
        let b = new_order_id(2);
        assert_ne!(new_order_id(1), a);
        assert!(a < b);
        assert_eq!(new_purchase_token().len(), 32);
    }
}
