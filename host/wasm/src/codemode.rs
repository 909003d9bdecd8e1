//! pi's `codemode` tool (spec §11): model-written JavaScript that calls other tools.
//!
//! The declaration and the loadout hook come from the `toolwright-tool-codemode` crate, natively; scripts run
//! only in its wasm component (the Boa engine inside), loaded on the first call, so a session that never runs a
//! script never compiles it. The component gets no files, no processes and no environment: only a temp
//! directory for spilled output, the plugin limits (memory, deadline), and nested calls through the `host`
//! import, which the session's runner checks like any other call. Registered inactive (`defaultActive: false`):
//! name it (`--allow codemode`, `--allow +codemode`) to use it.
//!
//! The host keeps what a script did while it runs: the nested calls it made (through a recording
//! [`ToolCaller`]) and the output it printed (streamed by the engine on a side channel of its partial results,
//! taken off here). The engine cannot be interrupted, so the host enforces the script's `timeout_ms` as the
//! component's deadline, and a script stopped by it (or by cancellation) still gets pi's `Script timed out` /
//! `Script aborted` result with its output and its calls.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::Value;
use toolwright_sdk::{HostFault, LoadoutHook};
use toolwright_tool_codemode::output::{self, CallRecord, Ending, OutputItem, STREAM_KEY, Save};
use toolwright_tool_codemode::{Codemode, STORE_KEY, STORE_WRITES_KEY, source};

pub use toolwright_tool_codemode::{Mode, Settings};

use crate::{Plugin, PluginHost, Preopen, WasmGrants};
use toolwright_core::definition::{ToolCaller, ToolContext, ToolDefinition, ToolLoadout, ToolSource};
use toolwright_core::tool::{CallSink, ToolError, ToolExecution};
use toolwright_core::types::{AgentToolCallOutcome, ToolResult};

pub use toolwright_tool_codemode::CODEMODE_TOOL_NAME;

/// Where and how the codemode component runs.
#[derive(Debug, Clone)]
pub struct CodemodeOptions {
    /// The workspace.
    pub cwd: PathBuf,
    /// The compiled-component cache.
    pub cache_dir: Option<PathBuf>,
    /// Where its plugin host comes from: share the toolset's (its options' [`crate::Hosts`]) so that one runtime
    /// serves both.
    pub hosts: crate::Hosts,
    /// The wall-clock limit of one script, nested calls included (none: only cancellation stops it). A script's
    /// own `timeout_ms` shortens it.
    pub timeout: Option<Duration>,
    /// pi's `codemode.mode` and `codemode.inlineBudget`.
    pub settings: Settings,
}

impl CodemodeOptions {
    /// The defaults for `cwd`: the default cache, and the plugins' default deadline.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        CodemodeOptions {
            cwd: cwd.into(),
            cache_dir: Some(crate::default_cache_dir()),
            hosts: crate::Hosts::default(),
            timeout: Some(crate::DEFAULT_TIMEOUT),
            settings: Settings::default(),
        }
    }
}

/// What one script may carry into the host: its result, partial results (call records, streamed output) and the
/// results of its nested calls.
const CODEMODE_RESULT_CAP: usize = 64 << 20;

/// How many of a script's calls the host records for a result it builds itself.
const MAX_KEPT_CALLS: usize = 10_000;

/// pi's store limits (`MAX_STORE_VALUE_CHARS`, `MAX_STORE_TOTAL_CHARS`), checked again by the host.
const MAX_STORE_VALUE_CHARS: usize = 256 * 1024;
const MAX_STORE_TOTAL_CHARS: usize = 1024 * 1024;

/// The process's plugin host (its epoch ticker enforces the deadline), the codemode plugin and its tool.
type Loaded = (Arc<PluginHost>, Plugin, ToolDefinition);

/// The component, loaded once.
struct Component {
    options: CodemodeOptions,
    /// The runtime (its epoch ticker enforces the deadline), the plugin and its tool.
    loaded: OnceLock<Result<Loaded, String>>,
    /// The session's `store()`: key → JSON text, as successful scripts left it (pi keeps it on the session's
    /// branch; here it lives as long as the tool).
    store: Mutex<serde_json::Map<String, Value>>,
}

impl Component {
    fn store(&self) -> std::sync::MutexGuard<'_, serde_json::Map<String, Value>> {
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Apply a successful script's writes (`[key, json]` sets, `[key]` deletes), in order, all or none: the
    /// host holds the store, so it checks pi's limits itself (the script's prelude can be tampered with, and
    /// concurrent scripts each checked their own snapshot). Returns why it refused them.
    fn apply(&self, writes: &Value) -> Result<(), String> {
        let mut store = self.store();
        let mut next = store.clone();
        for write in writes.as_array().into_iter().flatten() {
            match (write.get(0).and_then(Value::as_str), write.get(1), write.get(2)) {
                (Some(key), Some(Value::String(json)), None) => {
                    if json.encode_utf16().count() > MAX_STORE_VALUE_CHARS {
                        return Err(format!(
                            "store({key:?}) value is larger than {MAX_STORE_VALUE_CHARS} characters"
                        ));
                    }
                    if serde_json::from_str::<Value>(json).is_err() {
                        return Err(format!("store({key:?}) value is not JSON"));
                    }
                    next.insert(key.to_owned(), Value::String(json.clone()));
                }
                (Some(key), None, None) => {
                    next.remove(key);
                }
                _ => return Err("a store write is malformed".into()),
            }
        }
        let total: usize = next
            .iter()
            .map(|(k, v)| k.encode_utf16().count() + v.as_str().map_or(0, |j| j.encode_utf16().count()))
            .sum();
        if total > MAX_STORE_TOTAL_CHARS {
            return Err(format!(
                "the store would exceed {MAX_STORE_TOTAL_CHARS} characters of JSON"
            ));
        }
        *store = next;
        Ok(())
    }
}

impl Component {
    fn grants(&self, timeout: Option<Duration>) -> WasmGrants {
        let mut grants = WasmGrants::none(&self.options.cwd);
        let temp = std::env::temp_dir();
        let temp_text = toolwright_sdk::paths::normalize(&temp.to_string_lossy());
        grants.preopens = vec![Preopen {
            host: temp,
            guest: temp_text.clone(),
            write: true,
        }];
        grants.temp_dir = Some(temp_text);
        grants.timeout = timeout;
        // A script's record of its calls travels in every partial result (pi publishes it at each change): a
        // script making hundreds of calls carries more than a plugin's usual cap.
        grants.result_cap = grants.result_cap.max(CODEMODE_RESULT_CAP);
        // No authority of its own: a script's calls run under whoever called codemode (pi's reach to the
        // callable tools when the model did).
        grants.calls = crate::Calls::Inherit;
        grants
    }

    /// The codemode tool of the loaded component, with the deadline `timeout`.
    fn definition(&self, timeout: Option<Duration>) -> Result<ToolDefinition, String> {
        let default = self.load()?;
        if timeout == self.options.timeout {
            return Ok(default);
        }
        let Some(Ok((_, plugin, _))) = self.loaded.get() else {
            return Ok(default);
        };
        Ok(plugin
            .tool_definitions(&self.grants(timeout))
            .into_iter()
            .find(|d| d.name == CODEMODE_TOOL_NAME)
            .unwrap_or(default))
    }

    fn load(&self) -> Result<ToolDefinition, String> {
        let loaded = self.loaded.get_or_init(|| {
            let (bytes, digest) = crate::components::CODEMODE
                .zip(crate::components::CODEMODE_DIGEST)
                .ok_or("codemode is not available: this build skipped the wasm components")?;
            let host = (self.options.hosts)
                .get(self.options.cache_dir.clone())
                .map_err(|e| e.to_string())?;
            let plugin = host
                .load_embedded(Path::new("builtin:codemode"), bytes, &digest)
                .map_err(|e| format!("cannot load the codemode component: {e}"))?;
            let definition = plugin
                .tool_definitions(&self.grants(self.options.timeout))
                .into_iter()
                .find(|d| d.name == CODEMODE_TOOL_NAME)
                .ok_or("the codemode component has no codemode tool")?;
            Ok((host, plugin, definition))
        });
        loaded.as_ref().map(|(_, _, d)| d.clone()).map_err(Clone::clone)
    }
}

/// The `codemode` tool definition.
pub fn definition(options: CodemodeOptions) -> ToolDefinition {
    let tool = Codemode {
        settings: options.settings,
    };
    let component = Arc::new(Component {
        options,
        loaded: OnceLock::new(),
        store: Mutex::default(),
    });
    let execute = move |run: ToolExecution, ctx: Option<ToolContext>| {
        let component = component.clone();
        async move {
            let started = Instant::now();
            // The script's own options, read as the engine will (a source error is the engine's to report).
            let options = run
                .params
                .get("code")
                .and_then(Value::as_str)
                .and_then(|code| source::parse(code).ok())
                .map(|script| script.options)
                .unwrap_or_default();
            let limit = match (
                component.options.timeout,
                options.timeout_ms.map(Duration::from_millis),
            ) {
                (Some(own), Some(asked)) => Some(own.min(asked)),
                (own, asked) => own.or(asked),
            };
            // Compiling the component (first call, cold cache) takes seconds: off the async workers.
            let loading = component.clone();
            let loaded = tokio::task::spawn_blocking(move || loading.definition(limit))
                .await
                .map_err(|e| ToolError::new(format!("codemode did not load: {e}")))?;
            let inner = loaded.map_err(ToolError::new)?;
            let kept = Kept::default();
            let ctx = ctx.map(|ctx| kept.recording(ctx));
            let mut params = run.params;
            if let Some(args) = params.as_object_mut() {
                args.insert(STORE_KEY.into(), Value::Object(component.store().clone()));
            }
            let run = ToolExecution {
                updates: kept.streaming(&run.updates),
                params,
                ..run
            };
            let cancel = run.cancel.clone();
            match inner.execute.execute(run, ctx).await {
                Ok(mut result) => {
                    let writes = result
                        .details
                        .as_mut()
                        .and_then(Value::as_object_mut)
                        .and_then(|d| d.remove(STORE_WRITES_KEY));
                    if let Some(writes) = writes.filter(|_| result.is_error != Some(true))
                        && let Err(why) = component.apply(&writes)
                    {
                        tracing::warn!("codemode: the script's store writes were dropped: {why}");
                    }
                    // The engine sees a passed deadline as a stop it cannot tell from a cancellation: a script the
                    // deadline stopped between two awaits answered "aborted"; it timed out.
                    if !cancel.is_cancelled() && aborted(&result) {
                        let ms = limit.map_or(0, |l| l.as_millis());
                        let head = format!("Script timed out: Execution timed out after {ms} ms");
                        return Ok(kept.stopped(head, started, options.max_output_tokens));
                    }
                    Ok(result)
                }
                Err(e) => match e.host_fault() {
                    Some(HostFault::Timeout) => {
                        let ms = limit.map_or(0, |l| l.as_millis());
                        let head = format!("Script timed out: Execution timed out after {ms} ms");
                        Ok(kept.stopped(head, started, options.max_output_tokens))
                    }
                    Some(HostFault::Cancelled) if cancel.is_cancelled() => {
                        let head = "Script aborted: Execution aborted".to_owned();
                        Ok(kept.stopped(head, started, options.max_output_tokens))
                    }
                    _ => Err(e),
                },
            }
        }
    };
    let mut definition =
        ToolDefinition::from_spec(&toolwright_sdk::declaration(&tool), ToolSource::Builtin, execute);
    definition.prepare_loadout = Some(Arc::new(move |loadout: &ToolLoadout| {
        tool.prepare_loadout(&loadout.to_sdk())
    }));
    // A script reaches nothing but the tools it calls (each audited as a nested call) and its own output.
    definition.origin = Some(Arc::new(toolwright_core::audit::Origin {
        machine: toolwright_core::audit::Machine::Wasm,
        grants: Some(Vec::new()),
        ..Default::default()
    }));
    definition
}

/// Whether the engine ended the script as aborted (`Script aborted: …` in its error).
fn aborted(result: &ToolResult) -> bool {
    result.is_error == Some(true)
        && result
            .content
            .iter()
            .filter_map(|c| c.as_text())
            .any(|t| t.contains("Script error:\nScript aborted: "))
}

/// What the host keeps of one script while it runs: its nested calls and its output so far.
#[derive(Clone, Default)]
struct Kept {
    calls: Arc<Mutex<Vec<CallRecord>>>,
    output: Arc<Mutex<Vec<OutputItem>>>,
}

impl Kept {
    fn calls(&self) -> std::sync::MutexGuard<'_, Vec<CallRecord>> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `ctx` with its nested calls recorded here on their way to the session's runner.
    fn recording(&self, mut ctx: ToolContext) -> ToolContext {
        if let Some(inner) = ctx.caller.take() {
            ctx.caller = Some(Arc::new(Recording {
                inner,
                kept: self.clone(),
            }));
        }
        ctx
    }

    /// `updates` with the engine's output channel taken off into `output`: a partial result carrying it goes no
    /// further.
    fn streaming(&self, updates: &CallSink) -> CallSink {
        let output = self.output.clone();
        updates.tapped(move |partial: ToolResult| {
            let item = partial.details.as_ref().and_then(|d| d.get(STREAM_KEY));
            let Some(item) = item else {
                return Some(partial);
            };
            if let Ok(item) = serde_json::from_value::<OutputItem>(item.clone())
                && acceptable(&item)
            {
                output
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(item);
            }
            None
        })
    }

    /// pi's result for a script the host stopped (`head` says how): its output so far, the error and its calls,
    /// the ones still running marked cancelled.
    fn stopped(&self, head: String, started: Instant, max_output_tokens: Option<u64>) -> ToolResult {
        let mut calls = std::mem::take(&mut *self.calls());
        for call in &mut calls {
            if call.status == "running" {
                call.status = "cancelled".into();
            }
        }
        let output = std::mem::take(
            &mut *self
                .output
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        output::result(
            output,
            Ending::Failed(head),
            calls,
            started.elapsed().as_secs_f64(),
            max_output_tokens,
            spill,
        )
    }
}

/// Whether a streamed item may reach a result the host builds: an image must be of a type `image()` accepts,
/// with base64 data (the script's own checks ran in its engine, which it can tamper with).
fn acceptable(item: &OutputItem) -> bool {
    use base64::Engine as _;
    match item {
        OutputItem::Image { data, mime_type } => {
            ["image/png", "image/jpeg", "image/gif", "image/webp"].contains(&mime_type.as_str())
                && base64::engine::general_purpose::STANDARD.decode(data).is_ok()
        }
        _ => true,
    }
}

/// Save a stopped script's full output or an image it showed where the model can read it (pi's
/// `pi-codemode-*` files in the temp directory), as the component does for a script that ends on its own.
fn spill(what: Save<'_>) -> Result<String, String> {
    use std::hash::{BuildHasher, Hasher};
    use std::io::Write;
    let (bytes, suffix) = match what {
        Save::Text(text) => (text.as_bytes(), ".txt"),
        Save::Image(bytes, suffix) => (bytes, suffix),
    };
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_usize(bytes.len());
    let path = std::env::temp_dir().join(format!("toolwright-codemode-{:016x}{suffix}", hasher.finish()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| e.to_string())?;
    file.write_all(bytes).map_err(|e| e.to_string())?;
    Ok(toolwright_sdk::paths::normalize(&path.to_string_lossy()))
}

/// A session's runner with a script's calls recorded as pi's `details.calls` shows them.
struct Recording {
    inner: Arc<dyn ToolCaller>,
    kept: Kept,
}

impl ToolCaller for Recording {
    fn call<'a>(
        &'a self,
        caller_id: &'a str,
        name: &'a str,
        args: Value,
        authority: Option<Arc<toolwright_core::Authority>>,
        cancel: &'a tokio_util::sync::CancellationToken,
        updates: CallSink,
    ) -> BoxFuture<'a, AgentToolCallOutcome> {
        Box::pin(async move {
            // The record is bounded (a script may make calls for as long as its deadline allows); calls past it
            // run unrecorded here (the engine's own record, and the session's, still have them).
            let index = {
                let mut calls = self.kept.calls();
                (calls.len() < MAX_KEPT_CALLS).then(|| {
                    calls.push(CallRecord::running(
                        caller_id,
                        name,
                        (!args.is_null()).then_some(&args),
                    ));
                    calls.len() - 1
                })
            };
            let started = Instant::now();
            let outcome = self
                .inner
                .call(caller_id, name, args, authority, cancel, updates)
                .await;
            let error = outcome.is_error.then(|| {
                let text = outcome.result.text_lines();
                if text.is_empty() {
                    format!("Tool \"{name}\" failed")
                } else {
                    text
                }
            });
            let mut calls = self.kept.calls();
            if let Some(record) = index.and_then(|i| calls.get_mut(i)) {
                record.finish(
                    Some(outcome.tool_call.id.clone()),
                    started.elapsed().as_secs_f64() * 1000.0,
                    error,
                );
                if outcome.is_error && cancel.is_cancelled() {
                    record.status = "cancelled".into();
                }
            }
            outcome
        })
    }

    fn tools(&self) -> Vec<toolwright_sdk::LoadoutTool> {
        self.inner.tools()
    }

    fn seal(&self, caller_id: &str) {
        self.inner.seal(caller_id);
    }
}
