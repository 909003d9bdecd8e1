//! The script runner inside the sandbox: a fresh Boa context per call, the prelude, and the loop that runs the
//! job queue, hands the tool calls a script waits on to the host all at once (`call-tools`, so
//! `Promise.all` runs them concurrently), settles them, and repeats until the script ends.

use std::time::Instant;

use boa_engine::{Context, Source};
use serde::Deserialize;
use serde_json::{Value, json};
use toolwright_sdk::{Ctx, ToolResult};

use crate::output::{CallRecord, Ending, OutputItem};
use crate::source::Script;
use crate::{NestedTool, STALLED};

const PRELUDE: &str = include_str!("prelude.js");

#[derive(Deserialize)]
struct Poll {
    done: bool,
    ok: bool,
    value: Option<String>,
    error: Option<String>,
    calls: Vec<PendingCall>,
}

#[derive(Deserialize)]
struct PendingCall {
    id: u64,
    name: String,
    args: String,
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
}

/// Run `script` for the call `call_id` with `tools` callable.
pub fn run(call_id: &str, script: &Script, tools: &[NestedTool], ctx: &dyn Ctx) -> Run {
    let started = Instant::now();
    let mut calls: Vec<CallRecord> = Vec::new();
    let publish = |calls: &[CallRecord]| {
        ctx.update(ToolResult {
            details: Some(json!({ "calls": calls })),
            ..Default::default()
        });
    };
    publish(&calls);
    let mut context = Context::default();
    let catalog: Vec<Value> = tools
        .iter()
        .map(|t| json!({"name": t.name, "id": t.id, "description": t.sample}))
        .collect();
    let setup = format!("({PRELUDE})({})", literal(&Value::from(catalog).to_string()));
    let sandbox_failure = |e: String| Run {
        output: Vec::new(),
        ending: Ending::Failed(format!("Script sandbox failed: {e}")),
        calls: Vec::new(),
    };
    if let Err(e) = eval(&mut context, &setup) {
        return sandbox_failure(e);
    }
    if let Err(e) = eval(
        &mut context,
        &format!("__codemode.start({})", literal(&script.code)),
    ) {
        return sandbox_failure(e);
    }
    let deadline = script.options.timeout_ms;
    let mut dispatched = 0u64;
    let ending = loop {
        if let Err(e) = context.run_jobs() {
            break Ending::Failed(format!("Script sandbox failed: {e}"));
        }
        let poll: Poll = match eval(&mut context, "__codemode.poll()")
            .and_then(|text| serde_json::from_str(&text).map_err(|e| format!("unreadable state: {e}")))
        {
            Ok(poll) => poll,
            Err(e) => break Ending::Failed(format!("Script sandbox failed: {e}")),
        };
        if poll.done {
            // Calls the script started but never waited for are cut off with it.
            for call in poll.calls {
                let args: Value = serde_json::from_str(&call.args).unwrap_or(Value::Null);
                let mut record = CallRecord::running(call_id, &call.name, &args);
                record.status = "cancelled".into();
                calls.push(record);
            }
            break if poll.ok {
                Ending::Completed(poll.value)
            } else {
                Ending::Failed(poll.error.unwrap_or_else(|| "Error".into()))
            };
        }
        if ctx.is_cancelled() {
            break Ending::Failed("Script aborted: Execution aborted".into());
        }
        if let Some(ms) = deadline
            && started.elapsed().as_millis() >= u128::from(ms)
        {
            break Ending::Failed(format!("Script timed out: Execution timed out after {ms} ms"));
        }
        if poll.calls.is_empty() {
            break Ending::Failed(STALLED.into());
        }
        let first = calls.len();
        let requests: Vec<(String, Value)> = poll
            .calls
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    serde_json::from_str(&c.args).unwrap_or_else(|_| json!({})),
                )
            })
            .collect();
        for (name, args) in &requests {
            calls.push(CallRecord::running(call_id, name, args));
        }
        publish(&calls);
        let batch_started = Instant::now();
        let outcomes = ctx.call_tools(&requests);
        let elapsed = batch_started.elapsed().as_secs_f64() * 1000.0;
        let mut settle = String::new();
        for (i, (pending, outcome)) in poll.calls.iter().zip(outcomes).enumerate() {
            dispatched += 1;
            let tool = tools.iter().find(|t| t.name == pending.name);
            let text = outcome.text();
            let failure = if text.is_empty() {
                format!("Tool \"{}\" failed", pending.name)
            } else {
                text.clone()
            };
            calls[first + i].finish(
                Some(format!("{call_id}/{dispatched}")),
                elapsed,
                outcome.is_error.then(|| failure.clone()),
            );
            let structured = tool
                .filter(|t| t.has_output_schema)
                .and(outcome.result.structured_content.as_ref());
            let (ok, payload) = match structured {
                Some(value) => (true, value.to_string()),
                None if outcome.is_error => (false, failure),
                None => (true, Value::String(text).to_string()),
            };
            settle.push_str(&format!(
                "__codemode.settle({}, {ok}, {});\n",
                pending.id,
                literal(&payload)
            ));
        }
        publish(&calls);
        if let Err(e) = eval(&mut context, &settle) {
            break Ending::Failed(format!("Script sandbox failed: {e}"));
        }
    };
    let output = eval(&mut context, "__codemode.output()")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    Run {
        output,
        ending,
        calls,
    }
}
