//! # toolwright-sdk
//!
//! The types a Toolwright tool is written against, shared by the host and by plugins. They serialise with pi's
//! JSON names (camelCase), so a result a plugin returns is the result the model, the UI and the wire see.
//!
//! - [`Content`]: a block of a tool result: text and images (pi's), audio and embedded resources (MCP's; the
//!   model sees them as text, [`Content::text_view`]).
//! - [`ToolResult`]: what a tool returns (pi's `AgentToolResult`): content for the model, details for the UI,
//!   structured content for programs, usage, and the error and terminate flags.
//! - [`Usage`]: token and cost accounting, with pi's [`Usage::combine`] rule.
//! - [`ExecutionMode`], [`Exposure`], [`ToolAnnotations`], [`ToolNamespace`]: tool metadata.
//! - [`Tool`] and [`ToolSpec`]: what a tool implements, once for both builds; [`ToolError`] is its thrown error;
//!   [`args`] turns the validated arguments into a typed value.
//! - [`Loadout`] and [`LoadoutChanges`]: what a tool's loadout hook sees and may change.
//! - [`Ctx`]: a tool's only door to files ([`Files`]), processes ([`Process`]), updates, cancellation and logs.
//! - [`js`]: JavaScript number, string and JSON semantics that pi's texts depend on.
//! - [`PluginMetadata`] and [`Capability`]: what a plugin says about itself and asks for ([`Capability::describe`]
//!   for people, `Display` in a policy's and a lockfile's words).
//! - [`Handler`]: a plugin in the call path (pi's `tool_call` / `tool_result` hooks); a hook's [`ToolError`] is
//!   pi's thrown `Error`.
//! - `export_tool!` / `export_handler!`: the one line that turns a crate into a wasm tool or handler plugin;
//!   `export_offers!` adds MCP resources and prompts ([`Offers`]) beside its tools.
//! - [`paths`] and [`truncate`]: pi's path resolution and output truncation, shared by the built-in tools.
//! - [`shell`]: pi's shell tool, one implementation that the built-in `bash` and `powershell` configure.
//! - [`arguments`]: how the built-ins read arguments no schema checked (a handler's rewrite), with pi's texts.
//! - [`uri`]: `decodeURIComponent` and local `$ref` resolution, for schemas and `file://` paths.
//!
//! This crate knows nothing of wasmtime, tokio or the host: it compiles natively and for `wasm32-wasip2`.
//!
//! ```
//! use toolwright_sdk::{Content, ToolResult};
//!
//! let result = ToolResult::text("hello").with_details(serde_json::json!({ "lines": 1 }));
//! assert_eq!(result.content, vec![Content::text("hello")]);
//! assert_eq!(
//!     serde_json::to_string(&result).unwrap(),
//!     r#"{"content":[{"type":"text","text":"hello"}],"details":{"lines":1}}"#
//! );
//! ```

pub mod arguments;
mod content;
mod ctx;
mod error;
#[cfg(target_family = "wasm")]
#[doc(hidden)]
pub mod guest;
mod handler;
pub mod js;
mod loadout;
mod metadata;
mod offers;
pub mod paths;
mod plugin;
mod result;
pub mod shell;
mod tool;
pub mod truncate;
pub mod uri;
mod usage;

pub use content::{Content, EmbeddedResource, ResourceBody, audio_omitted};
pub use ctx::{
    Access, CallOutcome, Command, Ctx, ExitStatus, FileKind, Files, InputRequest, LogLevel, Metadata,
    NESTED_CALLS_UNAVAILABLE, NO_CLIENT_TO_ASK, Process, ProcessEvent, TempFile, not_a_regular_file,
};
pub use error::{HostFault, ToolError, node_code};
pub use handler::{Handler, ToolCallDecision, ToolCallEvent, ToolResultChanges, ToolResultEvent};
pub use loadout::{Loadout, LoadoutChanges, LoadoutTool};
pub use metadata::{ExecutionMode, Exposure, ToolAnnotations, ToolNamespace};
/// The name [`OfferClient`] had when only prompts asked.
pub use offers::OfferClient as PromptClient;
pub use offers::{
    Completing, Contents, FilledPrompt, NobodyToAsk, OfferClient, OfferError, Offers, Prompt, PromptArgument,
    PromptMessage, Resource, ResourceContents,
};
pub use plugin::{Capability, CapabilityRequest, PluginMetadata};
pub use result::ToolResult;
#[cfg(feature = "schemars")]
pub use tool::schema;
pub use tool::{ArgumentsShim, FileMutations, LoadoutHook, Tool, ToolSpec, args, declaration};
pub use usage::{Cost, Usage};

/// JSON values, re-exported so plugin crates need no direct `serde_json` dependency for the common cases.
pub use serde_json::{Value, json};

/// Export the given tools as a wasm tool plugin (a `tool-plugin` component); on native builds it expands to
/// nothing, so the same crate also links natively.
///
/// ```ignore
/// toolwright_sdk::export_tool!(MyTool);
/// toolwright_sdk::export_tool!(ToolA, ToolB; capabilities = [
///     CapabilityRequest::new(Capability::Read("/data".into()), "reads the data set"),
/// ]);
/// ```
#[macro_export]
macro_rules! export_tool {
    ($($tool:expr),+ $(; capabilities = [$($cap:expr),* $(,)?])? $(;)?) => {
        #[cfg(target_family = "wasm")]
        const _: () = {
            #[doc(hidden)]
            pub struct __ToolwrightToolPlugin;
            impl $crate::guest::ToolPlugin for __ToolwrightToolPlugin {
                fn metadata() -> $crate::PluginMetadata {
                    $crate::PluginMetadata {
                        name: env!("CARGO_PKG_NAME").into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        description: env!("CARGO_PKG_DESCRIPTION").into(),
                        capabilities: vec![$($($cap),*)?],
                    }
                }
                fn tools() -> &'static [::std::boxed::Box<dyn $crate::Tool>] {
                    static TOOLS: ::std::sync::OnceLock<::std::vec::Vec<::std::boxed::Box<dyn $crate::Tool>>> =
                        ::std::sync::OnceLock::new();
                    TOOLS.get_or_init(|| vec![$(::std::boxed::Box::new($tool)),+])
                }
            }
            $crate::__export_tool_plugin_impl!(__ToolwrightToolPlugin with_types_in $crate::guest::tool_world);
        };
    };
}

/// Export an [`Offers`] (MCP resources and prompts) beside the plugin's tools or handler, in the same component
/// (its metadata names the plugin); on native builds it expands to nothing.
///
/// ```ignore
/// toolwright_sdk::export_tool!(MyTool);
/// toolwright_sdk::export_offers!(MyOffers);
/// ```
#[macro_export]
macro_rules! export_offers {
    ($offers:expr $(;)?) => {
        #[cfg(target_family = "wasm")]
        const _: () = {
            #[doc(hidden)]
            pub struct __ToolwrightOffers;
            impl $crate::guest::OffersPlugin for __ToolwrightOffers {
                fn offers() -> &'static dyn $crate::Offers {
                    static OFFERS: ::std::sync::OnceLock<::std::boxed::Box<dyn $crate::Offers>> =
                        ::std::sync::OnceLock::new();
                    OFFERS.get_or_init(|| ::std::boxed::Box::new($offers)).as_ref()
                }
            }
            $crate::__export_offers_plugin_impl!(__ToolwrightOffers with_types_in $crate::guest::offers_world);
        };
    };
}

/// Export a [`Handler`] as a wasm handler plugin (a `handler-plugin` component); on native builds it expands to
/// nothing.
///
/// ```ignore
/// toolwright_sdk::export_handler!(MyPolicy);
/// ```
#[macro_export]
macro_rules! export_handler {
    ($handler:expr $(; capabilities = [$($cap:expr),* $(,)?])? $(;)?) => {
        #[cfg(target_family = "wasm")]
        const _: () = {
            #[doc(hidden)]
            pub struct __ToolwrightHandlerPlugin;
            impl $crate::guest::HandlerPlugin for __ToolwrightHandlerPlugin {
                fn metadata() -> $crate::PluginMetadata {
                    $crate::PluginMetadata {
                        name: env!("CARGO_PKG_NAME").into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        description: env!("CARGO_PKG_DESCRIPTION").into(),
                        capabilities: vec![$($($cap),*)?],
                    }
                }
                fn handler() -> &'static dyn $crate::Handler {
                    static HANDLER: ::std::sync::OnceLock<::std::boxed::Box<dyn $crate::Handler>> = ::std::sync::OnceLock::new();
                    HANDLER.get_or_init(|| ::std::boxed::Box::new($handler)).as_ref()
                }
            }
            $crate::__export_handler_plugin_impl!(__ToolwrightHandlerPlugin with_types_in $crate::guest::handler_world);
        };
    };
}
