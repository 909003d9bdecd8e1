//! [`Session`]: everything a batch of tool calls needs, in one object an embedder builds once.
//!
//! A session owns the registry, the pipeline, the nested-call runner, the plugin host (feature `wasm`) and the
//! hooks. Its hooks are one documented chain ([`HookChain`]), the embedder's first, then the handler plugins',
//! then pi's image normalisation: before execution the embedder's `before_tool_call` hooks in the order given,
//! then the handler plugins' `tool_call` handlers in load order; after it, the embedder's `after_tool_call`
//! hooks, then the handler plugins' `tool_result` handlers, then image normalisation. Nothing replaces anything
//! else. Nested calls, `tool_search` activation and loadout hooks work through it with no
//! further step: every batch takes the active tools afresh. The handler plugins' place in the chain is a
//! [`Handlers`] slot, which a toolset loaded again fills anew (a handler that was still compiling in the
//! background when the session was built joins it so).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright_core::dispatch::{Dispatched, Dispatcher};

use crate::audit::{AuditLog, AuditSink};
use crate::hooks::{AfterToolCall, BeforeToolCall, HookChain};
use crate::pipeline::{BatchOutcome, EventSink, Pipeline};
#[cfg(not(feature = "wasm"))]
use crate::registry::RegistrySources;
use crate::registry::{Selection, SelectionError, SharedRegistry};
use crate::toolset::{BuiltinMode, ToolsetError, ToolsetOptions, audit_logs};
use crate::types::AssistantMessage;
use crate::{ExecutionMode, Exposure, ToolDefinition};

/// Why a session could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The selection cannot be used (checked before any plugin is compiled).
    #[error(transparent)]
    Selection(#[from] SelectionError),
    /// The tools could not be assembled.
    #[error(transparent)]
    Toolset(#[from] ToolsetError),
    /// An exposure was set for a tool no source has.
    #[error("there is no tool named `{0}` to expose")]
    UnknownTool(String),
    /// The audit log cannot be opened: no call runs unaudited when one was asked for.
    #[error("cannot open the audit log {}: {error}", path.display())]
    Audit {
        /// The log's file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// How to build a [`Session`]; from [`Session::builder`].
#[must_use]
pub struct SessionBuilder {
    options: ToolsetOptions,
    selection: Selection,
    tools: Vec<ToolDefinition>,
    before: Vec<BeforeToolCall>,
    after: Vec<AfterToolCall>,
    mode: ExecutionMode,
    work_here: bool,
    exposures: Vec<(String, Exposure)>,
    audit: Vec<Arc<dyn AuditSink>>,
}

impl std::fmt::Debug for SessionBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionBuilder")
            .field("options", &self.options)
            .field("selection", &self.selection)
            .field("tools", &self.tools.len())
            .field("hooks", &(self.before.len(), self.after.len()))
            .field("mode", &self.mode)
            .field("work_here", &self.work_here)
            .finish_non_exhaustive()
    }
}

impl SessionBuilder {
    /// Load plugins from every `.wasm` in `dir` (repeatable; trusted: the policy files' grants apply).
    #[cfg(feature = "wasm")]
    pub fn plugins(mut self, dir: impl Into<PathBuf>) -> Self {
        self.options.plugin_dirs.push(dir.into());
        self
    }

    /// Grant what the policy file `file` grants (repeatable; grants add up, denials win).
    pub fn policy(mut self, file: impl Into<PathBuf>) -> Self {
        self.options.policy_files.push(file.into());
        self
    }

    /// Also load what the `toolwright` command line loads: the user's and the project's plugin directories and
    /// policy files.
    pub fn user_config(mut self) -> Self {
        let defaults = ToolsetOptions::new(&self.options.cwd);
        let mut dirs = defaults.plugin_dirs;
        dirs.append(&mut self.options.plugin_dirs);
        self.options.plugin_dirs = dirs;
        let mut files = defaults.policy_files;
        files.append(&mut self.options.policy_files);
        self.options.policy_files = files;
        self.options.project_plugin_dir = defaults.project_plugin_dir;
        self.options.project_policy = defaults.project_policy;
        self.options.cache_dir = self.options.cache_dir.or(defaults.cache_dir);
        self
    }

    /// Everything to load, as the command line builds it (replaces what was set before, the workspace
    /// included: `options.cwd` is the session's).
    pub fn options(mut self, options: ToolsetOptions) -> Self {
        self.options = options;
        self
    }

    /// Cache compiled plugins in `dir` (none: compile on every load).
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.options.cache_dir = dir;
        self
    }

    /// Run the built-ins natively or as wasm plugins (feature `wasm`).
    pub fn builtins(mut self, mode: BuiltinMode) -> Self {
        self.options.builtins = mode;
        self
    }

    /// Which tools are registered and active (pi's `--tools`, `--exclude-tools`, `--no-tools`).
    pub fn selection(mut self, selection: Selection) -> Self {
        self.selection = selection;
        self
    }

    /// Register a tool of the embedding application (pi's SDK custom tool); it replaces a built-in or plugin
    /// tool of the same name.
    pub fn tool(mut self, definition: ToolDefinition) -> Self {
        self.tools.push(definition);
        self
    }

    /// Add a `before_tool_call` hook; it runs before the handler plugins' (see the module docs).
    pub fn before_tool_call(mut self, hook: BeforeToolCall) -> Self {
        self.before.push(hook);
        self
    }

    /// Add an `after_tool_call` hook; it runs before the handler plugins' `tool_result` and image normalisation.
    pub fn after_tool_call(mut self, hook: AfterToolCall) -> Self {
        self.after.push(hook);
        self
    }

    /// Write an audit record of every call, nested calls included, to `sink` (repeatable; besides the log the
    /// policy's `audit` names, see [`toolwright_core::audit`]).
    pub fn audit(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.audit.push(sink);
        self
    }

    /// Write the audit log to the file `path` too (the command line's `--audit-log`).
    pub fn audit_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.options.audit_log = Some(path.into());
        self
    }

    /// Run every batch sequentially or in parallel (the default).
    pub fn execution_mode(mut self, mode: ExecutionMode) -> Self {
        self.mode = mode;
        self
    }

    /// Let a call that runs alone (the current call of a sequential batch, the only call a batch executes) do
    /// a tool's blocking work on the thread that polls the batch, without a round trip through another thread:
    /// a small call gets much cheaper. The trade: stop a running batch through the
    /// cancellation token [`Session::run`] takes, not by dropping its future or with a `timeout` around it,
    /// which take effect only when that work returns. See [`Pipeline::with_work_here`].
    pub fn work_here(mut self, on: bool) -> Self {
        self.work_here = on;
        self
    }

    /// Change how the model reaches the built-in or plugin tool `tool`; building fails when no tool has the name.
    pub fn expose(mut self, tool: impl Into<String>, exposure: Exposure) -> Self {
        self.exposures.push((tool.into(), exposure));
        self
    }

    /// Load the tools and wire the session. Plugins that fail to load are reported in
    /// [`Session::plugin_errors`], not fatal.
    pub fn build(self) -> Result<Session, SessionError> {
        // A bad selection is reported before any plugin is compiled.
        self.selection.check()?;
        let parts = Parts::load(&self.options)?;
        self.finish(parts)
    }

    fn finish(self, mut parts: Parts) -> Result<Session, SessionError> {
        for (tool, exposure) in &self.exposures {
            if !parts.set_exposure(tool, *exposure) && !parts.will_offer(tool) {
                return Err(SessionError::UnknownTool(tool.clone()));
            }
        }
        let mut audit = self.audit;
        for path in audit_logs(&self.options, parts.policy()) {
            match AuditLog::open(&path) {
                Ok(log) => audit.push(Arc::new(log)),
                Err(error) => return Err(SessionError::Audit { path, error }),
            }
        }
        #[cfg(all(feature = "wasm", feature = "mcp"))]
        let selection = {
            // pi activates codemode when an MCP server offers tools to scripts, `tool_search` when one leaves
            // them to it.
            let mut selection = self.selection.clone();
            let wanted = [
                (parts.mcp.activates_codemode, "codemode"),
                (parts.mcp.activates_tool_search, "tool_search"),
            ];
            let defaults = selection.default_tools.get_or_insert_with(|| {
                crate::registry::DEFAULT_TOOL_NAMES
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            });
            for (on, name) in wanted {
                if on && !defaults.iter().any(|d| d == name) {
                    defaults.push(name.to_owned());
                }
            }
            selection
        };
        #[cfg(not(all(feature = "wasm", feature = "mcp")))]
        let selection = self.selection.clone();
        let registry = parts.registry(&selection, self.tools)?;
        let mut chain = HookChain::new();
        for (i, hook) in self.before.into_iter().enumerate() {
            chain.push_before_named(format!("embedder hook {}", i + 1), hook);
        }
        // The handler plugins' hooks through a slot a reload refills, when there is any handler (loaded, or
        // compiling in the background): a session without one runs no hook of theirs.
        let handlers = parts.has_handlers().then(|| {
            let handlers = Handlers::default();
            handlers.fill(&parts);
            handlers
        });
        if let Some(handlers) = &handlers {
            chain.push_before_named(HANDLER_HOOKS, handlers.relay_before());
        }
        for (i, hook) in self.after.into_iter().enumerate() {
            chain.push_after_named(format!("embedder hook {}", i + 1), hook);
        }
        if let Some(handlers) = &handlers {
            chain.push_after_named(HANDLER_HOOKS, handlers.relay_after());
        }
        chain.push_after_named("image normalisation", crate::builtins::normalize_images());
        let mut pipeline = Pipeline::new()
            .with_tool_execution(self.mode)
            .with_work_here(self.work_here)
            .with_hooks(&chain);
        pipeline.audit = match audit.len() {
            0 => None,
            1 => audit.pop(),
            _ => Some(Arc::new(audit)),
        };
        let dispatcher = Dispatcher::new(registry, pipeline, &self.options.cwd);
        Ok(Session {
            dispatcher,
            parts,
            options: self.options,
            handlers,
        })
    }
}

/// The name the audit log gives the handler plugins' hooks.
const HANDLER_HOOKS: &str = "handler plugins";

/// The handler plugins' hooks of a session ([`Session::handlers`]): a slot the session's hook chain calls
/// through, which [`Handlers::take_from`] fills with a toolset's handlers — those of a toolset loaded again
/// once a handler compiling in the background is done (`toolwright mcp`'s reload), in load order as ever.
#[derive(Clone, Default)]
pub struct Handlers(Arc<std::sync::RwLock<HandlerHooks>>);

/// A toolset's handler hooks: `tool_call`, then `tool_result`.
type HandlerHooks = (Option<BeforeToolCall>, Option<AfterToolCall>);

impl std::fmt::Debug for Handlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handlers").finish_non_exhaustive()
    }
}

impl Handlers {
    /// Run the handler plugins of `toolset` from now on (a call already past a hook keeps the ones it met).
    #[cfg(feature = "wasm")]
    pub fn take_from(&self, toolset: &crate::toolset::Toolset) {
        self.fill(toolset);
    }

    fn fill(&self, parts: &Parts) {
        let (before, after) = parts.hooks().into_parts();
        let hooks = (
            before.into_iter().next().map(|(_, hook)| hook),
            after.into_iter().next().map(|(_, hook)| hook),
        );
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = hooks;
    }

    fn current(&self) -> HandlerHooks {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn relay_before(&self) -> BeforeToolCall {
        let handlers = self.clone();
        crate::hooks::before_tool_call(move |ctx, cancel| {
            let hook = handlers.current().0;
            async move {
                match hook {
                    Some(hook) => hook(ctx, cancel).await,
                    None => Ok(None),
                }
            }
        })
    }

    fn relay_after(&self) -> AfterToolCall {
        let handlers = self.clone();
        crate::hooks::after_tool_call(move |ctx, cancel| {
            let hook = handlers.current().1;
            async move {
                match hook {
                    Some(hook) => hook(ctx, cancel).await,
                    None => Ok(None),
                }
            }
        })
    }
}

/// The tools a session is made of: the loaded toolset with `wasm`, else the native built-ins.
#[cfg(feature = "wasm")]
type Parts = crate::toolset::Toolset;

#[cfg(feature = "wasm")]
impl Parts {
    /// Whether any handler plugin is loaded or compiling in the background.
    fn has_handlers(&self) -> bool {
        self.plugins.iter().any(|p| p.is_handler) || self.deferred.iter().any(|d| d.handler)
    }
}

#[cfg(not(feature = "wasm"))]
struct Parts {
    builtins: Vec<ToolDefinition>,
    policy: crate::policy::Policy,
}

#[cfg(not(feature = "wasm"))]
impl Parts {
    fn load(options: &ToolsetOptions) -> Result<Self, ToolsetError> {
        if options.builtins == BuiltinMode::Wasm || !options.wasm_builtins.is_empty() {
            return Err(ToolsetError::NotBuilt(
                "the built-ins cannot run as wasm plugins: this toolwright was built without the `wasm` feature",
            ));
        }
        if !options.plugin_dirs.is_empty() {
            tracing::warn!(
                "plugin directories are not loaded: this toolwright was built without the `wasm` feature"
            );
        }
        let host = crate::native::HostEnv::current();
        let policy = crate::toolset::load_policy(options, &host)?;
        let mutations = Arc::new(crate::native::FileMutationQueue::default());
        Ok(Parts {
            builtins: crate::toolset::native_builtins(options, &policy, &host, &mutations)?,
            policy,
        })
    }

    fn policy(&self) -> &crate::policy::Policy {
        &self.policy
    }

    fn will_offer(&self, _tool: &str) -> bool {
        false
    }

    fn set_exposure(&mut self, tool: &str, exposure: Exposure) -> bool {
        let mut found = false;
        for definition in self.builtins.iter_mut().filter(|d| d.name == tool) {
            definition.exposure = exposure;
            found = true;
        }
        found
    }

    fn registry(
        &self,
        selection: &Selection,
        embedder: Vec<ToolDefinition>,
    ) -> Result<SharedRegistry, SelectionError> {
        let sources = RegistrySources {
            builtins: self.builtins.clone(),
            extensions: Vec::new(),
            embedder,
        };
        crate::registry::Registry::with_tool_search(sources, selection)
    }

    fn hooks(&self) -> HookChain {
        HookChain::new()
    }

    fn has_handlers(&self) -> bool {
        false
    }
}

/// A session: tools, hooks and nested calls wired together (see the module docs).
///
/// ```no_run
/// # async fn demo() -> Result<(), toolwright::session::SessionError> {
/// use toolwright::{AssistantMessage, EventLog, Session, ToolCall};
/// let session = Session::builder("/path/to/workspace").build()?;
/// let message = AssistantMessage {
///     tool_calls: vec![ToolCall::new("c1", "ls", serde_json::json!({}))],
///     ..Default::default()
/// };
/// let events = EventLog::new();
/// let outcome = session.run(&message, &events, &Default::default()).await;
/// # Ok(()) }
/// ```
pub struct Session {
    dispatcher: Dispatcher,
    /// Keeps the plugins loaded as long as their tools can run.
    #[cfg_attr(not(feature = "wasm"), allow(dead_code))]
    parts: Parts,
    options: ToolsetOptions,
    handlers: Option<Handlers>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("dispatcher", &self.dispatcher)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A builder for a session working in `cwd`: the built-ins natively, all active but `powershell`
    /// ([`builtins::ACTIVE_BY_DEFAULT`](crate::builtins::ACTIVE_BY_DEFAULT)), nothing else until asked for (no
    /// plugin directory, no policy file, no cache; see [`SessionBuilder::user_config`]).
    pub fn builder(cwd: impl Into<PathBuf>) -> SessionBuilder {
        let cwd = cwd.into();
        SessionBuilder {
            options: ToolsetOptions::bare(cwd),
            selection: Selection {
                default_tools: Some(
                    crate::builtins::ACTIVE_BY_DEFAULT
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                ),
                ..Default::default()
            },
            tools: Vec::new(),
            before: Vec::new(),
            after: Vec::new(),
            mode: ExecutionMode::Parallel,
            work_here: false,
            exposures: Vec::new(),
            audit: Vec::new(),
        }
    }

    /// Run the tool calls of `message` (pi's `executeToolCalls`) against the active tools, every event (nested
    /// calls' included) to `sink`; `cancel` aborts the batch.
    pub async fn run(
        &self,
        message: &AssistantMessage,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> BatchOutcome {
        self.dispatcher.run(message, sink, cancel).await
    }

    /// Run one call of `name` with `args`, without events.
    pub async fn call(&self, name: &str, args: Value) -> Dispatched {
        self.dispatcher.call(name, args, &CancellationToken::new()).await
    }

    /// The registry, pipeline and nested-call runner (for an MCP server, or to read the registry).
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// The registry: registered, active, declared and callable tools.
    pub fn registry(&self) -> &SharedRegistry {
        self.dispatcher.registry()
    }

    /// The tool `name`'s own rendering of a call's arguments for people (pi's `renderCall`); none when it has
    /// none (render them yourself). A plugin's runs in a fresh sandboxed instance, synchronously.
    pub fn render_call(&self, name: &str, args: &Value) -> Option<String> {
        let render = self
            .registry()
            .read(|r| r.definition(name).and_then(|d| d.render_call.clone()))?;
        render(args)
    }

    /// The tool `name`'s own rendering of a (partial) result for people (pi's `renderResult`), `expanded` when
    /// shown in full; none when it has none.
    pub fn render_result(
        &self,
        name: &str,
        result: &crate::types::ToolResult,
        expanded: bool,
        partial: bool,
    ) -> Option<String> {
        let render = self
            .registry()
            .read(|r| r.definition(name).and_then(|d| d.render_result.clone()))?;
        render(result, expanded, partial)
    }

    /// The handler plugins' hooks, which a toolset loaded again may replace ([`Handlers::take_from`]); none when
    /// no handler was loaded or compiling when the session was built (it runs no handler hook then).
    pub fn handlers(&self) -> Option<&Handlers> {
        self.handlers.as_ref()
    }

    /// The workspace.
    pub fn cwd(&self) -> &Path {
        &self.options.cwd
    }

    /// What was loaded.
    pub fn options(&self) -> &ToolsetOptions {
        &self.options
    }

    /// The loaded toolset: plugins, their grants and identities, what failed to load.
    #[cfg(feature = "wasm")]
    pub fn toolset(&self) -> &crate::toolset::Toolset {
        &self.parts
    }

    /// The plugins that could not be loaded, and why.
    #[cfg(feature = "wasm")]
    pub fn plugin_errors(&self) -> &[crate::toolset::LoadError] {
        &self.parts.errors
    }

    /// The plugins still compiling in the background ([`ToolsetOptions::compile_in_background`]) that the batch
    /// `message` must wait for: all of them when one is a handler (it is in every call's path); else none when
    /// each of its calls names a built-in (`read` … `ls`) or a tool that neither the session nor any of them has —
    /// built-ins make no calls of their own, so nothing the batch runs can reach a plugin left out (and none is
    /// left out that would replace a tool); else all of them, so the batch meets the tools a start with every
    /// plugin cached would load. Wait for them ([`Deferred::wait`](crate::toolset::Deferred::wait))
    /// and build the session again: the new one takes them in.
    #[cfg(feature = "wasm")]
    pub fn waits_for(&self, message: &AssistantMessage) -> &[crate::toolset::Deferred] {
        let deferred = &self.parts.deferred;
        let registry = self.registry();
        if message
            .tool_calls
            .iter()
            .any(|call| crate::toolset::must_wait(deferred, registry, &call.name))
        {
            deferred
        } else {
            &[]
        }
    }
}
