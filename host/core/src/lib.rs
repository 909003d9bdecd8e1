//! # toolwright-core
//!
//! The core of Toolwright: pi 1.6.0's tool system with no sandbox runtime in it. Everything else (native
//! built-ins, wasm plugins, MCP, the command line) is built on these types; the `toolwright` crate puts them
//! together in one `Session`.
//!
//! ## Map
//!
//! The modules, from the bottom up (each imports only modules above it in this list):
//!
//! - [`types`]: the wire types: [`ToolCall`], [`ToolResult`], [`ToolResultMessage`], [`AgentEvent`].
//! - [`text`]: text a plugin, client or model chose, escaped for people ([`text::escape`]): what the audit
//!   log's reader and the command line print.
//! - [`schema`]: argument validation with pi's coercion rules and error texts; schemas checked before use.
//! - [`audit`]: the audit log's records ([`AuditRecord`](audit::AuditRecord)), the trail of one call's decisions
//!   and activity, and the sinks they are written to ([`AuditLog`](audit::AuditLog)).
//! - [`model_view`]: what the model sees of a result's blocks (audio and embedded resources as pi words an MCP
//!   server's).
//! - [`tool`]: the runtime layer, [`AgentTool`]: what the pipeline runs, and [`ToolError`] with its typed
//!   [`HostFault`]s.
//! - [`authority`]: whose authority a call runs under when a plugin made it ([`Authority`]): the tools it may
//!   call and, opaquely, what it may touch.
//! - [`definition`]: the application layer, [`ToolDefinition`], [`ToolContext`] and the [`ToolCaller`] a
//!   context reaches other tools through; the adapters [`wrap_tool_definition`] and
//!   [`definition_from_agent_tool`].
//! - [`hooks`]: `before_tool_call` / `after_tool_call`, the two points where permissions and rewriting plug in,
//!   and [`HookChain`]s of them.
//! - [`record`]: the `nestedCalls` record of one model-issued call, and the [`CallRecords`](record::CallRecords)
//!   the pipeline takes it from.
//! - [`pipeline`]: [`Pipeline`], running a batch of calls in parallel or sequentially, with pi's event order;
//!   where a call's blocking work runs, [`Placement`](pipeline::Placement) (`Here`, `Short`, `Blocking`), decided
//!   once in [`Placement::of`](pipeline::Placement::of) and used by the native and wasm tools alike.
//! - [`nested`]: nested tool calls: ids, events with parents, the exclusive queue; [`NestedCalls`] is the
//!   [`ToolCaller`] of a session.
//! - [`registry`]: registered, active and callable tools, allow/deny, loadouts, tool search, the prompt's tool
//!   sections and the provider declarations; [`SharedRegistry`](registry::SharedRegistry) runs loadout hooks with
//!   no lock held.
//! - [`dispatch`]: [`Dispatcher`], the registry, pipeline and nested-call runner of a session wired together:
//!   `run` a batch, `call` one tool.
//! - [`ask`]: grants asked for while a call runs: what the host refused a call ([`ask::RefusalBook`]) and the
//!   question about it; [`client`]: what a running call may ask the client that made it (MCP's elicitation,
//!   sampling, roots) through the [`ClientDesk`](client::ClientDesk) a server registers its calls at.
//! - [`policy`]: policy files, typed: what each plugin is granted (requests ∩ grants, deny wins, decided once
//!   in [`policy::intersect`] for plugins and built-ins alike).
//!
//! ## Features
//!
//! - `icu-search` (default): tool search tokenises with ICU's word breaks, as pi's `Intl.Segmenter` does.
//!
//! ## Example
//!
//! ```
//! use serde_json::json;
//! use toolwright_core::{AgentTool, AssistantMessage, EventLog, Pipeline, ToolCall, ToolExecution, ToolResult};
//! use tokio_util::sync::CancellationToken;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let echo = AgentTool::new(
//!     "echo",
//!     "Echo a value",
//!     json!({"type": "object", "required": ["value"], "properties": {"value": {"type": "string"}}}),
//!     |run: ToolExecution| async move { Ok(ToolResult::text(format!("echoed: {}", run.params["value"]))) },
//! );
//! let message = AssistantMessage {
//!     tool_calls: vec![ToolCall::new("c1", "echo", json!({"value": 42})), ToolCall::new("c2", "nope", json!({}))],
//!     ..Default::default()
//! };
//! let events = EventLog::new();
//! let outcome = Pipeline::new().execute_tool_calls(&[echo], &message, &events, &CancellationToken::new()).await;
//! assert_eq!(outcome.messages[0].content[0].as_text(), Some("echoed: \"42\"")); // 42 was coerced to "42"
//! assert_eq!(outcome.messages[1].content[0].as_text(), Some("Tool nope not found"));
//! # });
//! ```

pub mod ask;
pub mod audit;
pub mod authority;
pub mod client;
pub mod definition;
pub mod dispatch;
pub mod hooks;
pub mod model_view;
pub mod nested;
pub mod pipeline;
pub mod policy;
pub mod record;
pub mod registry;
pub mod schema;
pub mod text;
pub mod tool;
pub mod types;

pub use authority::Authority;
pub use definition::{
    ContextFactory, DefinitionExecutor, ToolCaller, ToolContext, ToolDefinition, ToolSource,
    definition_from_agent_tool, wrap_tool_definition,
};
pub use dispatch::{Dispatched, Dispatcher};
pub use hooks::{
    AfterToolCall, AfterToolCallContext, AfterToolCallResult, BeforeToolCall, BeforeToolCallContext,
    BeforeToolCallResult, HookChain, after_tool_call, before_tool_call,
};
pub use nested::NestedCalls;
pub use pipeline::{BatchOutcome, EventLog, EventSink, NoEvents, Pipeline, event_sink};
pub use tool::{AgentTool, BoxFuture, CallSink, HostFault, ToolError, ToolExecution, ToolExecutor};
pub use toolwright_sdk::{ExecutionMode, Exposure, ToolAnnotations, ToolNamespace};
pub use types::{
    AgentEvent, AgentToolCallOutcome, AssistantMessage, Content, StopReason, ToolCall, ToolResult,
    ToolResultMessage, Usage,
};
