//! The wasmtime side of a loaded app, as Spin's `crates/core` (the engine and its pooling
//! allocator) and `crates/trigger` (`TriggerApp`) hold it: one engine, one linker with every
//! factor, each component compiled and pre-instantiated once, and a fresh `Store` per instance.
//! The triggers run their components through it.

pub mod limit;
pub mod overload;
pub mod state;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use sha2::Digest;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

use crate::factors::allowed_hosts::AllowedHosts;
use crate::factors::component::ComponentConfig;
use crate::factors::spin_costs::{ComponentCosts, CostModel, SpinCostTotals};
use crate::manifest::expressions::{self, Providers};
use crate::manifest::{ComponentDef, ManifestError, ManifestFile};
use crate::runtime::overload::Gate;
use crate::runtime::state::{Ctx, MAX_MEMORY_BYTES, Services};

/// Compiles the component at `source`, or loads what an earlier load compiled from the same
/// bytes with the same engine settings from `cache`. A test starts a host per test, and
/// compiling every component is most of that start-up.
fn compile(engine: &Engine, source: &Path, cache: Option<&Path>) -> Result<Component> {
    let bytes = std::fs::read(source)?;
    let Some(cache) = cache else {
        return Ok(Component::from_binary(engine, &bytes)?);
    };
    let mut settings = std::hash::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut settings);
    let key = format!(
        "{:x}-{:016x}.cwasm",
        sha2::Sha256::digest(&bytes),
        settings.finish()
    );
    let path = cache.join(key);
    if path.exists() {
        // SAFETY: the file is one this function wrote with `serialize` for these bytes and this
        // engine's settings (its name says so) into a directory of the host's own; wasmtime
        // still checks the engine's compatibility and refuses a file it did not make.
        if let Ok(component) = unsafe { Component::deserialize_file(engine, &path) } {
            return Ok(component);
        }
    }
    let component = Component::from_binary(engine, &bytes)?;
    std::fs::create_dir_all(cache)?;
    // Written aside and renamed: hosts loading at once never read a half-written file.
    let aside = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&aside, component.serialize()?)?;
    std::fs::rename(&aside, &path)?;
    Ok(component)
}

/// A component, compiled and pre-instantiated once.
struct Loaded {
    config: Arc<ComponentConfig>,
    pre: InstancePre<Ctx>,
    /// What its instances would have cost Spin.
    costs: Arc<ComponentCosts>,
}

/// The engine, the components and the app-wide services.
pub struct Runtime {
    engine: Engine,
    /// In manifest order; a trigger refers to a component by its index here.
    components: Vec<Loaded>,
    services: Services,
    /// One slot per pooling-allocator slot for the HTTP trigger's requests, with their queues:
    /// a request waits, as long as the queue control allows, for a free instance instead of
    /// failing to instantiate.
    slots: Arc<Gate>,
    /// Slots of the cron trigger's own ([`CRON_INSTANCES`]): a spike that takes every request
    /// slot must not stop the drain, the release and the reconcile with it.
    cron_slots: Arc<tokio::sync::Semaphore>,
}

/// Instances kept for the cron trigger beside the request slots (its jobs run one run at a time
/// each: spin.toml has three).
pub const CRON_INSTANCES: u32 = 4;

impl Runtime {
    /// Resolves, compiles and pre-instantiates every component of `file` (application variables
    /// `app_vars`), for at most `slots.capacity()` live instances using `services`. With
    /// `spin_work` (Spin-faithful mode: the providers), each instance also redoes the variable
    /// resolution and host parsing Spin does per instance.
    pub(crate) fn load(
        file: &ManifestFile,
        app_vars: &HashMap<String, String>,
        spin_work: Option<&Providers>,
        services: Services,
        slots: Arc<Gate>,
        compile_cache: Option<&Path>,
    ) -> Result<Runtime> {
        let engine = engine(slots.capacity() + CRON_INSTANCES)?;
        let mut linker = Linker::new(&engine);
        Ctx::link_factors(&mut linker)?;
        let base = file.base_dir();
        let mut components = Vec::new();
        for (id, def) in &file.manifest.component {
            let config = component_config(file, id.get_ref(), def, app_vars)?;
            let costs = ComponentCosts::new(CostModel::new(file, def, spin_work));
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
            let component = compile(&engine, &source, compile_cache).with_context(|| {
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
            components.push(Loaded {
                config: Arc::new(config),
                pre,
                costs: Arc::new(costs),
            });
        }
        Ok(Runtime {
            engine,
            components,
            services,
            slots,
            cron_slots: Arc::new(tokio::sync::Semaphore::new(CRON_INSTANCES as usize)),
        })
    }

    /// How many components there are.
    pub(crate) fn len(&self) -> usize {
        self.components.len()
    }

    /// The id of component `c`.
    pub(crate) fn id(&self, c: usize) -> &str {
        &self.components[c].config.id
    }

    /// The component ids, in manifest order.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &str> {
        self.components.iter().map(|c| c.config.id.as_str())
    }

    /// The index of the component with id `id`.
    pub(crate) fn find(&self, id: &str) -> Option<usize> {
        self.components.iter().position(|c| c.config.id == id)
    }

    /// The index of the component a trigger names at `at`, or the error that line deserves.
    pub(crate) fn component_at(
        &self,
        file: &ManifestFile,
        at: &toml::Spanned<String>,
    ) -> Result<usize, ManifestError> {
        self.find(at.get_ref())
            .ok_or_else(|| file.error_at(at, format!("no component `{}`", at.get_ref())))
    }

    /// Component `c`, pre-instantiated: a trigger makes its own typed pre-instance from it.
    pub(crate) fn pre(&self, c: usize) -> &InstancePre<Ctx> {
        &self.components[c].pre
    }

    /// A fresh store for one instance of component `c`.
    pub(crate) fn store(&self, c: usize) -> Store<Ctx> {
        let loaded = &self.components[c];
        let ctx = Ctx::new(&loaded.config, &loaded.costs, &self.services);
        let mut store = Store::new(&self.engine, ctx);
        store.limiter(|ctx| ctx.limiter());
        store
    }

    /// The pool slots: hold a permit while an instance lives.
    pub(crate) fn slots(&self) -> &Arc<Gate> {
        &self.slots
    }

    /// The cron trigger's slots: hold a permit while a cron instance lives.
    pub(crate) fn cron_slots(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.cron_slots
    }

    /// The app-wide services.
    pub(crate) fn services(&self) -> &Services {
        &self.services
    }

    /// Each component's Spin costs since the last reset, in manifest order.
    pub(crate) fn spin_costs(&self) -> impl Iterator<Item = (&str, SpinCostTotals)> {
        self.components
            .iter()
            .map(|c| (c.config.id.as_str(), c.costs.totals()))
    }

    /// Zeroes every component's Spin costs.
    pub(crate) fn reset_spin_costs(&self) {
        self.components.iter().for_each(|c| c.costs.reset());
    }
}

/// `[component.<id>]` resolved: templates expanded with `app_vars`, hosts parsed.
fn component_config(
    file: &ManifestFile,
    id: &str,
    def: &ComponentDef,
    app_vars: &HashMap<String, String>,
) -> Result<ComponentConfig, ManifestError> {
    let expand = |t: &toml::Spanned<String>| {
        expressions::parse_template(t.get_ref())
            .and_then(|parts| expressions::expand(&parts, app_vars))
            .map_err(|e| file.error_at(t, e))
    };
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

/// The engine: Cranelift, component model, and the pooling allocator as Spin 3 uses it, for
/// `max_instances` live instances (and the headroom).
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
