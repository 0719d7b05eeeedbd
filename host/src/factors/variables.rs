//! The variables factor: `fermyon:spin/variables@2.0.0` (Spin's `crates/factor-variables`).
//! Component variables are templates over application variables ([`crate::app::expressions`]); all
//! of them are resolved once at startup, so a `get` is a map lookup (what Spin would pay instead
//! is counted: `spin_costs`).

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use crate::app::component::ComponentConfig;
use crate::app::expressions::check_name;
use crate::factors::{Factor, HostConfig};
use crate::spin_costs::InstanceMeter;
use bindings::fermyon::spin::variables::{self, Error};

/// Host bindings of the interface, generated here so that this module is the whole factor.
mod bindings {
    wasmtime::component::bindgen!({
        inline: "
            package seckill:variables-factor;
            world variables { import fermyon:spin/variables@2.0.0; }
        ",
        path: "../wit/deps/spin@2.0.0",
        imports: { default: async },
    });
}

/// One instance's view of its component's variables.
pub struct InstanceState {
    component: Arc<ComponentConfig>,
    /// What Spin would pay for this instance: Spin resolves on every `get`.
    meter: Arc<InstanceMeter>,
}

impl Factor for InstanceState {
    type AppState = ();

    fn app_state(_: &HostConfig) {}

    fn instance((): &(), component: &Arc<ComponentConfig>, meter: &Arc<InstanceMeter>) -> Self {
        InstanceState {
            component: component.clone(),
            meter: meter.clone(),
        }
    }

    fn add_to_linker<T: Send + 'static>(
        linker: &mut Linker<T>,
        get: fn(&mut T) -> &mut Self,
    ) -> wasmtime::Result<()> {
        variables::add_to_linker::<T, HasSelf<InstanceState>>(linker, get)
    }
}

impl variables::Host for InstanceState {
    async fn get(&mut self, name: String) -> Result<String, Error> {
        self.meter.variable_get(&name);
        // Spin's texts: `crates/expressions/src/lib.rs` (`Key::new`, `Resolver::get_template`).
        check_name(&name).map_err(Error::InvalidName)?;
        self.component.variables.get(&name).cloned().ok_or_else(|| {
            Error::Undefined(format!("no variable for {:?}.{name:?}", self.component.id))
        })
    }
}
