//! The data every request's `Store` carries: WASI contexts, the resource table, the component's
//! resolved configuration and the app-wide services (connection pools) it may use.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::allowed_hosts::AllowedHosts;
use crate::outbound_http::OutboundHttp;
use crate::postgres::PgPools;
use crate::redis::RedisPools;
use crate::variables::ComponentVariables;

/// How outbound Redis connections are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConnectionMode {
    /// One multiplexed connection per address, shared by all requests (our default: a fresh TCP
    /// connection per request is most of a request's cost).
    #[default]
    Pooled,
    /// A new connection for every `open`, as Spin 3.6 does.
    SpinFaithful,
}

/// A component's configuration, resolved once at startup.
#[derive(Debug)]
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

/// App-wide services shared by every instance.
#[derive(Default)]
pub struct Services {
    /// Redis connections.
    pub redis: RedisPools,
    /// Postgres pools.
    pub pg: PgPools,
    /// Outbound HTTP connections.
    pub http: crate::outbound_http::HttpPool,
}

/// Per-instance memory cap (Spin's default on Akamai Functions is 128 MiB).
pub const MAX_MEMORY_BYTES: usize = 128 << 20;

/// The data of one instance's `Store`.
pub struct Ctx {
    pub(crate) wasi: WasiCtx,
    pub(crate) http: WasiHttpCtx,
    pub(crate) hooks: OutboundHttp,
    pub(crate) table: ResourceTable,
    pub(crate) limits: StoreLimits,
    pub(crate) redis_connections: u32,
    pub(crate) component: Arc<ComponentConfig>,
    pub(crate) services: Arc<Services>,
}

impl Ctx {
    /// A fresh context for one instance of `component`.
    pub fn new(component: Arc<ComponentConfig>, services: Arc<Services>) -> Self {
        let wasi = WasiCtx::builder()
            .inherit_stdout()
            .inherit_stderr()
            .envs(&component.environment)
            .build();
        Ctx {
            wasi,
            http: WasiHttpCtx::new(),
            hooks: OutboundHttp::new(component.clone(), services.http.clone()),
            table: ResourceTable::new(),
            limits: wasmtime::StoreLimitsBuilder::new()
                .memory_size(MAX_MEMORY_BYTES)
                .instances(64)
                .build(),
            redis_connections: 0,
            component,
            services,
        }
    }

    /// Whether the component's `allowed_outbound_hosts` allow `url`.
    pub(crate) fn allows_url(&self, url: &str) -> bool {
        self.component.allowed_hosts.allows_url(url)
    }

    /// The store's resource limiter.
    pub(crate) fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        &mut self.limits
    }
}

impl WasiView for Ctx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Ctx {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}
