//! Host-side bindings generated from the WIT in `wit/` (Spin's interfaces, copied from spin-sdk).

/// The Spin 3.6 interfaces our guests import: Redis, variables, Postgres.
pub mod spin {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "seckill:host/spin-imports",
        imports: { default: async },
        with: {
            "fermyon:spin/redis.connection": crate::redis::RedisConnection,
            "spin:postgres/postgres.connection": crate::postgres::PgConnection,
        },
    });
}

/// The world of spin-trigger-cron: a component that exports `handle-cron-event`.
pub mod cron {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "fermyon:spin-cron/spin-cron",
        exports: { default: async },
    });
}
