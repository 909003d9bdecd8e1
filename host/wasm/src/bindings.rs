//! Private bindings of `wit/plugin.wit`: generated code stays here; the rest of the module speaks the host's
//! own types.

#![allow(missing_docs, unreachable_pub, clippy::unwrap_used)] // Generated code.

wasmtime::component::bindgen!({
    path: "wit",
    world: "full-plugin",
    with: {
        "toolwright:plugin/process.child": toolwright_native::NativeProcess,
        // The worlds include WASI; wasmtime-wasi implements it (linked on its own, see `Runtime::new`).
        "wasi": wasmtime_wasi::p2::bindings::sync,
    },
    imports: { default: trappable },
});

pub use self::exports::toolwright::plugin::{handler, tool};
pub use self::offering::exports::toolwright::plugin::offers;

/// The `offers` export (MCP resources and prompts), which a plugin may have beside its tools: its own world, the
/// imports shared with the bindings above.
pub mod offering {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "offers-plugin",
        with: {
            "toolwright:plugin/host": super::toolwright::plugin::host,
            "toolwright:plugin/types": super::toolwright::plugin::types,
            "wasi": wasmtime_wasi::p2::bindings::sync,
        },
        imports: { default: trappable },
    });
}
pub use self::toolwright::plugin::{host, process, types};
