//! Generated bindings for `wit/interceptor.wit`. No behaviour lives here.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "plugin",
    imports: {
        "ahp:interceptor/delivery.exchange": async | trappable,
        "ahp:interceptor/credentials.acquire": async | trappable,
        "ahp:interceptor/delivery.retry-after": async | trappable,
        default: trappable,
    },
    exports: { default: async },
    with: {
        "ahp:interceptor/credentials.credential": crate::types::Credential,
    },
});

pub use ahp::interceptor::{credentials, delivery, host_types};
pub use exports::ahp::interceptor::interceptor;
