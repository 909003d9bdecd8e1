//! Private bindings of `wit/plugin.wit` (`toolwright:plugin@0.2.0`) and of the frozen 0.1.0 the host still loads
//! (`wit-0.1`, [`v1`]): generated code stays here; the rest of the module speaks the host's own types.

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

/// `toolwright:plugin@0.1.0`, frozen as it was released: a plugin built against it imports `host@0.1.0` and
/// `process@0.1.0` and exports `tool@0.1.0`, `handler@0.1.0` or `offers@0.1.0`, which wasmtime never matches
/// with 0.2.0's (0.x versions are compatible only within their minor). `crate::v1` implements the imports by
/// the current ones and converts what crosses.
pub mod v1 {
    wasmtime::component::bindgen!({
        path: "wit-0.1",
        world: "full-plugin",
        with: {
            "toolwright:plugin/process.child": toolwright_native::NativeProcess,
            "wasi": wasmtime_wasi::p2::bindings::sync,
        },
        imports: { default: trappable },
    });

    pub use self::exports::toolwright::plugin::{handler, tool};
    pub use self::offering::exports::toolwright::plugin::offers;
    pub use self::toolwright::plugin::{host, process, types};

    /// 0.1.0's `offers` export.
    pub mod offering {
        wasmtime::component::bindgen!({
            path: "wit-0.1",
            world: "offers-plugin",
            with: {
                "toolwright:plugin/host": super::toolwright::plugin::host,
                "toolwright:plugin/types": super::toolwright::plugin::types,
                "wasi": wasmtime_wasi::p2::bindings::sync,
            },
            imports: { default: trappable },
        });
    }
}
