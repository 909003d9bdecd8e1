//! # toolwright-mcp
//!
//! Serving the registry's tools over the Model Context Protocol, with the official Rust SDK (`rmcp`).
//!
//! ## Map
//!
//! One file: [`McpServer`] over a session's registry and pipeline, [`Reload`] for plugin directories that
//! change while it serves, [`McpServeError`].
//!
//! - `tools/list` lists the declared tools after the loadout: name, title (the label), description, input
//!   schema, output schema (when it describes an object, as MCP requires) and annotations.
//! - `tools/call` runs the full pipeline (validation, hooks, handler plugins) on one active tool. Content blocks
//!   map one to one; `structuredContent` is passed when it is an object; `isError` is the final error flag.
//!   Partial results become `notifications/progress` when the client sent a progress token, and
//!   `notifications/cancelled` aborts the call (a bash call's process group is killed).
//! - Calls run concurrently, except that a tool whose execution mode is sequential runs alone, as pi runs a batch
//!   that contains one.
//! - When a call changes the declared tools (`tool_search` activating a deferred tool), the server sends
//!   `notifications/tools/list_changed`.
//!
//! Nothing but protocol messages goes to stdout: logs go to stderr through `tracing`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use toolwright_sdk::ExecutionMode;

use toolwright_core::dispatch::Dispatcher;
use toolwright_core::pipeline::EventSink;
use toolwright_core::registry::transcript::ToolDeclaration;
use toolwright_core::tool::BoxFuture;
use toolwright_core::types::{AgentEvent, AssistantMessage, ToolCall};

/// An MCP server over a session's [`Dispatcher`]: its registry's declared tools, run through its pipeline.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
}

struct Inner {
    dispatcher: Dispatcher,
    /// Parallel calls share it; a sequential tool takes it alone.
    exclusive: tokio::sync::RwLock<()>,
    /// The registry's revision and declarations when they were last compared: a call that leaves the revision
    /// unchanged costs no comparison.
    announced: Mutex<(u64, Vec<ToolDeclaration>)>,
}

/// Polled for the plugins' tools: `Some` with all of them when the plugin directories changed, else `None`.
pub type Reload = Box<dyn FnMut() -> Option<Vec<toolwright_core::ToolDefinition>> + Send>;

/// Why the server stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum McpServeError {
    /// The client never completed the initialization.
    #[error("the MCP session did not start: {0}")]
    Initialize(String),
    /// The service task failed.
    #[error("the MCP service failed: {0}")]
    Service(String),
}

impl McpServer {
    /// A server for `dispatcher`'s tools.
    pub fn new(dispatcher: Dispatcher) -> Self {
        let announced = dispatcher.registry().read(|r| (r.revision(), r.declarations()));
        McpServer {
            inner: Arc::new(Inner {
                dispatcher,
                exclusive: tokio::sync::RwLock::new(()),
                announced: Mutex::new(announced),
            }),
        }
    }

    /// Send `notifications/tools/list_changed` when the declared tools differ from the last ones compared.
    async fn announce_changes(&self, peer: &Peer<RoleServer>) {
        let changed = self.inner.dispatcher.registry().read(|registry| {
            let mut announced = self.inner.announced.lock().unwrap_or_else(|p| p.into_inner());
            if registry.revision() == announced.0 {
                return false;
            }
            let declarations = registry.declarations();
            let changed = declarations != announced.1;
            *announced = (registry.revision(), declarations);
            changed
        });
        if changed && let Err(error) = peer.notify_tool_list_changed().await {
            tracing::warn!("cannot send tools/list_changed: {error}");
        }
    }

    /// Serve on stdin and stdout until the client disconnects.
    pub async fn serve_stdio(self) -> Result<(), McpServeError> {
        self.serve_stdio_reloading(None).await
    }

    /// Serve on stdin and stdout until the client disconnects; every `interval`, ask `reload` (on a blocking
    /// thread) for the plugins' tools, and when it returns new ones, put them in the registry and tell the client
    /// if the declared tools changed (`notifications/tools/list_changed`).
    pub async fn serve_stdio_reloading(
        self,
        reload: Option<(Reload, Duration)>,
    ) -> Result<(), McpServeError> {
        let running = self
            .clone()
            .serve(rmcp::transport::io::stdio())
            .await
            .map_err(|e| McpServeError::Initialize(e.to_string()))?;
        let watcher = reload.map(|(reload, interval)| {
            let (server, peer) = (self.clone(), running.peer().clone());
            tokio::spawn(server.watch(reload, interval, peer))
        });
        let outcome = running.waiting().await;
        if let Some(watcher) = watcher {
            watcher.abort();
        }
        outcome
            .map(|_| ())
            .map_err(|e| McpServeError::Service(e.to_string()))
    }

    async fn watch(self, mut reload: Reload, interval: Duration, peer: Peer<RoleServer>) {
        loop {
            tokio::time::sleep(interval).await;
            let Ok((back, tools)) = tokio::task::spawn_blocking(move || {
                let tools = reload();
                (reload, tools)
            })
            .await
            else {
                return;
            };
            reload = back;
            let Some(tools) = tools else {
                continue;
            };
            self.inner
                .dispatcher
                .registry()
                .update(|r| r.set_plugin_tools(tools));
            self.announce_changes(&peer).await;
        }
    }

    /// The declared tools as MCP tools.
    pub fn tools(&self) -> Vec<Tool> {
        self.inner.dispatcher.registry().read(|registry| {
            registry
            .declarations()
            .into_iter()
            .filter_map(|declaration| {
                let definition = registry.definition(&declaration.name)?;
                let mut tool = json!({
                    "name": declaration.name,
                    "title": definition.label,
                    "description": declaration.description,
                    "inputSchema": declaration.parameters,
                });
                if let Some(schema) = definition.output_schema.as_ref().filter(|s| is_object_schema(s)) {
                    tool["outputSchema"] = schema.clone();
                }
                if let Some(annotations) = &definition.annotations {
                    tool["annotations"] = serde_json::to_value(annotations).unwrap_or(Value::Null);
                }
                match serde_json::from_value(tool) {
                    Ok(tool) => Some(tool),
                    Err(error) => {
                        tracing::warn!(tool = %declaration.name, "cannot describe the tool over MCP: {error}");
                        None
                    }
                }
            })
            .collect()
        })
    }

    /// Run one call through the pipeline.
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let name = request.name.to_string();
        let tools = self.inner.dispatcher.active_tools();
        let Some(tool) = tools.iter().find(|t| t.name() == name).cloned() else {
            return Err(ErrorData::invalid_params(
                toolwright_core::pipeline::texts::not_found(&name),
                None,
            ));
        };
        let sequential = tool.execution_mode() == Some(ExecutionMode::Sequential);
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let progress = context
            .meta
            .get_progress_token()
            .or_else(|| request.meta.as_ref().and_then(|m| m.get_progress_token()));
        let sink = ProgressSink {
            peer: context.peer.clone(),
            token: progress,
            count: Mutex::new(0),
        };
        let message = AssistantMessage {
            tool_calls: vec![ToolCall::new(
                format!("mcp-{}", context.id),
                name.clone(),
                arguments,
            )],
            ..Default::default()
        };
        let outcome = {
            let _turn = if sequential {
                (None, Some(self.inner.exclusive.write().await))
            } else {
                (Some(self.inner.exclusive.read().await), None)
            };
            // On a task of its own: a client that cancels or goes away does not leave the call half-run; the
            // cancellation reaches it through the token.
            let (dispatcher, cancel) = (self.inner.dispatcher.clone(), context.ct.clone());
            tokio::spawn(async move { dispatcher.run(&message, &sink, &cancel).await })
                .await
                .map_err(|e| ErrorData::internal_error(format!("the call did not finish: {e}"), None))?
        };
        self.announce_changes(&context.peer).await;
        let (Some(result), Some(message)) = (outcome.results.first(), outcome.messages.first()) else {
            return Err(ErrorData::internal_error("the pipeline returned no result", None));
        };
        let mut body = json!({
            "content": message.content,
            "isError": message.is_error,
        });
        if let Some(structured) = result.structured_content.as_ref().filter(|v| v.is_object()) {
            body["structuredContent"] = structured.clone();
        }
        // The record of the nested calls the tool made (pi's `nestedCalls`), where MCP keeps extensions.
        if let Some(nested) = &message.nested_calls {
            body["_meta"] = json!({ NESTED_CALLS_META: nested });
        }
        serde_json::from_value(body)
            .map_err(|e| ErrorData::internal_error(format!("cannot encode the result: {e}"), None))
    }
}

/// The `_meta` key of a `tools/call` result that carries the record of the nested calls the tool made (pi's
/// `nestedCalls`: ids, names, arguments, status, errors, durations; `complete` false when the record was cut).
pub const NESTED_CALLS_META: &str = "toolwright/nestedCalls";

/// MCP requires an output schema to describe an object.
fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// Turns the pipeline's updates into progress notifications.
struct ProgressSink {
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
    count: Mutex<u64>,
}

impl EventSink for ProgressSink {
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Nested calls' updates reach the client through their caller's, if it passes them on.
            let (
                Some(token),
                AgentEvent::ToolExecutionUpdate {
                    partial_result,
                    parent_tool_call_id: None,
                    ..
                },
            ) = (&self.token, &event)
            else {
                return;
            };
            let progress = {
                let mut count = self.count.lock().unwrap_or_else(|p| p.into_inner());
                *count += 1;
                *count
            };
            let text = partial_result.text_content();
            let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            let mut notification = ProgressNotificationParam::new(token.clone(), progress as f64);
            if !last.is_empty() {
                notification.message = Some(last.chars().take(200).collect());
            }
            if let Err(error) = self.peer.notify_progress(notification).await {
                tracing::debug!("cannot send progress: {error}");
            }
        })
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("toolwright", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Toolwright's tools: pi 1.6.0's built-in tools and sandboxed WebAssembly plugins, run through pi's pipeline.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        serde_json::from_value(json!({ "tools": self.tools() }))
            .map_err(|e| ErrorData::internal_error(format!("cannot list the tools: {e}"), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await.map(CallToolResponse::from)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }
}
