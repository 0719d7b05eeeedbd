//! WASI p2 (`wasi:cli`, `clocks`, `random`, `io`, `filesystem`, `sockets`), as Spin's
//! `crates/factor-wasi` gives it to a component: the component's `environment`, and the host's
//! stdout and stderr.

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// One instance's WASI context.
pub struct InstanceState {
    ctx: WasiCtx,
}

impl InstanceState {
    /// The context of an instance of a component with `environment`.
    pub fn new(environment: &[(String, String)]) -> Self {
        let ctx = WasiCtx::builder()
            .inherit_stdout()
            .inherit_stderr()
            .envs(environment)
            .build();
        InstanceState { ctx }
    }

    /// The view wasmtime-wasi works on: this state and the store's resource table, which WASI
    /// shares with `wasi:http` (their streams and pollables are the same resources).
    pub fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiCtxView<'a> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table,
        }
    }
}

/// Adds WASI p2 to `linker`. wasmtime-wasi projects to each of its interfaces' own views
/// through [`WasiView`] (the trait form of a `HasData` projection), so `T` implements it,
/// returning [`InstanceState::view`].
pub fn add_to_linker<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)
}
