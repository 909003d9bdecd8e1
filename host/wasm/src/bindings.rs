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
pub use self::toolwright::plugin::{host, process, types};
