//! The script runner inside the sandbox: a fresh Boa context per call, the prelude, and the loop that runs the
//! job queue, settles what the script waits on, and repeats until the script ends.
//!
//! A nested call starts when the script makes it (`__tw_call` → `host.start-call`), awaited or not, as pi
//! dispatches them; while the script waits, the loop takes finished calls from the host (`host.next-outcomes`).
//! The discovery globals (`searchTools`, `describeTool`, `describeNamespace`) answer from the tools the script
//! can call (`host.search-tools` ranks them as `tool_search` does). Output items go to the host as they are made
//! (`__tw_emit`), so a script the host stops at its deadline still shows what it printed.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use boa_engine::{Context, JsResult, JsValue, NativeFunction, Source, js_string};
use serde::Deserialize;
use serde_json::{Value, json};
use toolwright_sdk::{CallOutcome, Ctx, ToolResult, guest};

use crate::output::{CallRecord, Ending, OutputItem, STREAM_KEY, STREAM_LIMIT_CHARS};
use crate::source::Script;
use crate::{NestedTool, STALLED, identifier};

const PRELUDE: &str = include_str!("prelude.js");

/// The default `limit` of `searchTools` (pi's `DEFAULT_TOOL_SEARCH_LIMIT`).
const SEARCH_LIMIT: u32 = 8;

#[derive(Deserialize)]
struct Poll {
    done: bool,
    ok: bool,
    value: Option<String>,
    error: Option<String>,
    /// The store writes of a script that succeeded: `[key, json]`, or `[key]` for a deletion.
    writes: Option<String>,
}

/// A nested call the host is running for the script.
struct Running {
    /// The promise's id in the prelude.
    promise: u64,
    /// Its record in `calls`.
    record: usize,
    started: Instant,
    tool: String,
}

/// What the native callbacks share with the loop during one run.
struct RunState {
    call_id: String,
    tools: Vec<NestedTool>,
    calls: Vec<CallRecord>,
    /// By the host's number of the call.
    running: HashMap<u64, Running>,
    /// Settlements ready for the script: promise id, fulfilled, JSON payload (none: `undefined`).
    ready: Vec<(u64, bool, Option<String>)>,
    /// Characters of output streamed to the host.
    streamed: usize,
}

thread_local! {
    static RUN: RefCell<Option<RunState>> = const { RefCell::new(None) };
}

fn with_run<T>(f: impl FnOnce(&mut RunState) -> T) -> Option<T> {
    RUN.with(|run| run.borrow_mut().as_mut().map(f))
}

/// Up to this many calls, every change of the record is published (pi publishes each); past it, at most one
/// snapshot per [`PUBLISH_EVERY`] (and the final one): a snapshot carries the whole record, and what a call
/// sends counts against its cap.
const PUBLISH_EACH_UP_TO: usize = 32;
const PUBLISH_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

thread_local! {
    static LAST_PUBLISHED: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

fn publish(calls: &[CallRecord]) {
    if calls.len() > PUBLISH_EACH_UP_TO
        && LAST_PUBLISHED
            .get()
            .is_some_and(|at| at.elapsed() < PUBLISH_EVERY)
    {
        return;
    }
    LAST_PUBLISHED.set(Some(Instant::now()));
    guest::send_update(ToolResult {
        details: Some(json!({ "calls": calls })),
        ..Default::default()
    });
}

fn string_arg(args: &[JsValue], i: usize) -> Option<String> {
    args.get(i)
        .and_then(JsValue::as_string)
        .map(|s| s.to_std_string_escaped())
}

fn number_arg(args: &[JsValue], i: usize) -> u64 {
    args.get(i).and_then(JsValue::as_number).unwrap_or(0.0) as u64
}

/// `__tw_emit(kind, text, mimeType)`: hand one output item to the host as it is made (within
/// [`STREAM_LIMIT_CHARS`] per run; the rest reaches only the final result).
fn emit_to_host(_this: &JsValue, args: &[JsValue], _context: &mut Context) -> JsResult<JsValue> {
    let (kind, text) = (
        string_arg(args, 0).unwrap_or_default(),
        string_arg(args, 1).unwrap_or_default(),
    );
    let send = with_run(|run| {
        run.streamed += text.len();
        run.streamed <= STREAM_LIMIT_CHARS
    });
    if send == Some(true) {
        let item = match kind.as_str() {
            "image" => {
                json!({ "kind": kind, "data": text, "mimeType": string_arg(args, 2).unwrap_or_default() })
            }
            _ => json!({ "kind": kind, "text": text }),
        };
        guest::send_update(ToolResult {
            details: Some(json!({ STREAM_KEY: item })),
            ..Default::default()
        });
    }
    Ok(JsValue::undefined())
}

/// `__tw_call(id, name, argsJson)`: start a nested call now.
fn call_tool(_this: &JsValue, args: &[JsValue], _context: &mut Context) -> JsResult<JsValue> {
    let promise = number_arg(args, 0);
    let name = string_arg(args, 1).unwrap_or_default();
    // `undefined` arguments show as "" in the record, and reach the tool as `{}` (as pi's nested runner passes them).
    let arguments = string_arg(args, 2).map(|json| serde_json::from_str(&json).unwrap_or(Value::Null));
    let calls = with_run(|run| {
        run.calls
            .push(CallRecord::running(&run.call_id, &name, arguments.as_ref()));
        run.calls.clone()
    });
    let Some(calls) = calls else {
        return Ok(JsValue::undefined());
    };
    publish(&calls);
    let number = guest::start_call(&name, arguments.as_ref().unwrap_or(&json!({})));
    with_run(|run| {
        run.running.insert(
            number,
            Running {
                promise,
                record: run.calls.len() - 1,
                started: Instant::now(),
                tool: name,
            },
        )
    });
    Ok(JsValue::undefined())
}

/// `__tw_global(id, name, argsJson)`: answer a discovery global (settled on the loop's next turn, as pi's host
/// answers them asynchronously).
fn call_global(_this: &JsValue, args: &[JsValue], _context: &mut Context) -> JsResult<JsValue> {
    let promise = number_arg(args, 0);
    let name = string_arg(args, 1).unwrap_or_default();
    let arguments: Vec<Value> = string_arg(args, 2)
        .and_then(|json| serde_json::from_str(&json).ok())
        .unwrap_or_default();
    with_run(|run| {
        let answer = discovery(&run.tools, &name, &arguments);
        run.ready.push(match answer {
            Ok(value) => (promise, true, value.map(|v| v.to_string())),
            Err(message) => (promise, false, Some(message)),
        });
    });
    Ok(JsValue::undefined())
}

/// Whether `query` names the namespace: its name or an alias, as written or as the same identifier.
fn names_namespace(namespace: &toolwright_sdk::ToolNamespace, query: &str) -> bool {
    let wanted = identifier(query);
    std::iter::once(&namespace.name)
        .chain(&namespace.aliases)
        .any(|name| name == query || identifier(name) == wanted)
}

/// pi's `searchTools`, `describeTool` and `describeNamespace` over the tools a script can call.
fn discovery(tools: &[NestedTool], name: &str, args: &[Value]) -> Result<Option<Value>, String> {
    let first = args.first().unwrap_or(&Value::Null);
    match name {
        "searchTools" => {
            let query = first.as_str().ok_or("searchTools() expects a query string")?;
            let options = args.get(1).filter(|o| o.is_object());
            let limit = match options.and_then(|o| o.get("limit")).filter(|l| !l.is_null()) {
                None => SEARCH_LIMIT,
                Some(limit) => limit
                    .as_f64()
                    .filter(|l| l.fract() == 0.0 && *l > 0.0)
                    .map(|l| l.min(f64::from(u32::MAX)) as u32)
                    .ok_or("searchTools() limit must be a positive integer")?,
            };
            let namespace = match options.and_then(|o| o.get("namespace")).filter(|n| !n.is_null()) {
                None => None,
                Some(n) => Some(n.as_str().ok_or("searchTools() namespace must be a string")?),
            };
            let among: Vec<String> = tools
                .iter()
                .filter(|t| match namespace.filter(|n| !n.is_empty()) {
                    None => true,
                    Some(n) => t.namespace.as_ref().is_some_and(|ns| names_namespace(ns, n)),
                })
                .map(|t| t.name.clone())
                .collect();
            let found = guest::search_tools(query, Some(&among), limit);
            let entries: Vec<Value> = found
                .iter()
                .filter_map(|name| tools.iter().find(|t| &t.name == name))
                .map(|t| json!({ "name": t.id, "description": t.sample }))
                .collect();
            Ok(Some(Value::Array(entries)))
        }
        "describeTool" => {
            let wanted = first.as_str().ok_or("describeTool() expects a tool name")?;
            Ok(tools
                .iter()
                .find(|t| t.name == wanted || t.id == wanted)
                .map(|t| Value::from(t.sample.as_str())))
        }
        "describeNamespace" => {
            let wanted = first
                .as_str()
                .ok_or("describeNamespace() expects a namespace name")?;
            let mut found = None;
            let mut ids = Vec::new();
            for tool in tools {
                let Some(ns) = tool.namespace.as_ref().filter(|ns| names_namespace(ns, wanted)) else {
                    continue;
                };
                found.get_or_insert(ns);
                ids.push(Value::from(tool.id.as_str()));
            }
            Ok(found.map(|ns| {
                let mut answer = json!({ "name": ns.name });
                if let Some(d) = ns.description.as_deref().filter(|d| !d.is_empty()) {
                    answer["description"] = d.into();
                }
                if let Some(i) = ns.instructions.as_deref().filter(|i| !i.is_empty()) {
                    answer["instructions"] = i.into();
                }
                answer["tools"] = Value::Array(ids);
                answer
            }))
        }
        _ => Err(format!("Unknown global \"{name}\"")),
    }
}

fn literal(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

fn eval(context: &mut Context, code: &str) -> Result<String, String> {
    let value = context
        .eval(Source::from_bytes(code.as_bytes()))
        .map_err(|e| format!("{e}"))?;
    Ok(value
        .as_string()
        .map(|s| s.to_std_string_escaped())
        .unwrap_or_default())
}

/// What a run produced.
pub struct Run {
    /// The output items in order.
    pub output: Vec<OutputItem>,
    /// How it ended.
    pub ending: Ending,
    /// The nested calls.
    pub calls: Vec<CallRecord>,
    /// The store writes of a script that succeeded (`[key, json]`, or `[key]` to delete).
    pub writes: Vec<Value>,
}

/// The script's value of a finished call: a tool that declares an output schema resolves to its structured
/// content (error results too), any other to its text; other failures reject with the error text.
fn script_value(
    tool: Option<&NestedTool>,
    name: &str,
    outcome: &CallOutcome,
) -> (bool, String, Option<String>) {
    let text = outcome.text();
    let failure = if text.is_empty() {
        format!("Tool \"{name}\" failed")
    } else {
        text.clone()
    };
    let error = outcome.is_error.then(|| failure.clone());
    let structured = tool
        .filter(|t| t.has_output_schema)
        .and(outcome.result.structured_content.as_ref());
    match structured {
        Some(value) => (true, value.to_string(), error),
        None if outcome.is_error => (false, failure, error),
        None => (true, Value::String(text).to_string(), error),
    }
}

fn settle_code(promise: u64, ok: bool, payload: Option<&str>) -> String {
    let payload = payload.map_or_else(|| "undefined".to_owned(), literal);
    format!("__codemode.settle({promise}, {ok}, {payload});\n")
}

/// Run `script` for the call `call_id` with `tools` callable and `store` (key → JSON text) to load from.
pub fn run(call_id: &str, script: &Script, tools: &[NestedTool], store: &Value, ctx: &dyn Ctx) -> Run {
    let started = Instant::now();
    RUN.with(|run| {
        *run.borrow_mut() = Some(RunState {
            call_id: call_id.to_owned(),
            tools: tools.to_vec(),
            calls: Vec::new(),
            running: HashMap::new(),
            ready: Vec::new(),
            streamed: 0,
        })
    });
    LAST_PUBLISHED.set(None);
    publish(&[]);
    let (ending, writes, context) = drive(script, tools, store, ctx, started);
    let output = context
        .and_then(|mut context| eval(&mut context, "__codemode.output()").ok())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let mut state = RUN.with(|run| run.borrow_mut().take());
    let calls = state
        .as_mut()
        .map(|s| std::mem::take(&mut s.calls))
        .unwrap_or_default();
    let calls = calls
        .into_iter()
        .map(|mut c| {
            // Calls still running were cut off with the script (the host cancels them when this call ends).
            if c.status == "running" {
                c.status = "cancelled".into();
            }
            c
        })
        .collect();
    Run {
        output,
        ending,
        calls,
        writes,
    }
}

/// The loop: how the script ended, its store writes, and the context (for its output).
fn drive(
    script: &Script,
    tools: &[NestedTool],
    store: &Value,
    ctx: &dyn Ctx,
    started: Instant,
) -> (Ending, Vec<Value>, Option<Context>) {
    let sandbox_failure = |e: String| Ending::Failed(format!("Script sandbox failed: {e}"));
    let mut context = Context::default();
    for (name, body) in [
        ("__tw_emit", NativeFunction::from_fn_ptr(emit_to_host)),
        ("__tw_call", NativeFunction::from_fn_ptr(call_tool)),
        ("__tw_global", NativeFunction::from_fn_ptr(call_global)),
    ] {
        if let Err(e) = context.register_global_builtin_callable(js_string!(name), 3, body) {
            return (sandbox_failure(e.to_string()), Vec::new(), None);
        }
    }
    let catalog: Vec<Value> = tools
        .iter()
        .map(|t| json!({"name": t.name, "id": t.id, "description": t.sample}))
        .collect();
    let setup = format!(
        "({PRELUDE})({}, {})",
        literal(&Value::from(catalog).to_string()),
        literal(&store.to_string())
    );
    if let Err(e) = eval(&mut context, &setup) {
        return (sandbox_failure(e), Vec::new(), Some(context));
    }
    if let Err(e) = eval(
        &mut context,
        &format!("__codemode.start({})", literal(&script.code)),
    ) {
        return (sandbox_failure(e), Vec::new(), Some(context));
    }
    let deadline = script.options.timeout_ms;
    let ending = loop {
        if let Err(e) = context.run_jobs() {
            break sandbox_failure(e.to_string());
        }
        let poll: Poll = match eval(&mut context, "__codemode.poll()")
            .and_then(|text| serde_json::from_str(&text).map_err(|e| format!("unreadable state: {e}")))
        {
            Ok(poll) => poll,
            Err(e) => break sandbox_failure(e),
        };
        if poll.done {
            // Calls that finished while the script ran on count as finished (pi's host records them as they end);
            // the rest are cut off with the script.
            if with_run(|run| !run.running.is_empty()).unwrap_or(false)
                && let Some((code, calls)) = collect(false)
                && !code.is_empty()
            {
                publish(&calls);
            }
            if poll.ok {
                let writes = poll
                    .writes
                    .and_then(|w| serde_json::from_str(&w).ok())
                    .unwrap_or_default();
                return (Ending::Completed(poll.value), writes, Some(context));
            }
            break Ending::Failed(poll.error.unwrap_or_else(|| "Error".into()));
        }
        if ctx.is_cancelled() {
            break Ending::Failed("Script aborted: Execution aborted".into());
        }
        if let Some(ms) = deadline
            && started.elapsed().as_millis() >= u128::from(ms)
        {
            break Ending::Failed(format!("Script timed out: Execution timed out after {ms} ms"));
        }
        let ready = with_run(|run| std::mem::take(&mut run.ready)).unwrap_or_default();
        if !ready.is_empty() {
            let code: String = ready
                .iter()
                .map(|(promise, ok, payload)| settle_code(*promise, *ok, payload.as_deref()))
                .collect();
            if let Err(e) = eval(&mut context, &code) {
                break sandbox_failure(e);
            }
            continue;
        }
        if with_run(|run| run.running.is_empty()).unwrap_or(true) {
            break Ending::Failed(STALLED.into());
        }
        let Some((code, calls)) = collect(true) else {
            break sandbox_failure("the run's state is gone".into());
        };
        publish(&calls);
        if let Err(e) = eval(&mut context, &code) {
            break sandbox_failure(e);
        }
    };
    (ending, Vec::new(), Some(context))
}

/// Take the started calls that finished (with `wait`, once one has): their records settled, and the code that
/// settles their promises in the script. Also the records as they are now.
fn collect(wait: bool) -> Option<(String, Vec<CallRecord>)> {
    let outcomes = guest::next_outcomes(wait);
    with_run(|run| {
        let mut code = String::new();
        for (number, outcome) in &outcomes {
            let Some(call) = run.running.remove(number) else {
                continue;
            };
            let tool = run.tools.iter().find(|t| t.name == call.tool);
            let (ok, payload, error) = script_value(tool, &call.tool, outcome);
            if let Some(record) = run.calls.get_mut(call.record) {
                record.finish(
                    Some(format!("{}/{number}", run.call_id)),
                    call.started.elapsed().as_secs_f64() * 1000.0,
                    error,
                );
            }
            code.push_str(&settle_code(call.promise, ok, Some(&payload)));
        }
        (code, run.calls.clone())
    })
}
