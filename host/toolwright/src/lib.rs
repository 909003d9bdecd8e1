//! # toolwright
//!
//! The host of Toolwright: it turns a model's tool calls into real local operations and brings the results back,
//! with the semantics of the pi coding agent 1.6.0's tool system. This crate is the facade: one [`Session`] over
//! the crates below, each behind a feature, re-exported under the module names it has always had.
//!
//! ## Map
//!
//! - [`session`]: [`Session`] and its [`SessionBuilder`]: the registry, the pipeline, nested calls, the plugin
//!   host and the hooks in one object (the handler plugins' through a [`session::Handlers`] slot a reload
//!   refills). Start here.
//! - [`toolset`]: the tools of a session as loaded: built-ins (native or wasm) and plugins (feature `wasm`),
//!   some loaded from their cached descriptions or compiling in the background (`toolset::Linking`,
//!   `toolset::Deferred`).
//! - [`trust`] (feature `wasm`): which plugin a grant is for ([`trust::identity`]), what the user approved of it
//!   ([`trust::lock`], `toolwright.lock`), and project trust ([`trust::project`]): a project's own plugins and
//!   grants do nothing until the user trusts it (`toolwright trust`). The runtime runs only what it let through.
//! - From `toolwright-core`: [`types`], [`schema`], [`audit`], [`tool`], [`definition`], [`hooks`], [`record`],
//!   [`pipeline`], [`nested`], [`registry`], [`dispatch`], [`policy`].
//! - From `toolwright-native` (feature `native`): [`native`], [`grants`], [`builtins`].
//! - From `toolwright-wasm` (feature `wasm`): [`wasm`], and [`codemode`] (feature `codemode`).
//! - From `toolwright-mcp` (feature `mcp`): [`mcp`].
//!
//! ## Features
//!
//! All on by default. `cargo build -p toolwright --no-default-features --features native` builds the pipeline
//! and the native built-ins without wasmtime, rmcp or ICU.
//!
//! - `native`: the native built-ins and their grants.
//! - `wasm`: WebAssembly plugins and handler plugins (implies `native`).
//! - `mcp`: the MCP server.
//! - `codemode`: pi's `codemode` (implies `wasm`).
//! - `icu-search`: tool search with ICU word breaks, as pi.

pub use toolwright_core::{
    ask, audit, client, definition, dispatch, hooks, nested, pipeline, policy, record, registry, schema,
    text, tool, types,
};
#[cfg(feature = "mcp")]
pub use toolwright_mcp as mcp;
#[cfg(feature = "native")]
pub use toolwright_native as native;
#[cfg(feature = "native")]
pub use toolwright_native::{builtins, grants};
#[cfg(feature = "wasm")]
pub use toolwright_wasm as wasm;
#[cfg(feature = "codemode")]
pub use toolwright_wasm::codemode;

#[cfg(feature = "native")]
pub mod session;
#[cfg(feature = "native")]
pub mod toolset;
#[cfg(feature = "wasm")]
pub mod trust;

#[cfg(feature = "native")]
pub use session::{Session, SessionBuilder, SessionError};
pub use toolwright_core::definition::{
    ContextFactory, DefinitionExecutor, ToolCaller, ToolContext, ToolDefinition, ToolSource,
    definition_from_agent_tool, wrap_tool_definition,
};
pub use toolwright_core::dispatch::{Dispatched, Dispatcher};
pub use toolwright_core::hooks::{
    AfterToolCall, AfterToolCallContext, AfterToolCallResult, BeforeToolCall, BeforeToolCallContext,
    BeforeToolCallResult, HookChain, after_tool_call, before_tool_call,
};
pub use toolwright_core::nested::NestedCalls;
pub use toolwright_core::pipeline::{BatchOutcome, EventLog, EventSink, NoEvents, Pipeline, event_sink};
pub use toolwright_core::tool::{
    AgentTool, BoxFuture, CallSink, HostFault, ToolError, ToolExecution, ToolExecutor,
};
pub use toolwright_core::types::{
    AgentEvent, AgentToolCallOutcome, AssistantMessage, Content, StopReason, ToolCall, ToolResult,
    ToolResultMessage, Usage,
};
/// The SDK plugins and native tools are written against.
pub use toolwright_sdk as sdk;
pub use toolwright_sdk::{ExecutionMode, Exposure, ToolAnnotations, ToolNamespace};
