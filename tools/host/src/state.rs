//! The data of one instance's `Store`, composed of factors as Spin composes them
//! (`#[derive(RuntimeFactors)]`, `crates/factors-derive`): one field per factor holding that
//! factor's instance state, and the one resource table WASI and `wasi:http` share. `Ctx`
//! implements no interface: linking hands each factor's `add_to_linker` a projection from `Ctx`
//! to its own state. Adding an interface is its module, a field here, and its line in `new` and
//! in `link_factors`.

use std::sync::Arc;

use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{ResourceLimiter, StoreLimits};
use wasmtime_wasi::{WasiCtxView, WasiView};
use wasmtime_wasi_http::WasiHttpCtxView;

use crate::component::ComponentConfig;
use crate::outbound_http::HttpPool;
use crate::postgres::PgPools;
use crate::redis::{ConnectionMode, RedisPools};
use crate::spin_costs::{ComponentCosts, InstanceMeter};
use crate::tls::TlsTrust;
use crate::{outbound_http, postgres, redis, variables, wasi};

/// The factors' app-wide state (Spin: each factor's `AppState`), shared by every instance.
#[derive(Default)]
pub struct Services {
    /// Redis connections.
    pub redis: Arc<RedisPools>,
    /// Postgres pools.
    pub pg: Arc<PgPools>,
    /// Outbound HTTP connections.
    pub http: HttpPool,
}

impl Services {
    /// Redis connecting as `mode`; Redis, Postgres and HTTP over TLS trusting `tls`.
    pub fn new(mode: ConnectionMode, tls: &TlsTrust) -> Self {
        Services {
            redis: Arc::new(RedisPools::new(mode, tls.clone())),
            pg: Arc::new(PgPools::new(tls)),
            http: HttpPool::new(tls),
        }
    }
}

/// Per-instance memory cap (Spin's default on Akamai Functions is 128 MiB).
pub const MAX_MEMORY_BYTES: usize = 128 << 20;

/// The data of one instance's `Store`.
pub struct Ctx {
    /// WASI's and `wasi:http`'s resources (Spin's `RuntimeFactors` keep one such table too).
    table: ResourceTable,
    limits: StoreLimits,
    wasi: wasi::InstanceState,
    outbound_http: outbound_http::InstanceState,
    redis: redis::InstanceState,
    postgres: postgres::InstanceState,
    variables: variables::InstanceState,
}

impl Ctx {
    /// A fresh context for one instance of `component`, counting what Spin would pay for it
    /// into `costs`.
    pub fn new(
        component: &Arc<ComponentConfig>,
        costs: &Arc<ComponentCosts>,
        services: &Services,
    ) -> Self {
        // One meter per instance, shared by the factors that pay Spin's costs.
        let meter = InstanceMeter::new(component.clone(), costs.clone());
        Ctx {
            table: ResourceTable::new(),
            limits: wasmtime::StoreLimitsBuilder::new()
                .memory_size(MAX_MEMORY_BYTES)
                .instances(64)
                .build(),
            wasi: wasi::InstanceState::new(&component.environment),
            outbound_http: outbound_http::InstanceState::new(
                component.clone(),
                services.http.clone(),
                meter.clone(),
            ),
            redis: redis::InstanceState::new(
                services.redis.clone(),
                component.clone(),
                meter.clone(),
            ),
            postgres: postgres::InstanceState::new(
                services.pg.clone(),
                component.clone(),
                meter.clone(),
            ),
            variables: variables::InstanceState::new(component.clone(), meter),
        }
    }

    /// Adds every factor's interfaces to `linker`, each projected to its own state.
    pub fn link_factors(linker: &mut Linker<Ctx>) -> wasmtime::Result<()> {
        wasi::add_to_linker(linker)?;
        outbound_http::add_to_linker(linker, Ctx::wasi_http)?;
        redis::add_to_linker(linker, |ctx| &mut ctx.redis)?;
        postgres::add_to_linker(linker, |ctx| &mut ctx.postgres)?;
        variables::add_to_linker(linker, |ctx| &mut ctx.variables)?;
        Ok(())
    }

    /// The `wasi:http` view, which the HTTP trigger uses to hand a request to the guest.
    pub(crate) fn wasi_http(&mut self) -> WasiHttpCtxView<'_> {
        self.outbound_http.view(&mut self.table)
    }

    /// The store's resource limiter.
    pub(crate) fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        &mut self.limits
    }
}

/// wasmtime-wasi's projection (see [`wasi::add_to_linker`]).
impl WasiView for Ctx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        self.wasi.view(&mut self.table)
    }
}
