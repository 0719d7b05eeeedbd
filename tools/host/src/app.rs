//! Loading an app: manifest → resolved variables and hosts → compiled, pre-instantiated
//! components → routes and schedules. Everything that can be checked is checked here, at
//! startup, so that a request never meets a configuration error.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi_http::p2::bindings::ProxyPre;

use crate::allowed_hosts::AllowedHosts;
use crate::bindings;
use crate::manifest::{ManifestError, ManifestFile};
use crate::routes::Router;
use crate::state::{ComponentConfig, ConnectionMode, Ctx, MAX_MEMORY_BYTES, Services};
use crate::variables::{self, Providers};

/// How to run an app.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Pooled Redis connections (default) or one per `open`, as Spin does.
    pub connection_mode: ConnectionMode,
    /// Variable providers besides the manifest defaults.
    pub providers: Providers,
    /// Instances that may be alive at once (pooling allocator slots).
    pub max_instances: Option<u32>,
    /// Largest request body passed to a guest; larger ones get a JSON 413 (a deliberate
    /// difference: Spin has no limit of its own). `None`: [`DEFAULT_MAX_REQUEST_BODY`].
    pub max_request_body: Option<u64>,
    /// The roots `rediss://` and Postgres TLS trust: the system's, plus an operator's CA.
    pub tls: crate::tls::TlsTrust,
}

/// The default request body limit: far above any body this API takes, far below what would
/// exhaust an instance's 128 MiB.
pub const DEFAULT_MAX_REQUEST_BODY: u64 = 1 << 20;

/// A component, compiled and pre-instantiated once.
pub(crate) struct LoadedComponent {
    pub(crate) config: Arc<ComponentConfig>,
    /// Present when the component exports `wasi:http/incoming-handler`.
    pub(crate) http: Option<ProxyPre<Ctx>>,
    /// Present when the component exports `handle-cron-event`.
    pub(crate) cron: Option<bindings::cron::SpinCronPre<Ctx>>,
}

/// A `[[trigger.cron]]` entry.
pub(crate) struct CronJob {
    pub(crate) component: usize,
    pub(crate) schedule: cron::Schedule,
    pub(crate) expression: String,
}

/// A loaded app, ready to serve.
pub struct App {
    pub(crate) engine: Engine,
    pub(crate) components: Vec<LoadedComponent>,
    pub(crate) router: Router,
    pub(crate) crons: Vec<CronJob>,
    pub(crate) services: Arc<Services>,
    /// One permit per pooling-allocator slot: a spike waits for a free instance instead of
    /// failing to instantiate.
    pub(crate) slots: Arc<tokio::sync::Semaphore>,
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
        let m = &file.manifest;
        let app_vars = variables::resolve_app_variables(
            m.variables
                .iter()
                .map(|(k, d)| (k.get_ref().as_str(), d.default.as_deref(), d.required)),
            &options.providers,
        )
        .map_err(|e| ManifestError {
            path: file.path.clone(),
            line: 0,
            message: e,
        })?;
        for (name, def) in &m.variables {
            if def.required && def.default.is_some() {
                return Err(file
                    .error_at(
                        name,
                        "a variable cannot be both required and have a default",
                    )
                    .into());
            }
        }

        let max_instances = options.max_instances.unwrap_or(1000);
        let engine = engine(max_instances)?;
        let linker = linker(&engine)?;
        let base = file.base_dir();
        let mut components = Vec::new();
        let mut index = HashMap::new();
        for (id, def) in &m.component {
            let config = component_config(&file, id.get_ref(), def, &app_vars)?;
            let source = base.join(def.source.get_ref());
            if !source.exists() {
                return Err(file
                    .error_at(
                        &def.source,
                        format!(
                            "component source {} does not exist (build it first)",
                            source.display()
                        ),
                    )
                    .into());
            }
            let component = Component::from_file(&engine, &source)
                .map_err(anyhow::Error::from)
                .with_context(|| {
                    format!(
                        "compiling component `{}` from {}",
                        id.get_ref(),
                        source.display()
                    )
                })?;
            let pre = linker
                .instantiate_pre(&component)
                .map_err(anyhow::Error::from)
                .with_context(|| {
                    format!(
                        "component `{}` imports something this host does not implement",
                        id.get_ref()
                    )
                })?;
            index.insert(id.get_ref().clone(), components.len());
            components.push(LoadedComponent {
                config: Arc::new(config),
                http: ProxyPre::new(pre.clone()).ok(),
                cron: bindings::cron::SpinCronPre::new(pre).ok(),
            });
        }

        let lookup = |c: &toml::Spanned<String>| {
            index
                .get(c.get_ref())
                .copied()
                .ok_or_else(|| file.error_at(c, format!("no component `{}`", c.get_ref())))
        };
        let mut routes = Vec::new();
        for trigger in &m.trigger.http {
            let c = lookup(&trigger.component)?;
            if components[c].http.is_none() {
                return Err(file
                    .error_at(
                        &trigger.component,
                        "component does not export wasi:http/incoming-handler",
                    )
                    .into());
            }
            crate::routes::check(trigger.route.get_ref())
                .map_err(|e| file.error_at(&trigger.route, e))?;
            routes.push((trigger.route.get_ref().as_str(), c));
        }
        let (router, duplicates) = Router::build(routes).map_err(|e| ManifestError {
            path: file.path.clone(),
            line: 0,
            message: e,
        })?;
        // Spin's warnings (`crates/trigger-http/src/server.rs`), not errors.
        for d in &duplicates {
            tracing::error!(
                "route {} of component `{}` duplicates that of `{}` and will never be used",
                d.route,
                components[d.replaced].config.id,
                components[d.effective].config.id
            );
        }
        if router.contains_reserved_route() {
            tracing::error!(
                "Routes under {} are handled by the Spin runtime and will never be reached",
                crate::routes::WELL_KNOWN_PREFIX
            );
        }
        let mut crons = Vec::new();
        for trigger in &m.trigger.cron {
            let c = lookup(&trigger.component)?;
            if components[c].cron.is_none() {
                return Err(file
                    .error_at(
                        &trigger.component,
                        "component does not export handle-cron-event (fermyon:spin-cron@2.0.0)",
                    )
                    .into());
            }
            let expression = trigger.cron_expression.get_ref().clone();
            let schedule = expression.parse::<cron::Schedule>().map_err(|e| {
                file.error_at(
                    &trigger.cron_expression,
                    format!("bad cron expression: {e}"),
                )
            })?;
            crons.push(CronJob {
                component: c,
                schedule,
                expression,
            });
        }

        let services = Services {
            redis: crate::redis::RedisPools::new(options.connection_mode, options.tls.clone()),
            pg: crate::postgres::PgPools::new(&options.tls),
            http: crate::outbound_http::HttpPool::new(&options.tls),
        };
        Ok(App {
            engine,
            components,
            router,
            crons,
            services: Arc::new(services),
            slots: Arc::new(tokio::sync::Semaphore::new(max_instances as usize)),
            name: m.application.name.clone(),
            version: m.application.version.clone(),
            max_request_body: options.max_request_body.unwrap_or(DEFAULT_MAX_REQUEST_BODY),
        })
    }

    /// A fresh store for one instance of component `c`.
    pub(crate) fn store(&self, c: usize) -> Store<Ctx> {
        let ctx = Ctx::new(self.components[c].config.clone(), self.services.clone());
        let mut store = Store::new(&self.engine, ctx);
        store.limiter(|ctx| ctx.limiter());
        store
    }

    /// The component ids, in manifest order.
    pub fn component_ids(&self) -> impl Iterator<Item = &str> {
        self.components.iter().map(|c| c.config.id.as_str())
    }

    /// Shared services (exposed for measurements such as connections opened).
    pub fn services(&self) -> &Services {
        &self.services
    }
}

fn component_config(
    file: &ManifestFile,
    id: &str,
    def: &crate::manifest::ComponentDef,
    app_vars: &HashMap<String, String>,
) -> Result<ComponentConfig, ManifestError> {
    let expand = |t: &toml::Spanned<String>| {
        variables::parse_template(t.get_ref())
            .and_then(|parts| variables::expand(&parts, app_vars))
            .map_err(|e| file.error_at(t, e))
    };
    let mut vars = variables::ComponentVariables::new();
    for (name, template) in &def.variables {
        variables::check_name(name.get_ref()).map_err(|e| file.error_at(name, e))?;
        vars.insert(name.get_ref().clone(), expand(template)?);
    }
    let mut hosts = Vec::new();
    for h in &def.allowed_outbound_hosts {
        hosts.push((expand(h)?, h));
    }
    for (h, at) in &hosts {
        AllowedHosts::parse([h.as_str()]).map_err(|e| file.error_at(*at, e))?;
    }
    let allowed_hosts =
        AllowedHosts::parse(hosts.iter().map(|(h, _)| h.as_str())).expect("checked above");
    Ok(ComponentConfig {
        id: id.to_owned(),
        variables: vars,
        allowed_hosts,
        environment: def
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    })
}

/// Pool slots beyond the `slots` permits. This wasmtime's pool keeps one free list per CPU
/// (wasmtime#13840): an allocation probes the shards one after another ("exhaustion is only
/// reported after all shards have been consulted", `index_allocator.rs`), so it can miss a slot
/// freed in a shard it has already passed. A pool exactly as large as the permits then fails
/// now and then under a spike (CI saw "maximum concurrent limit of 200 for fibers reached" once
/// in 10,000 buys); a quarter more slots (at least 32) leaves room for the slots a race hides.
fn pool_headroom(max_instances: u32) -> u32 {
    (max_instances / 4).max(32)
}

/// The engine: Cranelift, component model, and the pooling allocator as Spin 3 uses it.
fn engine(max_instances: u32) -> Result<Engine> {
    let slots = max_instances + pool_headroom(max_instances);
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(slots)
        .total_core_instances(slots * 8)
        .total_memories(slots * 2)
        .total_tables(slots * 8)
        .max_memory_size(MAX_MEMORY_BYTES)
        .total_stacks(slots)
        // Reset the first 2 MiB of a reused slot (our guests' 128 KiB stack, data and the heap
        // a request uses) with memset instead of giving the pages back to the kernel: otherwise
        // every request pays page faults and TLB shootdowns to touch them again. Measured on
        // 2 cores: hello 7.3k → 17k req/s with 4 MiB and the default 1 MiB guest stack; with
        // the 128 KiB stack (`.cargo/config.toml`), 2 MiB gives hello 20.8k, buy 9.1k.
        .linear_memory_keep_resident(2 << 20)
        .table_keep_resident(1 << 16)
        .async_stack_keep_resident(1 << 16);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    // `SECKILL_HOST_PERFMAP=1` names guest functions in `perf` profiles (/tmp/perf-<pid>.map).
    if std::env::var_os("SECKILL_HOST_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    Ok(Engine::new(&config)?)
}

/// WASI p2, WASI HTTP p2 and the Spin interfaces, once for every component.
fn linker(engine: &Engine) -> Result<Linker<Ctx>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    bindings::spin::SpinImports::add_to_linker::<Ctx, HasSelf<Ctx>>(&mut linker, |c| c)?;
    Ok(linker)
}
