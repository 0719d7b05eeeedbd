//! A component's configuration, resolved once at startup (templates expanded, hosts parsed):
//! what the factors read about the component an instance runs, as Spin's factors read the
//! component in `Factor::prepare` (`crates/factors/src/factor.rs`).

use std::collections::BTreeMap;

use crate::factors::allowed_hosts::AllowedHosts;

/// A component's resolved variables (name → value).
pub type ComponentVariables = BTreeMap<String, String>;

/// A component's configuration, resolved once at startup.
#[derive(Debug, Default)]
pub struct ComponentConfig {
    /// `[component.<id>]`.
    pub id: String,
    /// Component variables, templates already expanded.
    pub variables: ComponentVariables,
    /// `allowed_outbound_hosts`, templates already expanded.
    pub allowed_hosts: AllowedHosts,
    /// `environment`, passed to the guest through WASI.
    pub environment: Vec<(String, String)>,
}
