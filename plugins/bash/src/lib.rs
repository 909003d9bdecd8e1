//! # toolwright-tool-bash
//!
//! pi 1.6.0's `bash` tool: run a command with `bash -c` in the workspace, stream the output as throttled
//! partial results (at most one per 100 ms, after an initial empty one), keep the last 2000 lines or 50 KB for
//! the model with the full output in a temp file, and report a non-zero exit as a returned error result. A
//! timeout or a cancellation kills the whole process group and reports the partial output.
//!
//! ```
//! use toolwright_sdk::Tool;
//! assert_eq!(toolwright_tool_bash::Bash.spec().name, "bash");
//! ```

mod accumulator;

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use toolwright_sdk::arguments::{self, Unchecked};
use toolwright_sdk::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size};
use toolwright_sdk::{Command, Content, Ctx, ProcessEvent, Tool, ToolError, ToolResult, ToolSpec, js};

use crate::accumulator::{OutputAccumulator, Snapshot, Spill};

/// The `bash` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bash;

/// pi's `BASH_UPDATE_THROTTLE_MS`.
const UPDATE_THROTTLE: Duration = Duration::from_millis(100);
/// The largest timer Node accepts, in milliseconds.
const MAX_TIMEOUT_MS: f64 = 2_147_483_647.0;
/// How often a running command checks for cancellation.
const CANCEL_POLL: Duration = Duration::from_millis(20);

impl Tool for Bash {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "bash".into(),
            label: "bash".into(),
            description: "Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated to last 2000 lines or 50KB (whichever is hit first). If truncated, full output is saved to a temp file. Optionally provide a timeout in seconds.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "Shell command to execute"},
                    "timeout": {"type": "number", "description": "Timeout in seconds (optional, no default timeout)"}
                },
                "required": ["command"]
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {
                    "output": {"type": "string", "description": "Combined stdout and stderr, possibly truncated"},
                    "truncated": {"type": "boolean"},
                    "full_output_path": {"type": "string", "description": "Full output, when truncated"},
                    "exit_code": {"type": "number"},
                    "wall_time_seconds": {"type": "number"}
                },
                "required": ["output", "truncated", "exit_code", "wall_time_seconds"]
            })),
            prompt_snippet: Some("Execute bash commands (ls, grep, find, etc.)".into()),
            prompt_guidelines: vec!["You can inspect PI_* environment variables for current model and session details.".into()],
            constrained_sampling: Some(json!({"type": "json_schema", "strict": "prefer"})),
            // MCP's hints for clients that decide what to auto-approve (README, "Serving MCP clients").
            annotations: Some(toolwright_sdk::ToolAnnotations::hints(false, true, false, true)),
            ..Default::default()
        }
    }

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        let Args { command, timeout } = arguments::object("bash", args, "command")?;
        // pi runs `String(command)`: a missing command is the word `undefined`, never an empty script.
        let command = command.string();
        ctx.update(ToolResult::default());
        let timeout_ms = match timeout {
            None => None,
            Some(t) if !t.is_finite() || t <= 0.0 => {
                return Err(ToolError::new(
                    "Invalid timeout: must be a finite number of seconds",
                ));
            }
            Some(t) if t * 1000.0 > MAX_TIMEOUT_MS => {
                return Err(ToolError::new("Invalid timeout: maximum is 2147483.647 seconds"));
            }
            Some(t) => Some(t * 1000.0),
        };
        let mut run = Run::new(ctx);
        let started = Instant::now();
        let outcome = run.exec(&command, timeout_ms);
        let snapshot = run.finish_output();
        let text = format_output(&snapshot, &run.output, "(no output)").0;
        let exit_code = match outcome {
            Ok(code) => code,
            Err(Stop::Aborted) => {
                let (partial, _) = format_output(&snapshot, &run.output, "");
                return Err(ToolError::new(append_status(&partial, "Command aborted")));
            }
            Err(Stop::TimedOut) => {
                let (partial, _) = format_output(&snapshot, &run.output, "");
                let shown = timeout.map_or_else(String::new, js::number_to_string);
                return Err(ToolError::new(append_status(
                    &partial,
                    &format!("Command timed out after {shown} seconds"),
                )));
            }
            Err(Stop::Failed(error)) => return Err(error),
        };
        let (_, details) = format_output(&snapshot, &run.output, "(no output)");
        let wall = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
        let (full, truncated) = run.output.full_output();
        let mut structured = Map::new();
        structured.insert("output".into(), json!(full));
        structured.insert("truncated".into(), json!(truncated));
        if truncated && let Some(path) = &snapshot.full_output_path {
            structured.insert("full_output_path".into(), json!(path));
        }
        structured.insert("exit_code".into(), json!(exit_code));
        structured.insert("wall_time_seconds".into(), js::number(wall));
        let (text, is_error) = if exit_code == 0 {
            (text, None)
        } else {
            (
                append_status(&text, &format!("Command exited with code {exit_code}")),
                Some(true),
            )
        };
        Ok(ToolResult {
            content: vec![Content::text(text)],
            details,
            structured_content: Some(Value::Object(structured)),
            is_error,
            ..Default::default()
        })
    }
}

/// The arguments of `bash`, as pi destructures them.
#[derive(serde::Deserialize)]
struct Args {
    #[serde(default)]
    command: Unchecked,
    /// pi's `Number.isFinite` is false for anything present that is not a number (a string, `null`, a
    /// boolean): such a timeout fails as a non-finite one instead of running unbounded.
    #[serde(default, deserialize_with = "arguments::number")]
    timeout: Option<f64>,
}

/// Why a command stopped without an exit code.
enum Stop {
    Aborted,
    TimedOut,
    Failed(ToolError),
}

/// Spills to a temp file from the host.
struct CtxSpill<'a>(&'a dyn Ctx);

impl Spill for CtxSpill<'_> {
    fn create(&mut self) -> std::io::Result<(String, Box<dyn Write + Send>)> {
        let file = self.0.temp_file("toolwright-bash", ".log")?;
        Ok((file.path, file.writer))
    }
}

/// One command's run: the output and the throttled updates.
struct Run<'a> {
    ctx: &'a dyn Ctx,
    output: OutputAccumulator<CtxSpill<'a>>,
    dirty: bool,
    last_update: Option<Instant>,
}

impl<'a> Run<'a> {
    fn new(ctx: &'a dyn Ctx) -> Self {
        Run {
            ctx,
            output: OutputAccumulator::new(DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES, CtxSpill(ctx)),
            dirty: false,
            last_update: None,
        }
    }

    /// pi's local shell backend: the exit code, or why there is none.
    fn exec(&mut self, command: &str, timeout_ms: Option<f64>) -> Result<i64, Stop> {
        if self.ctx.is_cancelled() {
            return Err(Stop::Aborted);
        }
        let cwd = self.ctx.cwd().to_owned();
        if self.ctx.files().metadata(&cwd).is_err() {
            return Err(Stop::Failed(ToolError::new(format!(
                "Working directory does not exist: {cwd}\nCannot execute bash commands."
            ))));
        }
        let shell = if self.ctx.files().metadata("/bin/bash").is_ok() {
            "/bin/bash"
        } else {
            "sh"
        };
        let spec = Command {
            program: shell.into(),
            args: vec!["-c".into(), command.into()],
            cwd: Some(cwd),
            env: Vec::new(),
        };
        let mut process = self
            .ctx
            .spawn(&spec)
            .map_err(|e| Stop::Failed(ToolError::new(e.to_string())))?;
        let deadline = timeout_ms.map(|ms| Instant::now() + Duration::from_secs_f64(ms / 1000.0));
        loop {
            if self.ctx.is_cancelled() {
                process.kill();
                return Err(Stop::Aborted);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                process.kill();
                return Err(Stop::TimedOut);
            }
            let mut wait = CANCEL_POLL;
            if let Some(d) = deadline {
                wait = wait.min(d - now);
            }
            if self.dirty
                && let Some(last) = self.last_update
            {
                wait = wait.min((last + UPDATE_THROTTLE).saturating_duration_since(now));
            }
            match process.next(wait) {
                Ok(ProcessEvent::Output(bytes)) => {
                    self.output.append(&bytes);
                    self.dirty = true;
                }
                Ok(ProcessEvent::Exited(status)) => {
                    return Ok(match (status.code, status.signal) {
                        (Some(code), _) => i64::from(code),
                        (None, Some(signal)) => 128 + i64::from(signal),
                        (None, None) => 1,
                    });
                }
                Ok(ProcessEvent::Idle) => {}
                Err(e) => {
                    process.kill();
                    return Err(Stop::Failed(ToolError::new(e.to_string())));
                }
            }
            if self.dirty && self.last_update.is_none_or(|t| t.elapsed() >= UPDATE_THROTTLE) {
                self.emit_update();
            }
        }
    }

    fn emit_update(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        self.last_update = Some(Instant::now());
        let snapshot = self.output.snapshot(true);
        let mut details = Map::new();
        if snapshot.truncation.truncated {
            details.insert("truncation".into(), json!(snapshot.truncation));
        }
        if let Some(path) = &snapshot.full_output_path {
            details.insert("fullOutputPath".into(), json!(path));
        }
        self.ctx
            .update(ToolResult::text(snapshot.content).with_details(Value::Object(details)));
    }

    /// pi's `finishOutput`: stop accepting output, emit the pending update, take the final snapshot.
    fn finish_output(&mut self) -> Snapshot {
        self.output.finish();
        self.emit_update();
        let snapshot = self.output.snapshot(true);
        if let Some(error) = self.output.spill_error() {
            self.ctx.log(
                toolwright_sdk::LogLevel::Warn,
                &format!("cannot write the full output file: {error}"),
            );
        }
        snapshot
    }
}

/// pi's `formatOutput`: the text with the truncation notice, and the details when truncated.
fn format_output<S: Spill>(
    snapshot: &Snapshot,
    output: &OutputAccumulator<S>,
    empty: &str,
) -> (String, Option<Value>) {
    let t = &snapshot.truncation;
    let mut text = if snapshot.content.is_empty() {
        empty.to_owned()
    } else {
        snapshot.content.clone()
    };
    if !t.truncated {
        return (text, None);
    }
    let path = snapshot.full_output_path.clone().unwrap_or_default();
    let mut details = Map::new();
    details.insert("truncation".into(), json!(t));
    if !path.is_empty() {
        details.insert("fullOutputPath".into(), json!(path));
    }
    let start = t.total_lines as i64 - t.output_lines as i64 + 1;
    let end = t.total_lines;
    if t.last_line_partial {
        let line_size = format_size(output.last_line_bytes());
        text.push_str(&format!(
            "\n\n[Showing last {} of line {end} (line is {line_size}). Full output: {path}]",
            format_size(t.output_bytes)
        ));
    } else if t.truncated_by == Some("lines") {
        text.push_str(&format!(
            "\n\n[Showing lines {start}-{end} of {}. Full output: {path}]",
            t.total_lines
        ));
    } else {
        text.push_str(&format!(
            "\n\n[Showing lines {start}-{end} of {} ({} limit). Full output: {path}]",
            t.total_lines,
            format_size(DEFAULT_MAX_BYTES)
        ));
    }
    (text, Some(Value::Object(details)))
}

/// pi's `appendStatus`.
fn append_status(text: &str, status: &str) -> String {
    if text.is_empty() {
        status.to_owned()
    } else {
        format!("{text}\n\n{status}")
    }
}

toolwright_sdk::export_tool!(Bash; capabilities = [
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Spawn("/bin/bash".into()), "runs the commands the model asks for"),
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Read("/".into()), "checks the working directory exists"),
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Env("*".into()), "passes the environment to the commands, as a shell does"),
]);
