//! Host bindings of `spin:postgres/postgres@4.0.0`, generated here so that this factor holds
//! everything of its interface.

wasmtime::component::bindgen!({
    inline: "
        package seckill:postgres-factor;
        world postgres { import spin:postgres/postgres@4.0.0; }
    ",
    path: "../wit/deps/spin-postgres@4.0.0",
    imports: { default: async },
    with: { "spin:postgres/postgres.connection": crate::factors::postgres::client::PgConnection },
});
