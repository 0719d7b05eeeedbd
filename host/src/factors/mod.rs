//! What a host interface is, as Spin's `Factor` (`crates/factors/src/factor.rs`) says it: a
//! module that owns its app-wide state, builds its per-instance state from the component an
//! instance runs, and links its interface over a projection to that state. `state` composes the
//! factors; adding an interface is its module and its line in `state`'s `factors!`.

pub mod allowed_hosts;
pub mod outbound_http;
pub mod postgres;
pub mod redis;
pub mod tls;
pub mod variables;
pub mod wasi;

use std::sync::Arc;

use wasmtime::component::Linker;

use crate::app::component::ComponentConfig;
use crate::spin_costs::InstanceMeter;
use crate::factors::tls::TlsTrust;

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

/// What the factors' app-wide states are built from (Spin: the runtime config).
#[derive(Debug, Clone, Default)]
pub struct HostConfig {
    /// How outbound Redis connections are made.
    pub connection_mode: ConnectionMode,
    /// The roots outbound TLS trusts.
    pub tls: TlsTrust,
}

/// A host interface: its state per app and per instance, and its linking.
pub trait Factor: Sized + Send + 'static {
    /// Shared by every instance (pools and the like; Spin: `Factor::AppState`).
    type AppState: Send + Sync;

    /// The app-wide state, built once at startup.
    fn app_state(config: &HostConfig) -> Self::AppState;

    /// The state of one instance of `component`, counting what Spin would pay on `meter`
    /// (Spin: `Factor::prepare`).
    fn instance(
        app: &Self::AppState,
        component: &Arc<ComponentConfig>,
        meter: &Arc<InstanceMeter>,
    ) -> Self;

    /// Adds the interface to `linker`, served by the state `get` projects to (Spin:
    /// `Factor::init`'s `link_bindings`).
    fn add_to_linker<T: Send + 'static>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut Self,
    ) -> wasmtime::Result<()>;
}
