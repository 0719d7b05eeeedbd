//! The guest side of the spin-trigger-cron world. spin-trigger-cron's own `spin-cron-sdk` is not
//! published on crates.io, so we generate the same bindings from the same WIT (`wit/deps/spin-cron@2.0.0`).
//!
//! A cron function implements [`Guest`] and exports it:
//! ```ignore
//! struct Drain;
//! impl seckill_cron_bindings::Guest for Drain {
//!     fn handle_cron_event(m: seckill_cron_bindings::Metadata) -> Result<(), seckill_cron_bindings::Error> { Ok(()) }
//! }
//! seckill_cron_bindings::export!(Drain with_types_in seckill_cron_bindings::bindings);
//! ```
#![allow(missing_docs)]

/// The generated bindings (in a module of their own: `pub_export_macro` at the crate root clashes).
pub mod bindings {
    wit_bindgen::generate!({
        world: "fermyon:spin-cron/spin-cron",
        path: "../../wit/deps/spin-cron@2.0.0",
        pub_export_macro: true,
        default_bindings_module: "seckill_cron_bindings::bindings",
    });
}

pub use bindings::{Error, Guest, Metadata, export};
