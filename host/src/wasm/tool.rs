//! A plugin's tool as a [`ToolDefinition`]: every call runs in a fresh instance on a blocking thread, within
//! the bound on live instances; a trap or a malformed result becomes an error result naming the plugin.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright_sdk::{ToolError, ToolSpec, paths};

use super::{PluginInner, WasmGrants, bindings, convert};
use crate::definition::{ToolContext, ToolDefinition, ToolSource};
use crate::tool::{ToolExecution, UpdateSink};
use crate::types::AgentToolResult;

/// The definition of `spec`, a tool of the plugin `inner`.
pub fn definition(
    inner: &Arc<PluginInner>,
    path: &Path,
    spec: &ToolSpec,
    grants: &WasmGrants,
) -> ToolDefinition {
    let (plugin, tool_name, grants_for_calls) = (inner.clone(), spec.name.clone(), Arc::new(grants.clone()));
    let mutates = spec.mutates_files;
    let execute = move |run: ToolExecution, ctx: Option<ToolContext>| {
        let (plugin, tool_name, grants) = (plugin.clone(), tool_name.clone(), grants_for_calls.clone());
        async move {
            let arguments = run.params.to_string();
            // Registered before the first await, so same-file calls queue in call order.
            let target = if mutates {
                plugin.mutated_path(&grants, &tool_name, &arguments)
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
            // Waiting for an instance slot ends with the call: a nested call queued behind its own ancestors is
            // released by their deadline or cancellation.
            let _slot = tokio::select! {
                slot = plugin.slots.clone().acquire_owned() => {
                    slot.map_err(|_| ToolError::new("the plugin runtime is shutting down"))?
                }
                () = run.cancel.cancelled() => return Err(ToolError::new("Operation aborted")),
            };
            let joined = tokio::task::spawn_blocking(move || {
                plugin.execute(&grants, &tool_name, run, &arguments, ctx)
            })
            .await;
            joined.unwrap_or_else(|e| Err(ToolError::new(format!("the plugin call did not finish: {e}"))))
        }
    };
    let mut definition = ToolDefinition::from_spec(
        spec,
        ToolSource::Plugin {
            path: path.to_owned(),
        },
        execute,
    );
    if spec.prepares_loadout {
        let (plugin, tool_name, grants) = (inner.clone(), spec.name.clone(), grants.clone());
        definition.prepare_loadout = Some(Arc::new(move |loadout: &crate::definition::ToolLoadout| {
            plugin.prepare_loadout(&grants, &tool_name, loadout)
        }));
    }
    if spec.prepares_arguments {
        let (plugin, tool_name, grants) = (inner.clone(), spec.name.clone(), grants.clone());
        definition.prepare_arguments = Some(Arc::new(move |args: &Value| {
            plugin.prepare_arguments(&grants, &tool_name, args)
        }));
    }
    definition
}

impl PluginInner {
    fn tool_guest(
        &self,
        grants: &WasmGrants,
        cancel: CancellationToken,
        updates: UpdateSink,
        session: Option<ToolContext>,
    ) -> Result<(wasmtime::Store<super::PluginState>, bindings::tool::Guest), ToolError> {
        let indices = self
            .tool
            .as_ref()
            .ok_or_else(|| ToolError::new(format!("the plugin {} provides no tools", self.name)))?;
        let mut store = self
            .store(grants, cancel, updates, session)
            .map_err(|e| self.fault("cannot set up the sandbox", &e))?;
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|e| self.fault("cannot instantiate", &e))?;
        let guest = indices
            .load(&mut store, &instance)
            .map_err(|e| self.fault("cannot load its exports", &e))?;
        Ok((store, guest))
    }

    fn fault(&self, what: &str, error: &wasmtime::Error) -> ToolError {
        ToolError::new(format!("The plugin {} failed: {what}: {error:#}", self.name))
    }

    fn execute(
        &self,
        grants: &WasmGrants,
        tool: &str,
        run: ToolExecution,
        arguments: &str,
        session: Option<ToolContext>,
    ) -> Result<AgentToolResult, ToolError> {
        let cancelled = run.cancel.clone();
        let (mut store, guest) = self.tool_guest(grants, run.cancel, run.updates, session)?;
        let outcome = guest.call_execute(&mut store, tool, &run.call_id, arguments);
        store.data().flush_output();
        match outcome {
            Ok(Ok(result)) => convert::result_from_wit(result).map_err(|e| {
                ToolError::new(format!(
                    "The plugin {} returned a malformed result: {e}",
                    self.name
                ))
            }),
            Ok(Err(message)) if store.data().call.should_stop() && !cancelled.is_cancelled() => {
                Err(self.stopped_message(grants, Some(message)))
            }
            Ok(Err(message)) => Err(ToolError::new(message)),
            Err(_) if cancelled.is_cancelled() => Err(ToolError::new("Operation aborted")),
            Err(trap) => Err(self.describe_trap(&trap, grants)),
        }
    }

    /// A trap in words: a limit hit names the limit; anything else is a fault of the plugin.
    pub(super) fn describe_trap(&self, trap: &wasmtime::Error, grants: &WasmGrants) -> ToolError {
        if trap.downcast_ref::<super::state::Stopped>().is_some() {
            return self.stopped_message(grants, None);
        }
        if let Some(e) = trap.downcast_ref::<std::str::Utf8Error>() {
            return ToolError::new(format!(
                "The plugin {} returned a malformed value: a string that is not valid UTF-8 ({e})",
                self.name
            ));
        }
        let text = format!("{trap:#}");
        if text.contains("forcing a memory growth failure")
            || text.contains("memory") && text.contains("grow")
        {
            return ToolError::new(format!(
                "The plugin {} was stopped: it tried to use more than its memory limit of {} MiB",
                self.name,
                grants.memory.min(super::MAX_MEMORY) >> 20
            ));
        }
        // The model gets the trap in one line; the wasm backtrace goes to the log.
        tracing::warn!(plugin = %self.name, "trap: {trap:?}");
        match trap.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::OutOfFuel) => ToolError::new(format!(
                "The plugin {} was stopped: it used up its fuel of {} units",
                self.name,
                grants.fuel.unwrap_or(u64::MAX)
            )),
            Some(wasmtime::Trap::StackOverflow) => ToolError::new(format!(
                "The plugin {} failed: it trapped: its call stack overflowed",
                self.name
            )),
            Some(wasmtime::Trap::UnreachableCodeReached) => ToolError::new(format!(
                "The plugin {} failed: it trapped: it reached unreachable code (a Rust plugin panicked)",
                self.name
            )),
            Some(other) => ToolError::new(format!("The plugin {} failed: it trapped: {other}", self.name)),
            None => self.fault("it trapped", trap),
        }
    }

    fn stopped_message(&self, grants: &WasmGrants, said: Option<String>) -> ToolError {
        let limit = grants.timeout.map_or(0, |t| t.as_millis());
        let mut text = format!(
            "The plugin {} was stopped: it ran past its time limit of {limit} ms",
            self.name
        );
        if let Some(said) = said.filter(|s| !s.is_empty()) {
            text.push_str(&format!("\n\n{said}"));
        }
        ToolError::new(text)
    }

    fn prepare_arguments(&self, grants: &WasmGrants, tool: &str, args: &Value) -> Result<Value, ToolError> {
        let (mut store, guest) =
            self.tool_guest(grants, CancellationToken::new(), UpdateSink::discard(), None)?;
        let outcome = guest.call_prepare_arguments(&mut store, tool, &args.to_string());
        store.data().flush_output();
        match outcome {
            Ok(Ok(Some(text))) => serde_json::from_str(&text).map_err(|e| {
                ToolError::new(format!(
                    "The plugin {} returned invalid JSON from prepare-arguments: {e}",
                    self.name
                ))
            }),
            Ok(Ok(None)) => Ok(args.clone()),
            Ok(Err(message)) => Err(ToolError::new(message)),
            Err(trap) => Err(self.fault("prepare-arguments trapped", &trap)),
        }
    }

    fn prepare_loadout(
        &self,
        grants: &WasmGrants,
        tool: &str,
        loadout: &crate::definition::ToolLoadout,
    ) -> Result<Option<toolwright_sdk::LoadoutChanges>, ToolError> {
        let input = serde_json::to_string(&loadout.to_sdk())
            .map_err(|e| ToolError::new(format!("cannot encode the loadout: {e}")))?;
        let (mut store, guest) =
            self.tool_guest(grants, CancellationToken::new(), UpdateSink::discard(), None)?;
        let outcome = guest.call_prepare_loadout(&mut store, tool, &input);
        store.data().flush_output();
        match outcome {
            Ok(Ok(Some(text))) => serde_json::from_str(&text).map(Some).map_err(|e| {
                ToolError::new(format!(
                    "The plugin {} returned invalid JSON from prepare-loadout: {e}",
                    self.name
                ))
            }),
            Ok(Ok(None)) => Ok(None),
            Ok(Err(message)) => Err(ToolError::new(message)),
            Err(trap) => Err(self.describe_trap(&trap, grants)),
        }
    }

    fn mutated_path(&self, grants: &WasmGrants, tool: &str, arguments: &str) -> Option<String> {
        let (mut store, guest) = self
            .tool_guest(grants, CancellationToken::new(), UpdateSink::discard(), None)
            .ok()?;
        guest
            .call_mutated_path(&mut store, tool, arguments)
            .ok()
            .flatten()
    }
}
