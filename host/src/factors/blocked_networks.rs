//! Networks outbound HTTP may not reach, from the runtime configuration's
//! `[outbound_networking] block_networks` (CIDRs, and `"private"` for every address that is not
//! globally routable), as Spin 3.6.3 reads and applies them:
//! `crates/factor-outbound-networking/src/runtime_config/spin.rs` (the table),
//! `crates/outbound-networking-config/src/blocked_networks.rs` (`is_blocked`, with the
//! `ip_network` crate's `is_global`, an IPv4-compatible IPv6 address checked as IPv4) and
//! `crates/factor-outbound-http/src/lib.rs` (`remove_blocked_addrs`: a destination whose every
//! address is blocked fails with `destination-ip-prohibited`).
//!
//! It guards what `allowed_outbound_hosts` cannot: a component allowed `https://*:*` (to reach
//! endpoints registered at run time) must still not reach the deployment's own network.

use std::net::IpAddr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use ip_network::IpNetwork;

/// A cheaply cloned set of blocked networks; empty blocks nothing.
#[derive(Debug, Clone, Default)]
pub struct BlockedNetworks {
    networks: Arc<Vec<IpNetwork>>,
    /// Every address that is not globally routable.
    private: bool,
}

impl BlockedNetworks {
    /// `networks`, and the private ones too when `private`.
    pub fn new(networks: Vec<IpNetwork>, private: bool) -> Self {
        BlockedNetworks {
            networks: Arc::new(networks),
            private,
        }
    }

    /// The `[outbound_networking]` table of a runtime configuration, if it has one: its
    /// `block_networks` entries are CIDRs or `"private"`.
    pub fn from_runtime_config(table: &toml::Table) -> Result<Option<Self>> {
        let Some(section) = table.get("outbound_networking") else {
            return Ok(None);
        };
        let section = section
            .as_table()
            .context("[outbound_networking] is not a table")?;
        let mut networks = Vec::new();
        let mut private = false;
        for (key, value) in section {
            if key != "block_networks" {
                bail!("[outbound_networking] has no key {key:?} (Spin's has block_networks)");
            }
            let entries = value.as_array().context("block_networks is not an array")?;
            for entry in entries {
                match entry.as_str() {
                    Some("private") => private = true,
                    Some(cidr) => networks.push(
                        IpNetwork::from_str_truncate(cidr)
                            .map_err(|e| anyhow::anyhow!("block_networks: {cidr:?}: {e}"))?,
                    ),
                    None => bail!("block_networks: {entry} is not a string"),
                }
            }
        }
        Ok(Some(BlockedNetworks::new(networks, private)))
    }

    /// Whether nothing is blocked.
    pub fn is_empty(&self) -> bool {
        !self.private && self.networks.is_empty()
    }

    /// Whether `addr` may not be reached.
    pub fn is_blocked(&self, addr: IpAddr) -> bool {
        if self.private && !IpNetwork::from(addr).is_global() {
            return true;
        }
        if self.networks.iter().any(|n| n.contains(addr)) {
            return true;
        }
        match addr {
            IpAddr::V6(v6) => v6
                .to_ipv4()
                .is_some_and(|v4| self.is_blocked(IpAddr::V4(v4))),
            IpAddr::V4(_) => false,
        }
    }
}

/// A destination whose every address is blocked (`destination-ip-prohibited`).
#[derive(Debug, thiserror::Error)]
#[error("every address of the destination is blocked by the runtime configuration")]
pub struct Prohibited;

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(toml: &str) -> BlockedNetworks {
        BlockedNetworks::from_runtime_config(&toml.parse().unwrap())
            .unwrap()
            .unwrap()
    }

    #[test]
    fn private_blocks_every_address_that_is_not_global() {
        let b = blocked("[outbound_networking]\nblock_networks = [\"private\"]");
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "169.254.169.254",
            "::1",
            "fe80::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(b.is_blocked(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["1.1.1.1", "2606:4700:4700::1111"] {
            assert!(!b.is_blocked(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn cidrs_block_their_addresses_ipv4_compatible_ones_too() {
        let b = blocked("[outbound_networking]\nblock_networks = [\"1.1.1.0/24\"]");
        assert!(b.is_blocked("1.1.1.7".parse().unwrap()));
        assert!(b.is_blocked("::ffff:1.1.1.7".parse().unwrap()));
        assert!(!b.is_blocked("1.1.2.1".parse().unwrap()));
        assert!(!b.is_blocked("127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn a_config_without_the_table_blocks_nothing_and_bad_entries_are_refused() {
        let none = BlockedNetworks::from_runtime_config(&toml::Table::new()).unwrap();
        assert!(none.is_none());
        for bad in [
            "[outbound_networking]\nblock_networks = [\"not-a-cidr\"]",
            "[outbound_networking]\nblock_networks = [1]",
            "[outbound_networking]\nallow = []",
        ] {
            assert!(
                BlockedNetworks::from_runtime_config(&bad.parse().unwrap()).is_err(),
                "{bad}"
            );
        }
    }
}
