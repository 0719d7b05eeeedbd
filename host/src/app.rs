//! Loading an app, in Spin's order: the manifest, its variables, the runtime (components
//! resolved, compiled and pre-instantiated), then each trigger builds and checks its own
//! triggers. Everything that can be checked is checked here, at startup, so that a request never
//! meets a configuration error.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result};

use crate::factors::blocked_networks::BlockedNetworks;
use crate::factors::client_tls::ClientTls;
use crate::factors::spin_costs::SpinCostTotals;
use crate::factors::{ConfigureAppContext, ConnectionMode, outbound_http, postgres, redis};
use crate::manifest::ManifestFile;
use crate::manifest::expressions::{self, Providers};
use crate::runtime::Runtime;
use crate::runtime::state::{RuntimeConfig, Services};
use crate::trigger::cron::CronTrigger;
use crate::trigger::http::{HttpTrigger, RequestLimits};

use crate::runtime::overload::{Gate, QueueControl};
pub use crate::trigger::http::{DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_REQUEST_BODY};

/// Request instances alive at once by default: 64 per core. Spin keeps 1,000 whatever the
/// machine (`SPIN_MAX_INSTANCE_COUNT`, `crates/core/src/lib.rs`); on a 2-core machine that many
/// guests in flight only queue for the CPU, so every await of every guest (the drain's, a
/// buyer's Redis reply) waits behind a thousand others, while past this many a spike waits in
/// the slot queues under their queue control ([`crate::runtime::overload`]), or is shed. 64 per core keeps Redis and
/// Postgres busy (each request waits on them a fraction of a millisecond).
pub fn default_max_instances() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    u32::try_from(cores * 64).unwrap_or(u32::MAX)
}

/// How to run an app.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Pooled Redis connections (default) or one per `open`, as Spin does.
    pub connection_mode: ConnectionMode,
    /// Variable providers besides the manifest defaults.
    pub providers: Providers,
    /// Request instances that may be alive at once (pooling allocator slots). `None`:
    /// [`default_max_instances`].
    pub max_instances: Option<u32>,
    /// Largest request body passed to a guest; larger ones get a 413 (a deliberate difference:
    /// Spin has no limit of its own). `None`: [`DEFAULT_MAX_REQUEST_BODY`].
    pub max_request_body: Option<u64>,
    /// How long a request body may take to arrive whole, from its head, before it is answered
    /// `408`. `None`: [`DEFAULT_BODY_TIMEOUT`].
    pub body_timeout: Option<std::time::Duration>,
    /// How long a request may wait for an instance slot before it is answered `503` with
    /// `Retry-After` (shed), by how long its class's queue has stood.
    pub queue_control: QueueControl,
    /// The roots `rediss://` and Postgres TLS trust: the system's, plus an operator's CA.
    pub tls: crate::factors::tls::TlsTrust,
    /// Where compiled components are kept between loads (`None`: compile every time).
    pub compile_cache: Option<std::path::PathBuf>,
    /// Where outbound HTTP and Redis may not go (the runtime configuration's `block_networks`).
    pub blocked_networks: BlockedNetworks,
    /// Other roots for some components' HTTPS to some hosts (the runtime configuration's
    /// `[[client_tls]]`).
    pub client_tls: ClientTls,
    /// Addresses given for names outbound HTTP reaches (`--resolve`).
    pub resolve: crate::factors::outbound_http::NameOverrides,
}

impl Options {
    /// These options with Spin's runtime configuration file at `path` (`spin up
    /// --runtime-config-file`): its `[outbound_networking] block_networks` and `[[client_tls]]`.
    /// Any other table is refused, not ignored.
    pub fn with_runtime_config_file(mut self, path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let table: toml::Table =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        const READ: [&str; 2] = ["outbound_networking", "client_tls"];
        if let Some(other) = table.keys().find(|k| !READ.contains(&k.as_str())) {
            anyhow::bail!(
                "{}: seckill-host reads only [outbound_networking] and [[client_tls]] of Spin's runtime configuration, not {other:?}",
                path.display()
            );
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let in_file = || format!("in {}", path.display());
        if let Some(blocked) = BlockedNetworks::from_runtime_config(&table).with_context(in_file)? {
            self.blocked_networks = blocked;
        }
        if let Some(tls) = ClientTls::from_runtime_config(&table, dir).with_context(in_file)? {
            self.client_tls = tls;
        }
        Ok(self)
    }
}

/// A loaded app, ready to serve.
pub struct App {
    runtime: Arc<Runtime>,
    pub(crate) http: HttpTrigger,
    cron: CronTrigger,
    /// `[application] name`.
    pub name: String,
    /// `[application] version`.
    pub version: Option<String>,
    /// Request bodies larger than this never reach a guest.
    pub max_request_body: u64,
}

impl App {
    /// Loads `spin.toml` at `manifest`, compiles every component and checks every trigger.
    pub fn load(manifest: &Path, options: Options) -> Result<App> {
        let file = ManifestFile::load(manifest)?;
        let app_vars = expressions::resolve_manifest_variables(&file, &options.providers)?;
        let config = RuntimeConfig {
            redis: redis::RuntimeConfig {
                connection_mode: options.connection_mode,
                tls: options.tls.clone(),
                blocked: options.blocked_networks.clone(),
            },
            postgres: postgres::RuntimeConfig {
                tls: options.tls.clone(),
            },
            variables: (),
            http: outbound_http::RuntimeConfig {
                tls: options.tls.clone(),
                client_tls: options.client_tls.clone(),
                blocked: options.blocked_networks.clone(),
                resolve: options.resolve.clone(),
            },
        };
        let app = ConfigureAppContext {
            file: &file,
            app_vars: &app_vars,
        };
        let services = Services::new(config, &app)?;
        let max_instances = options.max_instances.unwrap_or_else(default_max_instances);
        // Spin-faithful mode pays, per instance, what Spin pays: a connection, and the variables.
        let spin_work =
            (options.connection_mode == ConnectionMode::SpinFaithful).then_some(&options.providers);
        let runtime = Arc::new(Runtime::load(
            &file,
            &app_vars,
            spin_work,
            services,
            Gate::new(max_instances, options.queue_control),
            options.compile_cache.as_deref(),
        )?);
        let limits = RequestLimits {
            max_request_body: options.max_request_body.unwrap_or(DEFAULT_MAX_REQUEST_BODY),
            body_timeout: options.body_timeout.unwrap_or(DEFAULT_BODY_TIMEOUT),
        };
        let http = HttpTrigger::build(&file, runtime.clone(), limits)?;
        let cron = CronTrigger::build(&file, runtime.clone())?;
        let application = &file.manifest.application;
        Ok(App {
            runtime,
            http,
            cron,
            name: application.name.clone(),
            version: application.version.clone(),
            max_request_body: limits.max_request_body,
        })
    }

    /// The component ids, in manifest order.
    pub fn component_ids(&self) -> impl Iterator<Item = &str> {
        self.runtime.ids()
    }

    /// Shared services (exposed for measurements such as connections opened).
    pub fn services(&self) -> &Services {
        self.runtime.services()
    }

    /// What each component's instances since the last reset would have cost real Spin
    /// (variable lookups, outbound opens, allowed-host entries parsed: see [`crate::factors::spin_costs`]),
    /// by component id in manifest order. Each route of the product names one component.
    pub fn spin_costs(&self) -> Vec<(String, SpinCostTotals)> {
        self.runtime
            .spin_costs()
            .map(|(id, totals)| (id.to_owned(), totals))
            .collect()
    }

    /// [`Self::spin_costs`] of the component with id `component`.
    pub fn spin_costs_of(&self, component: &str) -> Option<SpinCostTotals> {
        self.runtime
            .spin_costs()
            .find_map(|(id, totals)| (id == component).then_some(totals))
    }

    /// Zeroes every component's Spin costs.
    pub fn reset_spin_costs(&self) {
        self.runtime.reset_spin_costs();
    }

    /// Requests waiting for an instance slot now, over every class (what the metrics' gauge
    /// reports by class).
    pub fn requests_waiting(&self) -> usize {
        self.runtime.slots().waiting().iter().sum()
    }

    /// The runtime the triggers run components on.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.runtime
    }
}

/// What [`crate::trigger::serve::serve`] serves.
impl AsRef<HttpTrigger> for App {
    fn as_ref(&self) -> &HttpTrigger {
        &self.http
    }
}

/// What [`crate::trigger::cron::run_schedules`] runs.
impl AsRef<CronTrigger> for App {
    fn as_ref(&self) -> &CronTrigger {
        &self.cron
    }
}
