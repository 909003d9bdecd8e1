//! A plugin's tool as a [`ToolDefinition`]: every call runs in a fresh instance on a blocking thread, within
//! the bound on live instances; a trap or a malformed result becomes an error result naming the plugin.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use toolwright_sdk::{HostFault, ToolError, ToolSpec, paths};

use crate::Plugin;
use crate::convert;
use crate::gate::{self, Entry};
use crate::grants::WasmGrants;
use crate::plugin::PluginInner;
use toolwright_core::definition::{ToolContext, ToolDefinition, ToolSource};
use toolwright_core::tool::ToolExecution;
use toolwright_core::types::ToolResult;

/// How long a plugin may take to render a call or a result for people (a UI waits for it); past it, the UI
/// renders them itself.
pub const RENDER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

impl Plugin {
    /// Its tools as definitions, calling into fresh instances under `grants`.
    pub fn tool_definitions(&self, grants: &WasmGrants) -> Vec<ToolDefinition> {
        // One set of grants for all its tools: their calls share the directories opened for them, and, with
        // `instance = "reuse"`, the idle instances.
        let grants = Arc::new(grants.clone());
        self.tools
            .iter()
            .map(|spec| definition(&self.inner, &self.path, spec, &grants))
            .collect()
    }
}

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
                gate::run_here(|| mutated_path(&plugin, &grants, &tool_name, &arguments))
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
            execute(plugin, grants, tool_name, run, arguments, ctx).await
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
        gate::run_here(|| render_call(&plugin, &call_grants, &tool_name, args))
    }));
    let (plugin, tool_name) = (inner.clone(), spec.name.clone());
    definition.render_result = Some(Arc::new(move |result: &ToolResult, expanded, partial| {
        gate::run_here(|| render_result(&plugin, &render_grants, &tool_name, result, expanded, partial))
    }));
    if spec.prepares_loadout {
        let (plugin, tool_name, grants) = (inner.clone(), spec.name.clone(), grants.clone());
        definition.prepare_loadout = Some(Arc::new(
            move |loadout: &toolwright_core::definition::ToolLoadout| {
                gate::run_here(|| prepare_loadout(&plugin, &grants, &tool_name, loadout))
            },
        ));
    }
    if spec.prepares_arguments {
        let (plugin, tool_name, grants) = (inner.clone(), spec.name.clone(), grants.clone());
        definition.prepare_arguments = Some(Arc::new(move |args: &Value| {
            gate::run_here(|| prepare_arguments(&plugin, &grants, &tool_name, args))
        }));
    }
    definition
}

async fn execute(
    plugin: Arc<PluginInner>,
    grants: Arc<WasmGrants>,
    tool: String,
    run: ToolExecution,
    arguments: String,
    session: Option<ToolContext>,
) -> Result<ToolResult, ToolError> {
    let client = grants.client.clone().map(|desk| crate::state::CallClient {
        desk,
        call_id: run.call_id.clone(),
        sampling: grants.sampling,
    });
    let entry = Entry {
        export: "execute",
        cancel: run.cancel,
        updates: run.updates,
        session,
        reusable: true,
        short: false,
        client,
    };
    let (inner, call_grants) = (plugin.clone(), grants.clone());
    let book = grants.refusals.clone();
    let builtin = grants.builtin;
    let call_id = run.call_id;
    let outcome = gate::enter_async(&plugin, grants, entry, move |store, instance| {
        let guest = inner.tool_exports(store, instance)?;
        let said = guest.call_execute(&mut *store, &tool, &call_id, &arguments)?;
        let mut refused = std::mem::take(&mut store.data_mut().refused);
        // A built-in is asked about its programs' hosts only.
        if builtin {
            refused.clear();
        }
        let connections = std::mem::take(
            &mut *store
                .data()
                .net_refused
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if !builtin {
            refused.extend(connections);
        }
        // What its programs' proxies refused them: a host by name, on its port.
        for targets in std::mem::take(&mut store.data_mut().child_refused) {
            let targets = targets
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            for address in targets {
                let connect = toolwright_core::ask::Refused::Connect { address };
                if refused.len() < toolwright_core::ask::MAX_REFUSALS_PER_CALL && !refused.contains(&connect)
                {
                    refused.push(connect);
                }
            }
        }
        if let Some(book) = &book {
            let subject = if builtin {
                toolwright_core::ask::Subject::Builtins
            } else {
                toolwright_core::ask::Subject::Plugin(inner.name.clone())
            };
            book.record(&call_id, subject, refused);
        }
        if let Ok(result) = &said {
            store
                .data_mut()
                .carried
                .add(convert::result_bytes(result))
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
                format!("The plugin {} returned a malformed result: {e}", plugin.name),
            )
        }),
        Err((message, true, false)) => Err(gate::stopped_message(&plugin.name, &call_grants, Some(message))),
        Err((message, _, _)) => Err(ToolError::new(message)),
    }
}

fn prepare_arguments(
    plugin: &PluginInner,
    grants: &WasmGrants,
    tool: &str,
    args: &Value,
) -> Result<Value, ToolError> {
    let input = args.to_string();
    let outcome = gate::enter(
        plugin,
        grants,
        Entry::bare("prepare-arguments"),
        |store, instance| {
            let guest = plugin.tool_exports(store, instance)?;
            guest.call_prepare_arguments(store, tool, &input)
        },
    )?;
    match outcome {
        Ok(Some(text)) => serde_json::from_str(&text).map_err(|e| {
            ToolError::host(
                HostFault::Malformed,
                format!(
                    "The plugin {} returned invalid JSON from prepare-arguments: {e}",
                    plugin.name
                ),
            )
        }),
        Ok(None) => Ok(args.clone()),
        Err(message) => Err(ToolError::new(message)),
    }
}

fn prepare_loadout(
    plugin: &PluginInner,
    grants: &WasmGrants,
    tool: &str,
    loadout: &toolwright_core::definition::ToolLoadout,
) -> Result<Option<toolwright_sdk::LoadoutChanges>, ToolError> {
    let input = convert::loadout_to_wit(&loadout.to_sdk());
    let outcome = gate::enter(
        plugin,
        grants,
        Entry::bare("prepare-loadout"),
        |store, instance| {
            let guest = plugin.tool_exports(store, instance)?;
            guest.call_prepare_loadout(store, tool, &input)
        },
    )?;
    outcome
        .map(|changes| changes.map(convert::changes_from_wit))
        .map_err(ToolError::new)
}

/// The plugin's rendering of a call's arguments; none when it has none, or fails to (logged).
fn render_call(plugin: &PluginInner, grants: &WasmGrants, tool: &str, args: &Value) -> Option<String> {
    let arguments = args.to_string();
    gate::enter(plugin, grants, Entry::bare("render-call"), |store, instance| {
        let guest = plugin.tool_exports(store, instance)?;
        guest.call_render_call(store, tool, &arguments)
    })
    .inspect_err(|e| tracing::warn!(plugin = %plugin.name, "render-call failed: {}", e.message()))
    .ok()
    .flatten()
}

/// The plugin's rendering of a (partial) result; none when it has none, or fails to (logged).
fn render_result(
    plugin: &PluginInner,
    grants: &WasmGrants,
    tool: &str,
    result: &ToolResult,
    expanded: bool,
    partial: bool,
) -> Option<String> {
    let wit_result = convert::result_to_wit(result);
    gate::enter(plugin, grants, Entry::bare("render-result"), |store, instance| {
        let guest = plugin.tool_exports(store, instance)?;
        guest.call_render_result(store, tool, &wit_result, expanded, partial)
    })
    .inspect_err(|e| tracing::warn!(plugin = %plugin.name, "render-result failed: {}", e.message()))
    .ok()
    .flatten()
}

/// The file a call will change (for pi's file mutation queue); none when the plugin does not say, or fails
/// to (logged: the call then runs without queueing).
fn mutated_path(plugin: &PluginInner, grants: &WasmGrants, tool: &str, arguments: &str) -> Option<String> {
    let outcome = gate::enter(plugin, grants, Entry::bare("mutated-path"), |store, instance| {
        let guest = plugin.tool_exports(store, instance)?;
        guest.call_mutated_path(store, tool, arguments)
    });
    outcome
        .inspect_err(|e| tracing::warn!(plugin = %plugin.name, "mutated-path failed: {}", e.message()))
        .ok()
        .flatten()
}
