//! The application layer: [`ToolDefinition`] (pi's `ToolDefinition`) and the adapters to and from [`AgentTool`].

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright_sdk::{ExecutionMode, Exposure, ToolAnnotations, ToolNamespace};

use crate::audit::{Machine, Origin, OriginKind};
use crate::authority::Authority;
use crate::tool::{AgentTool, BoxFuture, CallSink, PrepareArguments, ToolError, ToolExecution, ToolExecutor};
use crate::types::{AgentToolCallOutcome, ToolResult};

/// What a tool's `execute` gets besides its arguments (pi's `ExtensionToolContext`): its call id, the session's
/// working directory, its cancellation, and the way to other tools ([`ToolContext::execute_tool`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolContext {
    /// The id of the call being executed.
    pub tool_call_id: String,
    /// The session's working directory.
    pub cwd: PathBuf,
    /// The call's cancellation.
    pub cancel: CancellationToken,
    /// How this call reaches other tools (the session's nested-call runner), when one is bound.
    pub caller: Option<Arc<dyn ToolCaller>>,
    /// The authority the call runs under when a plugin made it (none: the host's; see [`crate::authority`]).
    /// Its nested calls carry it on.
    pub authority: Option<Arc<Authority>>,
}

/// How a running tool reaches other tools (pi's `ctx.executeTool` and `ctx.tools`). A session's
/// [`NestedCalls`](crate::nested::NestedCalls) is one; an embedder can give a context another (a test double,
/// a proxy to a remote session).
pub trait ToolCaller: Send + Sync {
    /// Run `name` with `args` on behalf of the call `caller_id`, under `authority` (the caller's; none: the
    /// host's), partial results to `updates`. Never fails: every failure is an error outcome.
    fn call<'a>(
        &'a self,
        caller_id: &'a str,
        name: &'a str,
        args: Value,
        authority: Option<Arc<Authority>>,
        cancel: &'a CancellationToken,
        updates: CallSink,
    ) -> BoxFuture<'a, AgentToolCallOutcome>;

    /// The tools a call can reach now, as callers see them.
    fn tools(&self) -> Vec<toolwright_sdk::LoadoutTool>;

    /// The call `caller_id` has ended while calls it started still run (they are being cancelled): they stay
    /// unfinished in its record (see [`NestedCallRecorder::seal`](crate::record::NestedCallRecorder::seal)).
    fn seal(&self, caller_id: &str) {
        let _ = caller_id;
    }
}

impl fmt::Debug for dyn ToolCaller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ToolCaller")
    }
}

impl ToolContext {
    /// A context for the call `tool_call_id` in `cwd`, without nested calls.
    pub fn new(tool_call_id: impl Into<String>, cwd: impl Into<PathBuf>, cancel: CancellationToken) -> Self {
        ToolContext {
            tool_call_id: tool_call_id.into(),
            cwd: cwd.into(),
            cancel,
            caller: None,
            authority: None,
        }
    }

    /// This context under `authority` (see [`crate::authority`]).
    pub fn with_authority(mut self, authority: Option<Arc<Authority>>) -> Self {
        self.authority = authority;
        self
    }

    /// This context with a way to other tools.
    pub fn with_caller(mut self, caller: Arc<dyn ToolCaller>) -> Self {
        self.caller = Some(caller);
        self
    }

    /// pi's `ctx.executeTool`: run `name` with `args` as a nested call of this call, through the full pipeline,
    /// cancelled with this call. Without a runner the outcome is pi's error `Nested tool calls are not available
    /// in this context` (id `<call id>/0`).
    pub async fn execute_tool(&self, name: &str, args: Value, updates: CallSink) -> AgentToolCallOutcome {
        match &self.caller {
            Some(caller) => {
                caller
                    .call(
                        &self.tool_call_id,
                        name,
                        args,
                        self.authority.clone(),
                        &self.cancel,
                        updates,
                    )
                    .await
            }
            None => AgentToolCallOutcome {
                tool_call: crate::types::ToolCall::new(
                    format!("{}/0", self.tool_call_id),
                    name,
                    Value::Object(Default::default()),
                ),
                result: ToolResult::error(toolwright_sdk::NESTED_CALLS_UNAVAILABLE),
                is_error: true,
                duration_ms: None,
            },
        }
    }

    /// This call has ended with nested calls still running: they stay unfinished in its record, however soon
    /// they wind down (see [`ToolCaller::seal`]).
    pub fn seal(&self) {
        if let Some(caller) = &self.caller {
            caller.seal(&self.tool_call_id);
        }
    }

    /// pi's `ctx.tools`: what nested calls can reach now (empty without a runner).
    pub fn tools(&self) -> Vec<toolwright_sdk::LoadoutTool> {
        self.caller.as_ref().map(|c| c.tools()).unwrap_or_default()
    }
}

/// Makes a fresh [`ToolContext`] for every execution (pi's context factory): `(tool_call_id, cancel)`.
pub type ContextFactory = Arc<dyn Fn(&str, &CancellationToken) -> ToolContext + Send + Sync>;

/// The code behind a [`ToolDefinition`]: like [`ToolExecutor`], plus the context, which is `None` when the
/// definition was wrapped without a context factory.
pub trait DefinitionExecutor: Send + Sync {
    /// Run one call.
    fn execute(
        &self,
        run: ToolExecution,
        ctx: Option<ToolContext>,
    ) -> BoxFuture<'static, Result<ToolResult, ToolError>>;
}

impl<F, Fut> DefinitionExecutor for F
where
    F: Fn(ToolExecution, Option<ToolContext>) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
{
    fn execute(
        &self,
        run: ToolExecution,
        ctx: Option<ToolContext>,
    ) -> BoxFuture<'static, Result<ToolResult, ToolError>> {
        Box::pin(self(run, ctx))
    }
}

/// Where a tool came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "camelCase")]
pub enum ToolSource {
    /// One of the built-in tools (`builtin:NAME`).
    Builtin,
    /// A tool the embedding application defined in its own code (pi's `<sdk:NAME>`; `"sdk"` in JSON, as pi).
    #[serde(rename = "sdk")]
    Embedder,
    /// A plugin file.
    Plugin {
        /// The `.wasm` file.
        path: PathBuf,
    },
    /// A tool of an MCP server Toolwright connects to.
    Mcp {
        /// The server's configured name.
        server: String,
        /// What the user approved of the server: the SHA-256 of its identity (command, arguments and program, or
        /// URL), lower-case hex.
        identity: String,
    },
}

impl ToolSource {
    /// The audit log's origin of a tool from this source, when whoever made it said nothing more.
    pub fn origin(&self) -> Origin {
        match self {
            ToolSource::Builtin => Origin::default(),
            ToolSource::Embedder => Origin {
                kind: OriginKind::Embedder,
                ..Default::default()
            },
            ToolSource::Plugin { path } => Origin {
                kind: OriginKind::Plugin,
                machine: Machine::Wasm,
                plugin: path.file_stem().map(|s| s.to_string_lossy().into_owned()),
                grants: Some(Vec::new()),
                ..Default::default()
            },
            ToolSource::Mcp { server, identity } => Origin {
                kind: OriginKind::Mcp,
                server: Some(server.clone()),
                sha256: Some(identity.clone()),
                ..Default::default()
            },
        }
    }
}

/// How a tool's UI frame is drawn (pi's `renderShell`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RenderShell {
    /// The standard framed tool box.
    #[default]
    Default,
    /// The tool draws its own frame.
    #[serde(rename = "self")]
    OwnFrame,
}

/// Which tools a call may reach (pi's `reachesTools` result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReachedTools {
    /// Any tool.
    All,
    /// The words of the input that may name tools or namespaces.
    Words(Vec<String>),
}

/// The input of a `prepareLoadout` hook (pi's `ToolLoadout`): the tools about to be declared, callable and
/// registered, and what the registry knows of each.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ToolLoadout {
    /// The active tools about to be declared, in active order, with their original descriptions.
    pub declared: Vec<AgentTool>,
    /// The tools callable through nested calls for this active set.
    pub callable: Vec<AgentTool>,
    /// Every registered tool.
    pub registered: Vec<AgentTool>,
    /// Exposure, namespace and normalised guidelines of every registered tool, by name.
    pub(crate) info: std::collections::HashMap<String, toolwright_sdk::LoadoutTool>,
}

impl ToolLoadout {
    /// pi's `getExposure`: the tool's exposure, `direct` when unknown.
    pub fn exposure(&self, name: &str) -> Exposure {
        self.info.get(name).map(|t| t.exposure).unwrap_or_default()
    }

    /// pi's `getNamespace`.
    pub fn namespace(&self, name: &str) -> Option<&ToolNamespace> {
        self.info.get(name).and_then(|t| t.namespace.as_ref())
    }

    /// pi's `getPromptGuidelines`: normalised.
    pub fn prompt_guidelines(&self, name: &str) -> &[String] {
        self.info
            .get(name)
            .map_or(&[], |t| t.prompt_guidelines.as_slice())
    }

    /// The loadout as a plugin sees it: each tool with its name, description, exposure, namespace and guidelines.
    pub fn to_sdk(&self) -> toolwright_sdk::Loadout {
        let list = |tools: &[AgentTool]| {
            tools
                .iter()
                .map(|t| {
                    let mut info = self.info.get(t.name()).cloned().unwrap_or_default();
                    info.name = t.name().to_owned();
                    info.description = t.description().to_owned();
                    info
                })
                .collect()
        };
        toolwright_sdk::Loadout {
            declared: list(&self.declared),
            callable: list(&self.callable),
            registered: list(&self.registered),
        }
    }
}

/// The output of a `prepareLoadout` hook (pi's `ToolLoadoutChanges`).
pub use toolwright_sdk::LoadoutChanges;

/// A `prepareLoadout` hook.
pub type PrepareLoadout =
    Arc<dyn Fn(&ToolLoadout) -> Result<Option<LoadoutChanges>, ToolError> + Send + Sync>;
/// A `reachesTools` function.
pub type ReachesTools = Arc<dyn Fn(&Value) -> ReachedTools + Send + Sync>;
/// A tool's own rendering of a call's arguments for a UI (pi's `renderCall`): lines of text, or none for the
/// UI's default rendering.
pub type RenderCall = Arc<dyn Fn(&Value) -> Option<String> + Send + Sync>;
/// A tool's own rendering of a (partial) result for a UI (pi's `renderResult`): `(result, expanded, is_partial)`
/// to lines of text, or none for the UI's default rendering.
pub type RenderResult = Arc<dyn Fn(&ToolResult, bool, bool) -> Option<String> + Send + Sync>;

/// A tool as the application knows it (pi's `ToolDefinition`): every field of pi's, plus where it came from.
///
/// Built-ins, embedder tools and plugin tools all become `ToolDefinition`s; the pipeline runs them through
/// [`wrap_tool_definition`].
#[derive(Clone)]
pub struct ToolDefinition {
    /// The name the model calls; the registry key.
    pub name: String,
    /// The UI label; not sent to the model.
    pub label: String,
    /// The model-visible description.
    pub description: String,
    /// One-line summary for the system prompt's tool list.
    pub prompt_snippet: Option<String>,
    /// Guideline bullets for the system prompt while the tool is declared.
    pub prompt_guidelines: Vec<String>,
    /// The parameters' JSON Schema (an object schema).
    pub parameters: Value,
    /// Constrained-sampling request passed through to providers.
    pub constrained_sampling: Option<Value>,
    /// How a UI frames the tool.
    pub render_shell: RenderShell,
    /// Compatibility shim on the raw arguments before validation.
    pub prepare_arguments: Option<PrepareArguments>,
    /// The JSON Schema of `structuredContent`.
    pub output_schema: Option<Value>,
    /// How the model can reach the tool.
    pub exposure: Exposure,
    /// A grouping for listings and tool search.
    pub namespace: Option<ToolNamespace>,
    /// Which tools a call may reach, for tools that call tools.
    pub reaches_tools: Option<ReachesTools>,
    /// Informational hints about the tool's effects.
    pub annotations: Option<ToolAnnotations>,
    /// Whether registration activates the tool; `None` means pi's default for the exposure.
    pub default_active: Option<bool>,
    /// Called whenever the active set is applied and this tool is active.
    pub prepare_loadout: Option<PrepareLoadout>,
    /// Per-tool execution mode.
    pub execution_mode: Option<ExecutionMode>,
    /// Whether a call may run for minutes (an MCP client that accepts tasks gets a task for it); `None` leaves it
    /// to the host. Not pi's: its tools run in the agent's own loop.
    pub long_running: Option<bool>,
    /// UI renderer of the call.
    pub render_call: Option<RenderCall>,
    /// UI renderer of the result.
    pub render_result: Option<RenderResult>,
    /// Where the tool came from.
    pub source: ToolSource,
    /// What the audit log says runs it (plugin, digest, grants); `None`: what [`ToolSource::origin`] says.
    pub origin: Option<Arc<Origin>>,
    /// The code.
    pub execute: Arc<dyn DefinitionExecutor>,
}

impl ToolDefinition {
    /// A definition with the required fields; everything else takes pi's defaults.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        execute: impl DefinitionExecutor + 'static,
    ) -> Self {
        let name = name.into();
        ToolDefinition {
            label: name.clone(),
            name,
            description: description.into(),
            prompt_snippet: None,
            prompt_guidelines: Vec::new(),
            parameters,
            constrained_sampling: None,
            render_shell: RenderShell::Default,
            prepare_arguments: None,
            output_schema: None,
            exposure: Exposure::Direct,
            namespace: None,
            reaches_tools: None,
            annotations: None,
            default_active: None,
            prepare_loadout: None,
            execution_mode: None,
            long_running: None,
            render_call: None,
            render_result: None,
            source: ToolSource::Embedder,
            origin: None,
            execute: Arc::new(execute),
        }
    }

    /// A definition from a tool's declaration (the fields an SDK tool or a plugin can carry), its code and origin.
    pub fn from_spec(
        spec: &toolwright_sdk::ToolSpec,
        source: ToolSource,
        execute: impl DefinitionExecutor + 'static,
    ) -> Self {
        let mut definition =
            ToolDefinition::new(&spec.name, &spec.description, spec.parameters.clone(), execute);
        definition.label = spec.label.clone();
        definition.prompt_snippet = spec.prompt_snippet.clone();
        definition.prompt_guidelines = spec.prompt_guidelines.clone();
        definition.output_schema = spec.output_schema.clone();
        definition.constrained_sampling = spec.constrained_sampling.clone();
        definition.execution_mode = spec.execution_mode;
        definition.long_running = spec.long_running;
        definition.exposure = spec.exposure;
        definition.annotations = spec.annotations.clone();
        definition.namespace = spec.namespace.clone();
        definition.default_active = spec.default_active;
        definition.render_shell = if spec.renders_own_frame {
            RenderShell::OwnFrame
        } else {
            RenderShell::Default
        };
        definition.source = source;
        definition
    }

    /// Whether registration activates the tool: the explicit setting, else true for `direct` and `model-only`.
    pub fn is_default_active(&self) -> bool {
        self.default_active
            .unwrap_or(matches!(self.exposure, Exposure::Direct | Exposure::ModelOnly))
    }
}

impl fmt::Debug for ToolDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolDefinition")
            .field("name", &self.name)
            .field("exposure", &self.exposure)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// pi's `wrapToolDefinition`: the [`AgentTool`] the pipeline runs for `definition`.
///
/// Name, label, description, parameters, output schema, constrained sampling, argument shim and execution mode
/// are copied. Every execution gets `ctx_factory(call_id, cancel)` as its context, or `None` without a factory.
pub fn wrap_tool_definition(definition: &ToolDefinition, ctx_factory: Option<ContextFactory>) -> AgentTool {
    struct Wrapped {
        execute: Arc<dyn DefinitionExecutor>,
        ctx_factory: Option<ContextFactory>,
    }
    impl ToolExecutor for Wrapped {
        fn execute(&self, run: ToolExecution) -> BoxFuture<'static, Result<ToolResult, ToolError>> {
            let ctx = self.ctx_factory.as_ref().map(|f| f(&run.call_id, &run.cancel));
            self.execute.execute(run, ctx)
        }
    }
    let executor = Wrapped {
        execute: definition.execute.clone(),
        ctx_factory,
    };
    let mut tool = AgentTool::from_executor(
        definition.name.clone(),
        definition.description.clone(),
        definition.parameters.clone(),
        Arc::new(executor),
    )
    .with_label(definition.label.clone())
    .with_prepare_arguments_shared(definition.prepare_arguments.clone())
    .with_origin(
        definition
            .origin
            .clone()
            .unwrap_or_else(|| Arc::new(definition.source.origin())),
    );
    if let Some(schema) = &definition.output_schema {
        tool = tool.with_output_schema(schema.clone());
    }
    if let Some(request) = &definition.constrained_sampling {
        tool = tool.with_constrained_sampling(request.clone());
    }
    if let Some(mode) = definition.execution_mode {
        tool = tool.with_execution_mode(mode);
    }
    tool
}

/// pi's `createToolDefinitionFromAgentTool`: a minimal definition for `tool` whose `execute` ignores the context.
pub fn definition_from_agent_tool(tool: &AgentTool) -> ToolDefinition {
    let inner = tool.clone();
    let mut definition = ToolDefinition::new(
        tool.name(),
        tool.description(),
        tool.parameters().clone(),
        move |run: ToolExecution, _ctx: Option<ToolContext>| inner.execute(run),
    );
    definition.label = tool.label().to_owned();
    definition.output_schema = tool.output_schema().cloned();
    definition.constrained_sampling = tool.constrained_sampling().cloned();
    definition.prepare_arguments = tool.prepare_arguments().cloned();
    definition.execution_mode = tool.execution_mode();
    definition.origin = tool.origin().cloned();
    definition
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::CallSink;
    use serde_json::json;

    #[tokio::test]
    async fn wrapping_copies_fields_and_passes_a_context_from_the_factory() {
        let mut definition = ToolDefinition::new(
            "ctx_echo",
            "Echo the call id the context carries",
            json!({"type": "object"}),
            |_run: ToolExecution, ctx: Option<ToolContext>| async move {
                Ok(ToolResult::text(ctx.map_or("none".into(), |c| c.tool_call_id)))
            },
        );
        definition.label = "Ctx echo".into();
        definition.execution_mode = Some(ExecutionMode::Sequential);
        let factory: ContextFactory = Arc::new(|id: &str, cancel: &CancellationToken| {
            ToolContext::new(format!("ctx:{id}"), "/", cancel.clone())
        });
        let run = |id: &str| ToolExecution {
            call_id: id.into(),
            params: json!({}),
            cancel: CancellationToken::new(),
            updates: CallSink::discard(),
        };

        let with_ctx = wrap_tool_definition(&definition, Some(factory));
        assert_eq!(with_ctx.label(), "Ctx echo");
        assert_eq!(with_ctx.execution_mode(), Some(ExecutionMode::Sequential));
        assert_eq!(
            with_ctx.execute(run("c1")).await.unwrap().text_content(),
            "ctx:c1"
        );

        let without = wrap_tool_definition(&definition, None);
        assert_eq!(without.execute(run("c2")).await.unwrap().text_content(), "none");

        let back = definition_from_agent_tool(&with_ctx);
        assert_eq!(back.label, "Ctx echo");
        assert_eq!(back.exposure, Exposure::Direct);
        assert!(back.is_default_active());
    }
}
