//! What real Spin 3.6.3 would pay per request, counted. This host resolves variables and parses
//! `allowed_outbound_hosts` once at startup, so none of this costs it anything; Spin pays it in
//! every instance, and the counters make that visible where Spin is not installed (the tests pin
//! a budget per route, the benchmark prints it). In Spin-faithful mode the host also does that
//! work per instance ([`SpinWork`]), so the benchmark's faithful rows include its time.
//!
//! What Spin pays, from its source at `v3.6.3`:
//! - **First allowed-hosts check of an instance.** `OutboundNetworkingFactor::prepare`
//!   (`crates/factor-outbound-networking/src/lib.rs`) builds, per instance, a shared future that
//!   `OutboundAllowedHosts::check_url`/`check_relative_url`
//!   (`crates/outbound-networking-config/src/lib.rs`) awaits on the first check: it runs
//!   `ProviderResolver::prepare` (`crates/expressions/src/lib.rs`), which resolves **every**
//!   application variable through the providers, then `AllowedHostsConfig::parse`
//!   (`crates/outbound-networking-config/src/allowed_hosts.rs`), which parses **every** entry of the
//!   component's `allowed_outbound_hosts`. Later checks of the same instance reuse the result.
//! - **Each check is an outbound open**: Redis `open` (`crates/factor-outbound-redis/src/host.rs`,
//!   then a new connection), Postgres `open` (`crates/factor-outbound-pg/src/allowed_hosts.rs`,
//!   then a client from the pool), and every outbound HTTP request
//!   (`crates/factor-outbound-http/src/wasi.rs`, `prepare_request`; the connection is pooled).
//! - **Each `variables::get`** (`crates/factor-variables/src/host.rs`) runs
//!   `ProviderResolver::resolve`: one provider lookup per `{{ variable }}` its component
//!   variable's template names (`resolve_template`); an invalid or undefined name looks up nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::allowed_hosts::AllowedHost;
use crate::component::ComponentConfig;
use crate::manifest::{ComponentDef, ManifestFile};
use crate::variables::{self, Providers};

/// What Spin would pay: per request, or summed over requests (see [`SpinCostTotals`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpinCosts {
    /// Variable lookups through Spin's providers: every application variable on the first
    /// outbound open, plus those of each `get`.
    pub variable_lookups: u64,
    /// Of those, the `variables::get` calls the guest made.
    pub variable_gets: u64,
    /// Redis and Postgres `open`s and outbound HTTP requests, each checked against
    /// `allowed_outbound_hosts`.
    pub outbound_opens: u64,
    /// `allowed_outbound_hosts` entries parsed: all of the component's, on the first open.
    pub allowed_host_entries_parsed: u64,
}

/// A component's counts since the last reset: `costs` summed over `instances` (one per request
/// or cron run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpinCostTotals {
    /// Instances created.
    pub instances: u64,
    /// What they would have cost Spin, in all.
    pub costs: SpinCosts,
}

/// One component's running counts, shared by all its instances.
#[derive(Debug, Default)]
pub struct ComponentCosts {
    instances: AtomicU64,
    variable_lookups: AtomicU64,
    variable_gets: AtomicU64,
    outbound_opens: AtomicU64,
    allowed_host_entries_parsed: AtomicU64,
}

impl ComponentCosts {
    /// The counts so far.
    pub fn totals(&self) -> SpinCostTotals {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SpinCostTotals {
            instances: get(&self.instances),
            costs: SpinCosts {
                variable_lookups: get(&self.variable_lookups),
                variable_gets: get(&self.variable_gets),
                outbound_opens: get(&self.outbound_opens),
                allowed_host_entries_parsed: get(&self.allowed_host_entries_parsed),
            },
        }
    }

    /// Zeroes the counts.
    pub fn reset(&self) {
        for c in [
            &self.instances,
            &self.variable_lookups,
            &self.variable_gets,
            &self.outbound_opens,
            &self.allowed_host_entries_parsed,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }

    fn add(counter: &AtomicU64, n: u64) {
        if n > 0 {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// One instance's meter, shared by its outbound factors and its variables factor as Spin shares
/// one `OutboundAllowedHosts` (and so one resolution) among an instance's outbound factors. It
/// adds straight to the component's counts, so they are complete once a response is out.
#[derive(Debug)]
pub struct InstanceMeter {
    component: Arc<ComponentConfig>,
    costs: Arc<ComponentCosts>,
    /// Whether the instance's allowed hosts have been resolved (Spin's shared future has run).
    resolved: AtomicBool,
}

impl InstanceMeter {
    /// The meter of a new instance of `component`, counting into `costs`.
    pub fn new(component: Arc<ComponentConfig>, costs: Arc<ComponentCosts>) -> Arc<Self> {
        ComponentCosts::add(&costs.instances, 1);
        Arc::new(InstanceMeter {
            component,
            costs,
            resolved: AtomicBool::new(false),
        })
    }

    /// An outbound open (Redis or Postgres `open`, an HTTP request): Spin checks it against
    /// `allowed_outbound_hosts`, resolving every application variable and parsing every entry
    /// on the instance's first check.
    pub fn outbound_open(&self) {
        ComponentCosts::add(&self.costs.outbound_opens, 1);
        if !self.resolved.swap(true, Ordering::Relaxed) {
            if let Some(work) = &self.component.spin_work {
                work.prepare();
            }
            ComponentCosts::add(
                &self.costs.variable_lookups,
                self.component.app_variables as u64,
            );
            ComponentCosts::add(
                &self.costs.allowed_host_entries_parsed,
                self.component.allowed_host_entries as u64,
            );
        }
    }

    /// A `variables::get` of `name`: one lookup per application variable its template names
    /// (none for a name the component does not define).
    pub fn variable_get(&self, name: &str) {
        if let Some(work) = &self.component.spin_work {
            work.get(&self.component, name);
        }
        ComponentCosts::add(&self.costs.variable_gets, 1);
        let lookups = self.component.variable_refs.get(name).map_or(0, Vec::len);
        ComponentCosts::add(&self.costs.variable_lookups, lookups as u64);
    }

    /// A meter for `component` alone, for a factor's own tests.
    #[cfg(test)]
    pub(crate) fn detached(component: Arc<ComponentConfig>) -> Arc<Self> {
        Self::new(component, Arc::default())
    }
}

/// What Spin redoes per instance, done for real in Spin-faithful mode (`--spin-faithful`), so
/// that mode's figures include it: on the first outbound open, every application variable
/// looked up through the providers and every `allowed_outbound_hosts` entry expanded and parsed;
/// on each `get`, the application variables its template names looked up. Each lookup runs as
/// Spin's environment provider runs it, in `tokio::task::block_in_place`
/// (`crates/variables/src/env.rs`, `EnvVariablesProvider::get`).
#[derive(Debug)]
pub struct SpinWork {
    providers: Providers,
    /// `[variables]`: each name and its default.
    app_variables: Vec<(String, Option<String>)>,
    /// The component's `allowed_outbound_hosts`, as written.
    hosts: Vec<String>,
}

impl SpinWork {
    /// The work of an instance of `def` in `file`, looking up through `providers`.
    pub(crate) fn new(file: &ManifestFile, def: &ComponentDef, providers: &Providers) -> Self {
        SpinWork {
            providers: providers.clone(),
            app_variables: file
                .manifest
                .variables
                .iter()
                .map(|(k, d)| (k.get_ref().clone(), d.default.clone()))
                .collect(),
            hosts: def
                .allowed_outbound_hosts
                .iter()
                .map(|h| h.get_ref().clone())
                .collect(),
        }
    }

    /// One provider lookup, blocking the worker as Spin's does (not possible, and so not done,
    /// on a current-thread runtime).
    fn lookup(&self, name: &str) -> Option<String> {
        let look = || self.providers.lookup(name);
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(look),
            _ => look(),
        }
    }

    /// The first outbound open: every application variable, then every entry.
    fn prepare(&self) {
        let values: HashMap<String, String> = self
            .app_variables
            .iter()
            .filter_map(|(name, default)| {
                let value = self.lookup(name).or_else(|| default.clone())?;
                Some((name.clone(), value))
            })
            .collect();
        for host in &self.hosts {
            let parsed = variables::parse_template(host)
                .and_then(|parts| variables::expand(&parts, &values))
                .map(|h| AllowedHost::parse(&h).is_ok());
            let _ = std::hint::black_box(parsed);
        }
    }

    /// A `get` of `name` in `component`: the application variables its template names.
    fn get(&self, component: &ComponentConfig, name: &str) {
        for app_variable in component.variable_refs.get(name).into_iter().flatten() {
            std::hint::black_box(self.lookup(app_variable));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component() -> Arc<ComponentConfig> {
        Arc::new(ComponentConfig {
            id: "c".into(),
            app_variables: 16,
            allowed_host_entries: 4,
            variable_refs: [
                ("redis_url".to_owned(), vec!["redis_url".to_owned()]),
                ("literal".to_owned(), Vec::new()),
            ]
            .into(),
            ..ComponentConfig::default()
        })
    }

    /// The first open pays for every application variable and entry; later opens of the same
    /// instance only count; a new instance pays again.
    #[test]
    fn the_first_open_of_each_instance_resolves_everything() {
        let costs = Arc::new(ComponentCosts::default());
        let meter = InstanceMeter::new(component(), costs.clone());
        meter.variable_get("redis_url");
        meter.variable_get("literal");
        meter.outbound_open();
        meter.outbound_open();
        let expected = SpinCosts {
            variable_lookups: 16 + 1,
            variable_gets: 2,
            outbound_opens: 2,
            allowed_host_entries_parsed: 4,
        };
        assert_eq!(
            costs.totals(),
            SpinCostTotals {
                instances: 1,
                costs: expected
            }
        );
        let again = InstanceMeter::new(component(), costs.clone());
        again.outbound_open();
        assert_eq!(costs.totals().instances, 2);
        assert_eq!(costs.totals().costs.variable_lookups, 17 + 16);
        assert_eq!(costs.totals().costs.allowed_host_entries_parsed, 8);
        costs.reset();
        assert_eq!(costs.totals(), SpinCostTotals::default());
    }

    /// An instance that opens nothing pays only its gets.
    #[test]
    fn no_open_no_resolution() {
        let costs = Arc::new(ComponentCosts::default());
        let meter = InstanceMeter::new(component(), costs.clone());
        meter.variable_get("redis_url");
        assert_eq!(
            costs.totals().costs,
            SpinCosts {
                variable_lookups: 1,
                variable_gets: 1,
                ..SpinCosts::default()
            }
        );
    }
}
