//! The data of one instance's `Store`, composed of factors as Spin composes them
//! (`#[derive(RuntimeFactors)]`, `crates/factors-derive`): one field per factor holding that
//! factor's instance state, and the one resource table WASI and `wasi:http` share. `Ctx`
//! implements no interface: linking hands each factor's `add_to_linker` a projection from `Ctx`
//! to its own state.
//!
//! WASI and `wasi:http` share the store's resource table (their streams and pollables are the
//! same resources; Spin's outbound HTTP factor builds on the WASI factor's table too), so `Ctx`
//! holds and links those two itself. Every other interface is a [`Factor`]: adding one is its
//! module and its line in [`factors!`].

use std::sync::Arc;

use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{ResourceLimiter, StoreLimits};
use wasmtime_wasi::{WasiCtxView, WasiView};
use wasmtime_wasi_http::WasiHttpCtxView;

use crate::factors::component::ComponentConfig;
use crate::factors::outbound_http::HttpPool;
use crate::factors::spin_costs::{ComponentCosts, InstanceMeter};
use crate::factors::{ConfigureAppContext, Factor, PrepareContext};
use crate::factors::{outbound_http, postgres, redis, variables, wasi};
use crate::manifest::ManifestError;

/// Declares the factors: their app-wide states ([`Services`]), their instance states
/// ([`Factors`]) and their linking.
macro_rules! factors {
    ($($name:ident: $state:ty),* $(,)?) => {
        /// The host's runtime configuration: each factor's part (Spin: the runtime config,
        /// which each factor takes its own part of), and outbound HTTP's.
        #[derive(Default)]
        pub struct RuntimeConfig {
            $(
                #[doc = concat!("The `", stringify!($name), "` factor's.")]
                pub $name: <$state as Factor>::RuntimeConfig,
            )*
            /// Outbound HTTP's (`wasi:http`, beside the factors).
            pub http: outbound_http::RuntimeConfig,
        }

        /// The factors' app-wide state (Spin: each factor's `AppState`), shared by every
        /// instance.
        pub struct Services {
            $(
                #[doc = concat!("The `", stringify!($name), "` factor's.")]
                pub $name: <$state as Factor>::AppState,
            )*
            /// Outbound HTTP connections (`wasi:http`, beside the factors: see the module).
            pub http: HttpPool,
        }

        impl Services {
            /// Each factor's app-wide state, built from its part of `config` for the app `app`
            /// describes; the first factor that refuses its part of the manifest stops it.
            pub fn new(
                config: RuntimeConfig,
                app: &ConfigureAppContext<'_>,
            ) -> Result<Self, ManifestError> {
                Ok(Services {
                    $($name: <$state as Factor>::configure_app(config.$name, app)?,)*
                    http: HttpPool::new(&config.http),
                })
            }
        }

        /// One instance's state of each factor.
        struct Factors {
            $($name: $state,)*
        }

        impl Factors {
            fn new(
                services: &Services,
                component: &Arc<ComponentConfig>,
                meter: &Arc<InstanceMeter>,
            ) -> Self {
                Factors {
                    $($name: <$state as Factor>::prepare(PrepareContext {
                        app_state: &services.$name,
                        component,
                        meter,
                    }),)*
                }
            }

            fn add_to_linker(linker: &mut Linker<Ctx>) -> wasmtime::Result<()> {
                $(<$state as Factor>::add_to_linker(linker, |ctx| &mut ctx.factors.$name)?;)*
                Ok(())
            }
        }
    };
}

factors! {
    redis: redis::InstanceState,
    postgres: postgres::InstanceState,
    variables: variables::InstanceState,
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
    factors: Factors,
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
        let meter = InstanceMeter::new(costs.clone());
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
            factors: Factors::new(services, component, &meter),
        }
    }

    /// Adds every factor's interfaces to `linker`, each projected to its own state.
    pub fn link_factors(linker: &mut Linker<Ctx>) -> wasmtime::Result<()> {
        wasi::add_to_linker(linker)?;
        outbound_http::add_to_linker(linker, Ctx::wasi_http)?;
        Factors::add_to_linker(linker)
    }

    /// How long the instance has waited on its outbound HTTP requests' answers.
    pub(crate) fn outbound_http_waited(&self) -> std::time::Duration {
        self.outbound_http.waited()
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
