//! # toolwright-test-nested
//!
//! A test program for nested tool calls (pi's `ctx.executeTool`), linked natively and loaded as a wasm component
//! by the conformance tests in `tests/tests/nested.rs`:
//!
//! - `nest` makes the nested calls its arguments list (one by one, or all at once with `concurrent`) and reports
//!   each outcome; it can report usage of its own.
//! - `leaf` answers (after `sleepMs`, having logged `log` at info), optionally with usage or as an error;
//!   `seq_leaf` does the same but is sequential, and reports when it started and ended so tests can see overlap.
//! - `helper` (exposure `codemode`), `later_helper` (`deferred`), `solo` (`model-only`) and `ghost` (`hidden`)
//!   test what nested calls can reach.
//! - `list_tools` reports the callable tools as the caller sees them (pi's `ctx.tools`).
//!
//! ```
//! use toolwright_sdk::Tool;
//! let names: Vec<String> = toolwright_test_nested::tools().iter().map(|t| t.spec().name).collect();
//! assert_eq!(names, ["nest", "leaf", "seq_leaf", "helper", "later_helper", "solo", "ghost", "list_tools"]);
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use toolwright_sdk::{
    CallOutcome, Ctx, ExecutionMode, Exposure, LogLevel, Tool, ToolError, ToolResult, ToolSpec, Usage,
};

/// One tool of the program.
#[derive(Debug, Clone, Copy)]
pub struct NestedTool {
    name: &'static str,
}

/// The program's tools, in registration order.
pub fn tools() -> Vec<NestedTool> {
    [
        "nest",
        "leaf",
        "seq_leaf",
        "helper",
        "later_helper",
        "solo",
        "ghost",
        "list_tools",
    ]
    .into_iter()
    .map(|name| NestedTool { name })
    .collect()
}

fn leaf_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "usage": {"type": "number"},
            "sleepMs": {"type": "number"},
            "fail": {"type": "boolean"},
            "log": {"type": "string"}
        }
    })
}

fn usage(input: f64) -> Usage {
    Usage {
        input,
        total_tokens: input,
        ..Default::default()
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// One line per outcome: `NAME ok|error [Nms]: TEXT`.
fn describe(calls: &[(String, Value)], outcomes: &[CallOutcome]) -> String {
    calls
        .iter()
        .zip(outcomes)
        .map(|((name, _), o)| {
            let status = if o.is_error { "error" } else { "ok" };
            let ran = if o.duration_ms.is_some() { " ran" } else { "" };
            format!("{name} {status}{ran}: {}", o.text())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Tool for NestedTool {
    fn spec(&self) -> ToolSpec {
        let base = ToolSpec {
            name: self.name.into(),
            label: self.name.into(),
            description: format!("The {} test tool.", self.name),
            parameters: leaf_schema(),
            ..Default::default()
        };
        match self.name {
            "nest" => ToolSpec {
                description: "Make nested tool calls.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "calls": {"type": "array", "items": {"type": "object"}},
                        "concurrent": {"type": "boolean"},
                        "usage": {"type": "number"}
                    },
                    "required": ["calls"]
                }),
                ..base
            },
            "seq_leaf" => ToolSpec {
                execution_mode: Some(ExecutionMode::Sequential),
                ..base
            },
            "helper" => ToolSpec {
                exposure: Exposure::Codemode,
                ..base
            },
            "later_helper" => ToolSpec {
                exposure: Exposure::Deferred,
                ..base
            },
            "solo" => ToolSpec {
                exposure: Exposure::ModelOnly,
                ..base
            },
            "ghost" => ToolSpec {
                exposure: Exposure::Hidden,
                ..base
            },
            "list_tools" => ToolSpec {
                parameters: json!({"type": "object", "properties": {}}),
                ..base
            },
            _ => base,
        }
    }

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        match self.name {
            "nest" => {
                let calls: Vec<(String, Value)> = args["calls"]
                    .as_array()
                    .map(|calls| {
                        calls
                            .iter()
                            .map(|c| {
                                let name = c["name"].as_str().unwrap_or_default().to_owned();
                                (name, c.get("arguments").cloned().unwrap_or_else(|| json!({})))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let outcomes = if args["concurrent"].as_bool() == Some(true) {
                    ctx.call_tools(&calls)
                } else {
                    calls.iter().map(|(name, a)| ctx.call_tool(name, a)).collect()
                };
                let mut result = ToolResult::text(describe(&calls, &outcomes));
                result.usage = args["usage"].as_f64().map(usage);
                Ok(result)
            }
            "list_tools" => {
                let names: Vec<String> = ctx.tools().into_iter().map(|t| t.name).collect();
                Ok(ToolResult::text(names.join(",")))
            }
            _ => {
                let started = now_ms();
                if let Some(line) = args["log"].as_str() {
                    ctx.log(LogLevel::Info, line);
                }
                if let Some(ms) = args["sleepMs"].as_f64() {
                    // Sleep in slices so a cancelled call ends promptly.
                    let until = started + ms as u128;
                    while now_ms() < until && !ctx.is_cancelled() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
                if args["fail"].as_bool() == Some(true) {
                    return Err(ToolError::new(format!("{} failed on purpose", self.name)));
                }
                let text = args["text"].as_str().unwrap_or_default();
                let mut result = if self.name == "seq_leaf" {
                    ToolResult::text(format!("{text} {started}-{}", now_ms()))
                } else {
                    ToolResult::text(format!("{} {text}", self.name))
                };
                result.usage = args["usage"].as_f64().map(usage);
                Ok(result)
            }
        }
    }
}

toolwright_sdk::export_tool!(
    NestedTool { name: "nest" },
    NestedTool { name: "leaf" },
    NestedTool { name: "seq_leaf" },
    NestedTool { name: "helper" },
    NestedTool { name: "later_helper" },
    NestedTool { name: "solo" },
    NestedTool { name: "ghost" },
    NestedTool { name: "list_tools" };
    capabilities = [
        toolwright_sdk::CapabilityRequest::new(
            toolwright_sdk::Capability::Read(".".into()),
            "the built-ins its nested calls reach read the workspace",
        ),
        toolwright_sdk::CapabilityRequest::new(
            toolwright_sdk::Capability::Spawn("sh".into()),
            "the bash its nested calls reach starts the shell",
        ),
    ]
);
