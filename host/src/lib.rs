//! # toolwright
//!
//! The host of Toolwright: it turns a model's tool calls into real local operations and brings the results back,
//! with the semantics of the pi coding agent 1.6.0's tool system.
//!
//! ## Map
//!
//! - [`types`]: the wire types: [`ToolCall`], [`AgentToolResult`], [`ToolResultMessage`], [`AgentEvent`].
//! - [`tool`]: the runtime layer, [`AgentTool`]: what the pipeline runs.
//! - [`definition`]: the application layer, [`ToolDefinition`], and the adapters [`wrap_tool_definition`] and
//!   [`definition_from_agent_tool`].
//! - [`schema`]: argument validation with pi's coercion rules and error texts.
//! - [`hooks`]: `before_tool_call` / `after_tool_call`, the two points where permissions and rewriting plug in.
//! - [`grants`] and [`native`]: the cap-std sandbox native tools run in, and the adapter that turns an SDK
//!   [`Tool`](toolwright_sdk::Tool) into a [`ToolDefinition`].
//! - [`policy`]: policy files: what each plugin is granted (requests ∩ grants, deny wins).
//! - [`wasm`]: WebAssembly plugins: loading, the compiled-component cache, fresh instances per call.
//! - [`builtins`]: the seven built-in tools.
//! - [`codemode`]: pi's `codemode` tool: JavaScript that calls other tools, run by Boa inside a wasm component.
//! - [`toolset`]: a session's tools: the built-ins (native or wasm) and the plugin directories.
//! - [`registry`]: registered, active and callable tools, allow/deny, loadouts, tool search, the prompt's tool
//!   sections and the provider declarations.
//! - [`mcp`]: the registry's tools served over the Model Context Protocol (stdio).
//! - [`pipeline`]: [`Pipeline`], running a batch of calls in parallel or sequentially, with pi's event order.
//! - [`nested`]: nested tool calls ([`ToolContext::execute_tool`], the `call-tool` import): ids, events with
//!   parents, the exclusive queue, and the `nestedCalls` record on result messages.
//!
//! ## Example
//!
//! ```
//! use serde_json::json;
//! use toolwright::{AgentTool, AgentToolResult, AssistantMessage, EventLog, Pipeline, ToolCall, ToolExecution};
//! use tokio_util::sync::CancellationToken;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let echo = AgentTool::new(
//!     "echo",
//!     "Echo a value",
//!     json!({"type": "object", "required": ["value"], "properties": {"value": {"type": "string"}}}),
//!     |run: ToolExecution| async move { Ok(AgentToolResult::text(format!("echoed: {}", run.params["value"]))) },
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

pub mod builtins;
pub mod codemode;
pub mod definition;
pub mod grants;
pub mod hooks;
pub mod identity;
pub mod mcp;
pub mod native;
pub mod nested;
pub mod pipeline;
pub mod policy;
pub mod registry;
pub mod schema;
pub mod tool;
pub mod toolset;
pub mod types;
pub mod wasm;

pub use definition::{
    ContextFactory, DefinitionExecutor, ToolContext, ToolDefinition, ToolSource, definition_from_agent_tool,
    wrap_tool_definition,
};
pub use hooks::{
    AfterToolCall, AfterToolCallContext, AfterToolCallResult, BeforeToolCall, BeforeToolCallContext,
    BeforeToolCallResult, after_tool_call, before_tool_call,
};
pub use nested::NestedCalls;
pub use pipeline::{BatchOutcome, EventLog, EventSink, NoEvents, Pipeline, event_sink};
pub use tool::{AgentTool, BoxFuture, ToolError, ToolExecution, ToolExecutor, UpdateSink};
pub use toolwright_sdk::{ExecutionMode, Exposure, ToolAnnotations, ToolNamespace};
pub use types::{
    AgentEvent, AgentToolCallOutcome, AgentToolResult, AssistantMessage, Content, StopReason, ToolCall,
    ToolResultMessage, Usage,
};
