//! What a host interface is, as Spin's `Factor` (`crates/factors/src/factor.rs`) says it: a
//! module that owns its part of the runtime configuration, builds its app-wide state from it
//! (checking its part of the manifest), its per-instance state from the component an instance
//! runs, and links its interface over a projection to that state. `app::state` composes the
//! factors; adding an interface is its module and its line in `factors!` there.

pub mod allowed_hosts;
pub mod blocked_networks;
pub mod client_tls;
pub mod component;
pub mod outbound_http;
pub mod postgres;
pub mod redis;
pub mod spin_costs;
pub mod tls;
pub mod variables;
pub mod wasi;

use std::sync::Arc;

use wasmtime::component::Linker;

use std::collections::HashMap;

use crate::factors::component::ComponentConfig;
use crate::factors::spin_costs::InstanceMeter;
use crate::manifest::{ManifestError, ManifestFile};

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

/// What a factor sees of the app when it builds its app-wide state (Spin:
/// `ConfigureAppContext`): the manifest, its application variables resolved.
pub struct ConfigureAppContext<'a> {
    pub file: &'a ManifestFile,
    pub app_vars: &'a HashMap<String, String>,
}

/// What a factor sees of an instance it prepares for (Spin: `PrepareContext`): its app-wide
/// state, the component the instance runs, and the instance's cost meter (a state of its own,
/// as Spin's factors reach the OpenTelemetry state through theirs).
pub struct PrepareContext<'a, S> {
    pub app_state: &'a S,
    pub component: &'a Arc<ComponentConfig>,
    pub meter: &'a Arc<InstanceMeter>,
}

/// A host interface: its part of the runtime configuration, its state per app and per
/// instance, and its linking.
pub trait Factor: Sized + Send + 'static {
    /// This factor's part of the host's runtime configuration (Spin: `Factor::RuntimeConfig`).
    type RuntimeConfig;

    /// Shared by every instance (pools and the like; Spin: `Factor::AppState`).
    type AppState: Send + Sync;

    /// The app-wide state, built once at startup from this factor's runtime configuration; it
    /// checks the factor's part of the manifest, so an app it could not serve fails to load,
    /// naming the manifest line (Spin: `Factor::configure_app`).
    fn configure_app(
        config: Self::RuntimeConfig,
        app: &ConfigureAppContext<'_>,
    ) -> Result<Self::AppState, ManifestError>;

    /// The state of one instance (Spin: `Factor::prepare`).
    fn prepare(ctx: PrepareContext<'_, Self::AppState>) -> Self;

    /// Adds the interface to `linker`, served by the state `get` projects to (Spin:
    /// `Factor::init`'s `link_bindings`).
    fn add_to_linker<T: Send + 'static>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut Self,
    ) -> wasmtime::Result<()>;
}
