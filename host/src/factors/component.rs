//! A component's configuration, resolved once at startup (templates expanded, hosts parsed):
//! what the factors read about the component an instance runs, as Spin's factors read the
//! component in `Factor::prepare` (`crates/factors/src/factor.rs`).

use crate::factors::allowed_hosts::AllowedHosts;

/// A component's configuration, resolved once at startup.
#[derive(Debug, Default)]
pub struct ComponentConfig {
    /// `[component.<id>]`.
    pub id: String,
    /// `allowed_outbound_hosts`, templates already expanded.
    pub allowed_hosts: AllowedHosts,
    /// `environment`, passed to the guest through WASI.
    pub environment: Vec<(String, String)>,
}
