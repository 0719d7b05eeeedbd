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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::factors::allowed_hosts::AllowedHost;
use crate::manifest::expressions::{self, Part, Providers};
use crate::manifest::{ComponentDef, ManifestFile};

/// What a component's instances pay Spin for, read from the manifest once: the facts the
/// counts are made of, and in Spin-faithful mode the work itself.
#[derive(Debug, Default)]
pub struct CostModel {
    /// The application variables (`[variables]`), all resolved on an instance's first outbound
    /// open,
    pub app_variables: u32,
    /// the component's `allowed_outbound_hosts` entries, all parsed then too,
    pub allowed_host_entries: u32,
    /// and, per component variable, the application variables its template names, which each
    /// `get` of it resolves.
    pub variable_refs: BTreeMap<String, Vec<String>>,
    /// In Spin-faithful mode, that work itself, done again per instance as Spin does it.
    pub spin_work: Option<SpinWork>,
}

impl CostModel {
    /// The model of component `def` of `file`; with `providers` (Spin-faithful mode), doing
    /// Spin's work too. The templates were checked when the component was resolved.
    pub(crate) fn new(
        file: &ManifestFile,
        def: &ComponentDef,
        providers: Option<&Providers>,
    ) -> Self {
        let variable_refs = def
            .variables
            .iter()
            .map(|(name, template)| {
                let refs = expressions::parse_template(template.get_ref())
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|part| match part {
                        Part::Variable(app_variable) => Some(app_variable),
                        Part::Literal(_) => None,
                    })
                    .collect();
                (name.get_ref().clone(), refs)
            })
            .collect();
        CostModel {
            // Spin's `ProviderResolver::prepare` resolves every declared variable.
            app_variables: file.manifest.variables.len() as u32,
            allowed_host_entries: def.allowed_outbound_hosts.len() as u32,
            variable_refs,
            spin_work: providers.map(|p| SpinWork::new(file, def, p)),
        }
    }
}

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

/// One component's running counts, shared by all its instances, and what they are counted by.
#[derive(Debug, Default)]
pub struct ComponentCosts {
    model: CostModel,
    instances: AtomicU64,
    variable_lookups: AtomicU64,
    variable_gets: AtomicU64,
    outbound_opens: AtomicU64,
    allowed_host_entries_parsed: AtomicU64,
}

impl ComponentCosts {
    /// Zero counts of a component whose instances pay as `model` says.
    pub fn new(model: CostModel) -> Self {
        ComponentCosts {
            model,
            ..ComponentCosts::default()
        }
    }

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
    costs: Arc<ComponentCosts>,
    /// Whether the instance's allowed hosts have been resolved (Spin's shared future has run).
    resolved: AtomicBool,
}

impl InstanceMeter {
    /// The meter of a new instance, counting into its component's `costs`.
    pub fn new(costs: Arc<ComponentCosts>) -> Arc<Self> {
        ComponentCosts::add(&costs.instances, 1);
        Arc::new(InstanceMeter {
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
            let model = &self.costs.model;
            if let Some(work) = &model.spin_work {
                work.prepare();
            }
            ComponentCosts::add(&self.costs.variable_lookups, model.app_variables as u64);
            ComponentCosts::add(
                &self.costs.allowed_host_entries_parsed,
                model.allowed_host_entries as u64,
            );
        }
    }

    /// A `variables::get` of `name`: one lookup per application variable its template names
    /// (none for a name the component does not define).
    pub fn variable_get(&self, name: &str) {
        let model = &self.costs.model;
        let refs = model.variable_refs.get(name).map_or(&[][..], Vec::as_slice);
        if let Some(work) = &model.spin_work {
            work.get(refs);
        }
        ComponentCosts::add(&self.costs.variable_gets, 1);
        ComponentCosts::add(&self.costs.variable_lookups, refs.len() as u64);
    }

    /// A meter that counts for no one, for a factor's own tests.
    #[cfg(test)]
    pub(crate) fn detached() -> Arc<Self> {
        Self::new(Arc::default())
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
            let parsed = expressions::parse_template(host)
                .and_then(|parts| expressions::expand(&parts, &values))
                .map(|h| AllowedHost::parse(&h).is_ok());
            let _ = std::hint::black_box(parsed);
        }
    }

    /// A `get` of a variable whose template names the application variables `refs`.
    fn get(&self, refs: &[String]) {
        for app_variable in refs {
            std::hint::black_box(self.lookup(app_variable));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs() -> Arc<ComponentCosts> {
        Arc::new(ComponentCosts::new(CostModel {
            app_variables: 16,
            allowed_host_entries: 4,
            variable_refs: [
                ("redis_url".to_owned(), vec!["redis_url".to_owned()]),
                ("literal".to_owned(), Vec::new()),
            ]
            .into(),
            spin_work: None,
        }))
    }

    /// The first open pays for every application variable and entry; later opens of the same
    /// instance only count; a new instance pays again.
    #[test]
    fn the_first_open_of_each_instance_resolves_everything() {
        let costs = costs();
        let meter = InstanceMeter::new(costs.clone());
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
        let again = InstanceMeter::new(costs.clone());
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
        let costs = costs();
        let meter = InstanceMeter::new(costs.clone());
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
