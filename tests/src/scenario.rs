//! Pipeline scenarios as data: test tools that echo, sleep, stream, fail, throw or abort, and hooks that block,
//! rewrite or fail, built the same way here and in pi's recording driver (`tests/oracle/record-pipeline.mjs`).

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolwright::hooks::{AfterToolCallResult, BeforeToolCallResult};
use toolwright::{
    AgentTool, AssistantMessage, ExecutionMode, Pipeline, StopReason, ToolCall, ToolError, ToolExecution,
    ToolResult, after_tool_call, before_tool_call,
};

/// One scenario: tools, hooks, mode and the calls of one assistant message.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scenario {
    /// The test tools.
    pub tools: Vec<ToolSpec>,
    /// The calls.
    pub calls: Vec<ToolCall>,
    /// `parallel` (default) or `sequential`.
    #[serde(default)]
    pub mode: Option<ExecutionMode>,
    /// The assistant message's stop reason.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// `before_tool_call` rules, tried in order.
    #[serde(default)]
    pub before: Option<Vec<HookRule>>,
    /// `after_tool_call` rules, tried in order.
    #[serde(default)]
    pub after: Option<Vec<HookRule>>,
}

/// A test tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// Its schema; `{value: string}` (required) by default.
    #[serde(default)]
    pub parameters: Option<Value>,
    /// Its execution mode.
    #[serde(default)]
    pub execution_mode: Option<ExecutionMode>,
    /// A named argument shim: `foldLegacyEdit` or `throwBadShape`.
    #[serde(default)]
    pub prepare_arguments: Option<String>,
    /// What `execute` does, in order; `[{"return": "echo"}]` by default.
    #[serde(default)]
    pub steps: Option<Vec<Step>>,
}

/// One step of a test tool's `execute`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Sleep this many milliseconds.
    #[serde(default)]
    pub sleep: Option<u64>,
    /// Send this partial result.
    #[serde(default)]
    pub update: Option<ToolResult>,
    /// Send this partial result 20 ms after `execute` returned (it must be ignored).
    #[serde(default)]
    pub late_update: Option<ToolResult>,
    /// Abort the batch.
    #[serde(default)]
    pub abort: bool,
    /// Throw this message.
    #[serde(default)]
    pub throw: Option<String>,
    /// Return `"echo"` (the params as JSON text, and as `details.params`) or this result.
    #[serde(default, rename = "return")]
    pub returns: Option<Value>,
}

/// A hook rule: applies to calls matching `id` and `tool` (both optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRule {
    /// Only this call id.
    #[serde(default)]
    pub id: Option<String>,
    /// Only this tool.
    #[serde(default)]
    pub tool: Option<String>,
    /// Abort the batch.
    #[serde(default)]
    pub abort: bool,
    /// Sleep this many milliseconds first.
    #[serde(default)]
    pub sleep: Option<u64>,
    /// Throw this message.
    #[serde(default)]
    pub throw: Option<String>,
    /// Merge these keys into the arguments (`before` only).
    #[serde(default)]
    pub set_args: Option<serde_json::Map<String, Value>>,
    /// Return this result (`BeforeToolCallResult` or `AfterToolCallResult` in pi's JSON).
    #[serde(default)]
    pub result: Option<Value>,
}

impl HookRule {
    fn matches(&self, call: &ToolCall) -> bool {
        self.id.as_ref().is_none_or(|id| *id == call.id) && self.tool.as_ref().is_none_or(|t| *t == call.name)
    }
}

impl Scenario {
    /// The assistant message.
    pub fn message(&self) -> AssistantMessage {
        AssistantMessage {
            tool_calls: self.calls.clone(),
            stop_reason: self.stop_reason.unwrap_or_default(),
        }
    }

    /// The tools, wired to `abort`.
    pub fn tools(&self, abort: &CancellationToken) -> Vec<AgentTool> {
        self.tools.iter().map(|spec| spec.build(abort.clone())).collect()
    }

    /// The pipeline with the scenario's mode and hooks, wired to `abort`.
    pub fn pipeline(&self, abort: &CancellationToken) -> Pipeline {
        let mut pipeline = Pipeline::new().with_tool_execution(self.mode.unwrap_or_default());
        if let Some(rules) = self.before.clone() {
            let abort = abort.clone();
            let rules = Arc::new(rules);
            pipeline = pipeline.with_before_tool_call(before_tool_call(move |ctx, _cancel| {
                let (rules, abort) = (rules.clone(), abort.clone());
                async move {
                    let mut args = ctx.args.clone();
                    for rule in rules.iter().filter(|r| r.matches(&ctx.tool_call)) {
                        if let Some(ms) = rule.sleep {
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                        }
                        if rule.abort {
                            abort.cancel();
                        }
                        if let Some(message) = &rule.throw {
                            return Err(ToolError::new(message.clone()));
                        }
                        if let (Some(set), Value::Object(map)) = (&rule.set_args, &mut args) {
                            map.extend(set.clone());
                        }
                        if let Some(result) = &rule.result {
                            return Ok(Some(before_result(result, args)));
                        }
                    }
                    Ok((args != ctx.args).then(|| BeforeToolCallResult::rewrite(args)))
                }
            }));
        }
        if let Some(rules) = self.after.clone() {
            let rules = Arc::new(rules);
            pipeline = pipeline.with_after_tool_call(after_tool_call(move |ctx, _cancel| {
                let rules = rules.clone();
                async move {
                    for rule in rules.iter().filter(|r| r.matches(&ctx.tool_call)) {
                        if let Some(message) = &rule.throw {
                            return Err(ToolError::new(message.clone()));
                        }
                        if let Some(result) = &rule.result {
                            return Ok(Some(after_result(result)));
                        }
                    }
                    Ok(None)
                }
            }));
        }
        pipeline
    }
}

fn before_result(v: &Value, args: Value) -> BeforeToolCallResult {
    BeforeToolCallResult {
        block: v["block"].as_bool().unwrap_or(false),
        reason: v["reason"].as_str().map(str::to_owned),
        terminate: v["terminate"] == json!(true),
        args: Some(args),
    }
}

fn after_result(v: &Value) -> AfterToolCallResult {
    let field = |k: &str| v.get(k).cloned();
    AfterToolCallResult {
        content: field("content").and_then(|c| serde_json::from_value(c).ok()),
        details: field("details"),
        structured_content: field("structuredContent"),
        is_error: field("isError").and_then(|b| b.as_bool()),
        usage: field("usage").and_then(|u| serde_json::from_value(u).ok()),
        terminate: field("terminate").and_then(|b| b.as_bool()),
    }
}

impl ToolSpec {
    fn build(&self, abort: CancellationToken) -> AgentTool {
        let parameters = self.parameters.clone().unwrap_or_else(
            || json!({"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}),
        );
        let steps = Arc::new(self.steps.clone().unwrap_or_else(|| {
            vec![Step {
                returns: Some(json!("echo")),
                ..Default::default()
            }]
        }));
        let mut tool = AgentTool::new(
            &self.name,
            format!("Test tool {}", self.name),
            parameters,
            move |run: ToolExecution| {
                let (steps, abort) = (steps.clone(), abort.clone());
                async move { run_steps(&steps, run, abort).await }
            },
        );
        if let Some(mode) = self.execution_mode {
            tool = tool.with_execution_mode(mode);
        }
        match self.prepare_arguments.as_deref() {
            Some("foldLegacyEdit") => tool = tool.with_prepare_arguments(|args| Ok(fold_legacy_edit(args))),
            Some("throwBadShape") => tool = tool.with_prepare_arguments(|_| Err(ToolError::new("bad shape"))),
            _ => {}
        }
        tool
    }
}

async fn run_steps(
    steps: &[Step],
    run: ToolExecution,
    abort: CancellationToken,
) -> Result<ToolResult, ToolError> {
    for step in steps {
        if let Some(ms) = step.sleep {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if let Some(partial) = &step.update {
            run.updates.update(partial.clone());
        }
        if let Some(partial) = step.late_update.clone() {
            let updates = run.updates.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                updates.update(partial);
            });
        }
        if step.abort {
            abort.cancel();
        }
        if let Some(message) = &step.throw {
            return Err(ToolError::new(message.clone()));
        }
        match &step.returns {
            Some(Value::String(s)) if s == "echo" => {
                let text = serde_json::to_string(&run.params).map_err(|e| ToolError::new(e.to_string()))?;
                return Ok(ToolResult::text(text).with_details(json!({"params": run.params})));
            }
            Some(result) => {
                return serde_json::from_value(result.clone()).map_err(|e| ToolError::new(e.to_string()));
            }
            None => {}
        }
    }
    Ok(ToolResult::text("done"))
}

/// Folds top-level `oldText`/`newText` into `edits`, like the built-in edit's legacy shim.
fn fold_legacy_edit(args: &Value) -> Value {
    let Value::Object(map) = args else {
        return args.clone();
    };
    if !map.contains_key("oldText") || map.contains_key("edits") {
        return args.clone();
    }
    let mut rest = map.clone();
    let old_text = rest.shift_remove("oldText");
    let new_text = rest.shift_remove("newText");
    let mut edit = serde_json::Map::new();
    edit.insert("oldText".into(), old_text.unwrap_or(Value::Null));
    if let Some(new_text) = new_text {
        edit.insert("newText".into(), new_text);
    }
    rest.insert("edits".into(), Value::Array(vec![Value::Object(edit)]));
    Value::Object(rest)
}
