//! Client addresses and the ranges that name them. An address is compared in its canonical
//! form: an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, how a dual-stack socket reports an IPv4
//! peer) is the IPv4 address, so a rule written either way matches both.
//!
//! Redis sees addresses and ranges as bit strings ([`bits`], [`Cidr::bits`]): the family (`4:`
//! or `6:`) and then one `0`/`1` per bit, all 32 or 128 of an address, the prefix's of a range.
//! A range holds an address exactly when its bit string is a prefix of the address's, which a
//! script tests with one `SISMEMBER` per prefix length in use (`crates/domain/lua/precheck.lua`).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

/// The canonical form of `addr`: IPv4-mapped IPv6 folded to IPv4.
pub fn canonical(addr: IpAddr) -> IpAddr {
    addr.to_canonical()
}

/// The IPv6 prefix whose addresses share one admission bucket by default: a /64 is what one
/// subscriber (a home, a phone) is given, and a client may take any address in it.
pub const DEFAULT_IPV6_BUCKET_PREFIX: u8 = 64;

/// The name of the admission bucket `addr` draws from: an IPv4 address itself; an IPv6
/// address its `/v6_prefix` network (`2001:db8:1:2::/64`), so rotating through one's own
/// prefix gains nothing.
pub fn bucket_key(addr: IpAddr, v6_prefix: u8) -> String {
    match canonical(addr) {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => ipnet::Ipv6Net::new(v6, v6_prefix.min(128))
            .map(|n| n.trunc().to_string())
            .unwrap_or_else(|_| v6.to_string()),
    }
}

/// The bit string of `addr`'s canonical form (every bit of it).
pub fn bits(addr: IpAddr) -> String {
    let addr = canonical(addr);
    prefix_bits(addr, max_len(addr))
}

/// A range of addresses (CIDR), canonical: IPv4-mapped IPv6 ranges are IPv4 ranges and the bits
/// past the prefix are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(IpNet);

/// Text that is not an address or a range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an IP address or a CIDR range (a.b.c.d/n, v6/n)")]
pub struct NotACidr(pub String);

impl FromStr for Cidr {
    type Err = NotACidr;

    /// `a.b.c.d/n`, `v6/n`, or a bare address: a range of one.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let net = match s.parse::<IpNet>() {
            Ok(net) => net,
            Err(_) => IpNet::from(s.parse::<IpAddr>().map_err(|_| NotACidr(s.into()))?),
        };
        let net = match net {
            IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
                Some(v4) => IpNet::new(v4.into(), v6.prefix_len() - 96).expect("32 bits at most"),
                None => net,
            },
            _ => net,
        };
        Ok(Cidr(net.trunc()))
    }
}

impl Cidr {
    /// Whether `addr` (in any form) is in the range.
    pub fn contains(&self, addr: IpAddr) -> bool {
        self.0.contains(&canonical(addr))
    }

    /// The prefix's bit string.
    pub fn bits(&self) -> String {
        prefix_bits(self.0.network(), self.0.prefix_len())
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

fn max_len(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// The family and the first `len` bits of `addr`.
fn prefix_bits(addr: IpAddr, len: u8) -> String {
    let (family, value) = match addr {
        IpAddr::V4(a) => ('4', u128::from(u32::from(a)) << 96),
        IpAddr::V6(a) => ('6', u128::from(a)),
    };
    let mut s = String::with_capacity(2 + usize::from(len));
    s.push(family);
    s.push(':');
    s.extend((0..len).map(|i| {
        if value >> (127 - i) & 1 == 1 {
            '1'
        } else {
            '0'
        }
    }));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_ipv6_client_shares_its_prefix_bucket_and_ipv4_keeps_its_address() {
        let a = bucket_key(ip("2001:db8:1:2::1"), 64);
        assert_eq!(a, "2001:db8:1:2::/64");
        assert_eq!(bucket_key(ip("2001:db8:1:2:ffff:ee:dd:cc"), 64), a);
        assert_ne!(bucket_key(ip("2001:db8:1:3::1"), 64), a);
        assert_eq!(bucket_key(ip("2001:db8:1:3::1"), 48), "2001:db8:1::/48");
        assert_eq!(bucket_key(ip("2001:db8::1"), 128), "2001:db8::1/128");
        assert_eq!(bucket_key(ip("192.0.2.7"), 64), "192.0.2.7");
        assert_eq!(bucket_key(ip("::ffff:192.0.2.7"), 64), "192.0.2.7");
    }

    fn cidr(s: &str) -> Cidr {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn ipv4_mapped_addresses_are_their_ipv4_address() {
        assert_eq!(canonical(ip("::ffff:1.2.3.4")), ip("1.2.3.4"));
        assert_eq!(canonical(ip("::ffff:0102:0304")), ip("1.2.3.4"));
        assert_eq!(canonical(ip("2001:db8::1")), ip("2001:db8::1"));
        // IPv4-compatible (deprecated) addresses are IPv6, as std and the kernel treat them.
        assert_eq!(canonical(ip("::1.2.3.4")), ip("::1.2.3.4"));
        assert_eq!(bits(ip("::ffff:1.2.3.4")), bits(ip("1.2.3.4")));
    }

    #[test]
    fn ranges_parse_in_every_form_and_are_canonical() {
        for (text, shown) in [
            ("10.1.2.0/24", "10.1.2.0/24"),
            ("10.1.2.77/24", "10.1.2.0/24"),
            ("10.1.2.3", "10.1.2.3/32"),
            ("0.0.0.0/0", "0.0.0.0/0"),
            ("2001:db8::/32", "2001:db8::/32"),
            ("2001:DB8::1", "2001:db8::1/128"),
            ("::/0", "::/0"),
            ("::ffff:10.1.2.0/120", "10.1.2.0/24"),
            ("::ffff:10.1.2.3", "10.1.2.3/32"),
            ("::ffff:0:0/96", "0.0.0.0/0"),
        ] {
            assert_eq!(cidr(text).to_string(), shown, "{text}");
        }
        for bad in [
            "",
            "10.1.2.0/33",
            "2001:db8::/129",
            "10.1.2.0/",
            "/24",
            "10.1.2/24",
            "10.1.2.0/-1",
            "10.1.2.0/24/8",
            " 10.1.2.0/24",
            "[::1]",
            "10.0.0.1:80",
            "fe80::1%eth0",
            "host.example",
        ] {
            assert_eq!(bad.parse::<Cidr>(), Err(NotACidr(bad.into())), "{bad:?}");
        }
    }

    #[test]
    fn a_range_contains_the_addresses_under_its_prefix_in_either_form() {
        let net = cidr("198.51.100.0/24");
        assert!(net.contains(ip("198.51.100.0")));
        assert!(net.contains(ip("198.51.100.255")));
        assert!(net.contains(ip("::ffff:198.51.100.7")));
        assert!(!net.contains(ip("198.51.101.0")));
        assert!(!net.contains(ip("::198.51.100.7")));
        assert!(cidr("0.0.0.0/0").contains(ip("203.0.113.9")));
        assert!(!cidr("0.0.0.0/0").contains(ip("2001:db8::1")));
        assert!(!cidr("::/0").contains(ip("::ffff:203.0.113.9")));
        assert!(cidr("2001:db8::/32").contains(ip("2001:db8:ffff::1")));
        assert!(!cidr("2001:db8::/32").contains(ip("2001:db9::1")));
        assert!(cidr("::ffff:10.0.0.0/104").contains(ip("10.200.0.1")));
    }

    #[test]
    fn a_range_holds_an_address_exactly_when_its_bits_prefix_the_addresss() {
        assert_eq!(bits(ip("1.2.3.4")), format!("4:{:032b}", 0x0102_0304));
        assert_eq!(
            bits(ip("2001:db8::1")),
            format!("6:{:0128b}", 0x2001_0db8u128 << 96 | 1)
        );
        assert_eq!(cidr("1.2.3.0/24").bits(), format!("4:{:024b}", 0x01_0203));
        assert_eq!(cidr("0.0.0.0/0").bits(), "4:");
        assert_eq!(cidr("::/0").bits(), "6:");
        let clients = [
            "1.2.3.4",
            "1.2.4.4",
            "::ffff:1.2.3.200",
            "2001:db8::1",
            "::1.2.3.4",
        ];
        for range in [
            "1.2.3.0/24",
            "1.0.0.0/8",
            "1.2.3.4",
            "0.0.0.0/0",
            "2001:db8::/32",
            "::/0",
        ] {
            let net = cidr(range);
            for client in clients {
                assert_eq!(
                    bits(ip(client)).starts_with(&net.bits()),
                    net.contains(ip(client)),
                    "{range} {client}"
                );
            }
        }
    }
}
