//! A plugin's tool as a [`ToolDefinition`]: every call runs in a fresh instance on a blocking thread, within
//! the bound on live instances; a trap or a malformed result becomes an error result naming the plugin.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use toolwright_sdk::{HostFault, ToolError, ToolSpec, paths};

use super::gate::Entry;
use super::{PluginInner, WasmGrants, bindings, convert};
use toolwright_core::definition::{ToolContext, ToolDefinition, ToolSource};
use toolwright_core::tool::ToolExecution;
use toolwright_core::types::ToolResult;

/// How long a plugin may take to render a call or a result for people (a UI waits for it); past it, the UI
/// renders them itself.
pub const RENDER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// The definition of `spec`, a tool of the plugin `inner`.
pub fn definition(
    inner: &Arc<PluginInner>,
    path: &Path,
    spec: &ToolSpec,
    grants: &Arc<WasmGrants>,
) -> ToolDefinition {
    let (plugin, tool_name, grants_for_calls) = (inner.clone(), spec.name.clone(), grants.clone());
    let mutates = spec.mutates_files;
    // Made once: a call the model makes runs under it as it is.
    let own = super::authority::own_authority(&inner.name, grants);
    let execute = move |run: ToolExecution, ctx: Option<ToolContext>| {
        let (plugin, tool_name, grants) = (plugin.clone(), tool_name.clone(), grants_for_calls.clone());
        let own = own.clone();
        async move {
            // Called by a plugin: within its grants (see `authority`).
            let (grants, ctx) = super::authority::under(&plugin.name, &tool_name, &grants, own.as_ref(), ctx)
                .map_err(ToolError::new)?;
            let arguments = run.params.to_string();
            // Registered before the first await, so same-file calls queue in call order.
            let target = if mutates {
                super::gate::run_blocking(|| plugin.mutated_path(&grants, &tool_name, &arguments))
            } else {
                None
            };
            let _turn = match target {
                Some(p) => Some(
                    grants
                        .mutations
                        .lock(&paths::resolve_to_cwd(&p, &grants.cwd, grants.home.as_deref()))
                        .await,
                ),
                None => None,
            };
            plugin.execute(grants, tool_name, run, arguments, ctx).await
        }
    };
    let mut definition = ToolDefinition::from_spec(
        spec,
        ToolSource::Plugin {
            path: path.to_owned(),
        },
        execute,
    );
    // pi's renderCall / renderResult, each in a fresh instance (a UI's rendering must not have effects; none
    // carry over), within RENDER_TIMEOUT (a UI must not hang on it): the plugin's own rendering, or none for the
    // UI's default.
    let mut render_grants = WasmGrants::clone(grants);
    render_grants.timeout = Some(
        render_grants
            .timeout
            .map_or(RENDER_TIMEOUT, |t| t.min(RENDER_TIMEOUT)),
    );
    let render_grants = Arc::new(render_grants);
    let (plugin, tool_name, call_grants) = (inner.clone(), spec.name.clone(), render_grants.clone());
    definition.render_call = Some(Arc::new(move |args: &Value| {
        super::gate::run_blocking(|| plugin.render_call(&call_grants, &tool_name, args))
    }));
    let (plugin, tool_name) = (inner.clone(), spec.name.clone());
    definition.render_result = Some(Arc::new(move |result: &ToolResult, expanded, partial| {
        super::gate::run_blocking(|| {
            plugin.render_result(&render_grants, &tool_name, result, expanded, partial)
        })
    }));
    if spec.prepares_loadout {
        let (plugin, tool_name, grants) = (inner.clone(), spec.name.clone(), grants.clone());
        definition.prepare_loadout = Some(Arc::new(
            move |loadout: &toolwright_core::definition::ToolLoadout| {
                super::gate::run_blocking(|| plugin.prepare_loadout(&grants, &tool_name, loadout))
            },
        ));
    }
    if spec.prepares_arguments {
        let (plugin, tool_name, grants) = (inner.clone(), spec.name.clone(), grants.clone());
        definition.prepare_arguments = Some(Arc::new(move |args: &Value| {
            super::gate::run_blocking(|| plugin.prepare_arguments(&grants, &tool_name, args))
        }));
    }
    definition
}

impl PluginInner {
    /// The tool exports of the store's instance: type-checked at its first call, then kept in the store.
    pub(crate) fn tool_exports(
        &self,
        store: &mut wasmtime::Store<super::PluginState>,
        instance: &wasmtime::component::Instance,
    ) -> wasmtime::Result<bindings::tool::Guest> {
        if let Some(guest) = &store.data().exports.tool {
            return Ok(guest.clone());
        }
        let indices = self
            .linked()
            .map_err(|e| wasmtime::format_err!("{e}"))?
            .tool
            .as_ref()
            .ok_or_else(|| wasmtime::format_err!("the plugin {} provides no tools", self.name))?;
        let guest = indices.load(&mut *store, instance)?;
        store.data_mut().exports.tool = Some(guest.clone());
        Ok(guest)
    }

    pub(super) fn fault(&self, what: &str, error: &wasmtime::Error) -> ToolError {
        ToolError::host(
            HostFault::Trap,
            format!("The plugin {} failed: {what}: {error:#}", self.name),
        )
    }

    async fn execute(
        self: Arc<Self>,
        grants: Arc<WasmGrants>,
        tool: String,
        run: ToolExecution,
        arguments: String,
        session: Option<ToolContext>,
    ) -> Result<ToolResult, ToolError> {
        let entry = Entry {
            export: "execute",
            cancel: run.cancel,
            updates: run.updates,
            session,
            reusable: true,
            inline: false,
        };
        let (plugin, call_grants) = (self.clone(), grants.clone());
        let call_id = run.call_id;
        let outcome = self
            .enter_async(grants, entry, move |store, instance| {
                let guest = plugin.tool_exports(store, instance)?;
                let said = guest.call_execute(&mut *store, &tool, &call_id, &arguments)?;
                if let Ok(result) = &said {
                    store
                        .data_mut()
                        .carried
                        .add(super::budget::result_bytes(result))
                        .map_err(wasmtime::Error::new)?;
                }
                Ok(said.map_err(|message| {
                    (
                        message,
                        store.data().call.should_stop(),
                        store.data().call.cancel.is_cancelled(),
                    )
                }))
            })
            .await?;
        match outcome {
            Ok(result) => convert::result_from_wit(result).map_err(|e| {
                ToolError::host(
                    HostFault::Malformed,
                    format!("The plugin {} returned a malformed result: {e}", self.name),
                )
            }),
            Err((message, true, false)) => Err(self.stopped_message(&call_grants, Some(message))),
            Err((message, _, _)) => Err(ToolError::new(message)),
        }
    }

    /// A trap in words: a limit hit names the limit; anything else is a fault of the plugin.
    pub(super) fn describe_trap(&self, trap: &wasmtime::Error, grants: &WasmGrants) -> ToolError {
        if trap.downcast_ref::<super::state::Stopped>().is_some() {
            return self.stopped_message(grants, None);
        }
        if let Some(over) = trap.downcast_ref::<super::budget::OverCap>() {
            return ToolError::host(
                HostFault::Limit,
                format!("The plugin {} was stopped: {over}", self.name),
            );
        }
        if let Some(e) = trap.downcast_ref::<std::str::Utf8Error>() {
            return ToolError::host(
                HostFault::Malformed,
                format!(
                    "The plugin {} returned a malformed value: a string that is not valid UTF-8 ({e})",
                    self.name
                ),
            );
        }
        let text = format!("{trap:#}");
        if text.contains("forcing a memory growth failure")
            || text.contains("memory") && text.contains("grow")
        {
            return ToolError::host(
                HostFault::Limit,
                format!(
                    "The plugin {} was stopped: it tried to use more than its memory limit of {} MiB",
                    self.name,
                    grants.memory.min(super::MAX_MEMORY) >> 20
                ),
            );
        }
        // The model gets the trap in one line; the wasm backtrace goes to the log.
        tracing::warn!(plugin = %self.name, "trap: {trap:?}");
        match trap.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::OutOfFuel) => ToolError::host(
                HostFault::Limit,
                format!(
                    "The plugin {} was stopped: it used up its fuel of {} units",
                    self.name,
                    grants.fuel.unwrap_or(u64::MAX)
                ),
            ),
            Some(wasmtime::Trap::StackOverflow) => ToolError::host(
                HostFault::Trap,
                format!(
                    "The plugin {} failed: it trapped: its call stack overflowed",
                    self.name
                ),
            ),
            Some(wasmtime::Trap::UnreachableCodeReached) => ToolError::host(
                HostFault::Trap,
                format!(
                    "The plugin {} failed: it trapped: it reached unreachable code (a panic, an abort or an uncaught exception)",
                    self.name
                ),
            ),
            Some(other) => ToolError::host(
                HostFault::Trap,
                format!("The plugin {} failed: it trapped: {other}", self.name),
            ),
            None => self.fault("it trapped", trap),
        }
    }

    pub(super) fn stopped_message(&self, grants: &WasmGrants, said: Option<String>) -> ToolError {
        let limit = grants.timeout.map_or(0, |t| t.as_millis());
        let mut text = format!(
            "The plugin {} was stopped: it ran past its time limit of {limit} ms",
            self.name
        );
        if let Some(said) = said.filter(|s| !s.is_empty()) {
            text.push_str(&format!("\n\n{said}"));
        }
        ToolError::host(HostFault::Timeout, text)
    }

    fn prepare_arguments(&self, grants: &WasmGrants, tool: &str, args: &Value) -> Result<Value, ToolError> {
        let input = args.to_string();
        let outcome = self.enter(grants, Entry::bare("prepare-arguments"), |store, instance| {
            let guest = self.tool_exports(store, instance)?;
            guest.call_prepare_arguments(store, tool, &input)
        })?;
        match outcome {
            Ok(Some(text)) => serde_json::from_str(&text).map_err(|e| {
                ToolError::host(
                    HostFault::Malformed,
                    format!(
                        "The plugin {} returned invalid JSON from prepare-arguments: {e}",
                        self.name
                    ),
                )
            }),
            Ok(None) => Ok(args.clone()),
            Err(message) => Err(ToolError::new(message)),
        }
    }

    fn prepare_loadout(
        &self,
        grants: &WasmGrants,
        tool: &str,
        loadout: &toolwright_core::definition::ToolLoadout,
    ) -> Result<Option<toolwright_sdk::LoadoutChanges>, ToolError> {
        let input = convert::loadout_to_wit(&loadout.to_sdk());
        let outcome = self.enter(grants, Entry::bare("prepare-loadout"), |store, instance| {
            let guest = self.tool_exports(store, instance)?;
            guest.call_prepare_loadout(store, tool, &input)
        })?;
        outcome
            .map(|changes| changes.map(convert::changes_from_wit))
            .map_err(ToolError::new)
    }

    /// The plugin's rendering of a call's arguments; none when it has none, or fails to (logged).
    fn render_call(&self, grants: &WasmGrants, tool: &str, args: &Value) -> Option<String> {
        let arguments = args.to_string();
        self.enter(grants, Entry::bare("render-call"), |store, instance| {
            let guest = self.tool_exports(store, instance)?;
            guest.call_render_call(store, tool, &arguments)
        })
        .inspect_err(|e| tracing::warn!(plugin = %self.name, "render-call failed: {}", e.message()))
        .ok()
        .flatten()
    }

    /// The plugin's rendering of a (partial) result; none when it has none, or fails to (logged).
    fn render_result(
        &self,
        grants: &WasmGrants,
        tool: &str,
        result: &ToolResult,
        expanded: bool,
        partial: bool,
    ) -> Option<String> {
        let wit_result = convert::result_to_wit(result);
        self.enter(grants, Entry::bare("render-result"), |store, instance| {
            let guest = self.tool_exports(store, instance)?;
            guest.call_render_result(store, tool, &wit_result, expanded, partial)
        })
        .inspect_err(|e| tracing::warn!(plugin = %self.name, "render-result failed: {}", e.message()))
        .ok()
        .flatten()
    }

    /// The file a call will change (for pi's file mutation queue); none when the plugin does not say, or fails
    /// to (logged: the call then runs without queueing).
    fn mutated_path(&self, grants: &WasmGrants, tool: &str, arguments: &str) -> Option<String> {
        let outcome = self.enter(grants, Entry::bare("mutated-path"), |store, instance| {
            let guest = self.tool_exports(store, instance)?;
            guest.call_mutated_path(store, tool, arguments)
        });
        outcome
            .inspect_err(|e| tracing::warn!(plugin = %self.name, "mutated-path failed: {}", e.message()))
            .ok()
            .flatten()
    }
}
