//! pi 1.6.0's shell tools (`createShellToolDefinition`): one implementation that the built-in `bash` and
//! `powershell` configure with a [`Shell`] each, as pi configures its one definition. A call runs the command
//! in the workspace, streams the output as throttled partial results (at most one per 100 ms, after an initial
//! empty one), keeps the last 2000 lines or 50 KB for the model with the full output in a temp file, and reports
//! a non-zero exit as a returned error result. A timeout or a cancellation kills the whole process group and
//! reports the partial output.
//!
//! ```
//! use toolwright_sdk::shell::Shell;
//! use toolwright_sdk::{Command, Ctx, ToolError};
//!
//! fn program(_ctx: &dyn Ctx) -> Result<String, ToolError> {
//!     Ok("/bin/sh".into())
//! }
//! const SH: Shell = Shell {
//!     name: "sh",
//!     shell_name: "sh",
//!     snippet: "Execute sh commands",
//!     temp_prefix: "sh",
//!     program,
//!     arguments: |command| vec!["-c".into(), command.into()],
//! };
//! assert!(SH.spec().description.starts_with("Execute a sh command in the current working directory."));
//! ```

mod accumulator;

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::arguments::{self, Unchecked};
use crate::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size};
use crate::{Command, Content, Ctx, ProcessEvent, ToolError, ToolResult, ToolSpec, js};
use accumulator::{OutputAccumulator, Snapshot, Spill};

/// pi's `BASH_UPDATE_THROTTLE_MS`.
const UPDATE_THROTTLE: Duration = Duration::from_millis(100);
/// The largest timer Node accepts, in milliseconds.
const MAX_TIMEOUT_MS: f64 = 2_147_483_647.0;
/// How often a running command checks for cancellation.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// One shell tool: what pi's `ShellToolConfig` says, and how its local backend starts the shell.
#[derive(Debug, Clone, Copy)]
pub struct Shell {
    /// The tool's name, also its label.
    pub name: &'static str,
    /// The shell as the description and the errors name it (`bash`, `PowerShell`).
    pub shell_name: &'static str,
    /// The system prompt's one-line snippet.
    pub snippet: &'static str,
    /// The start of the full-output temp file's name.
    pub temp_prefix: &'static str,
    /// The program to start, or the error every call ends with when there is none. Asked before anything else
    /// a call checks (its timeout included), as pi resolves its shell first.
    pub program: fn(&dyn Ctx) -> Result<String, ToolError>,
    /// The program's arguments for a command.
    pub arguments: fn(&str) -> Vec<String>,
}

/// pi's guideline for both shells (`exposeSessionEnvironment` on).
const GUIDELINE: &str = "You can inspect PI_* environment variables for current model and session details.";

impl Shell {
    /// The declaration: pi's description, schemas, snippet, guideline and sampling constraint for this shell.
    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.into(),
            label: self.name.into(),
            description: format!(
                "Execute a {} command in the current working directory. Returns stdout and stderr. Output is \
                 truncated to last {DEFAULT_MAX_LINES} lines or {}KB (whichever is hit first). If truncated, full \
                 output is saved to a temp file. Optionally provide a timeout in seconds.",
                self.shell_name,
                DEFAULT_MAX_BYTES / 1024
            ),
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
            prompt_snippet: Some(self.snippet.into()),
            prompt_guidelines: vec![GUIDELINE.into()],
            constrained_sampling: Some(json!({"type": "json_schema", "strict": "prefer"})),
            // MCP's hints for clients that decide what to auto-approve (README, "Serving MCP clients").
            annotations: Some(crate::ToolAnnotations::hints(false, true, false, true)),
            ..Default::default()
        }
    }

    /// Run one call (pi's `execute`).
    pub fn execute(&self, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        let Args { command, timeout } = arguments::object(self.name, args, "command")?;
        // pi runs `String(command)`: a missing command is the word `undefined`, never an empty script.
        let command = command.string();
        ctx.update(ToolResult::default());
        let program = (self.program)(ctx)?;
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
        let mut run = Run::new(ctx, self.temp_prefix);
        let started = Instant::now();
        let spec = Command {
            program,
            args: (self.arguments)(&command),
            cwd: Some(ctx.cwd().to_owned()),
            env: Vec::new(),
        };
        let outcome = run.exec(&spec, self.shell_name, timeout_ms);
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

/// The arguments of a shell tool, as pi destructures them.
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
struct CtxSpill<'a> {
    ctx: &'a dyn Ctx,
    prefix: &'static str,
}

impl Spill for CtxSpill<'_> {
    fn create(&mut self) -> std::io::Result<(String, Box<dyn Write + Send>)> {
        let file = self.ctx.temp_file(self.prefix, ".log")?;
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
    fn new(ctx: &'a dyn Ctx, prefix: &'static str) -> Self {
        Run {
            ctx,
            output: OutputAccumulator::new(DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES, CtxSpill { ctx, prefix }),
            dirty: false,
            last_update: None,
        }
    }

    /// pi's local shell backend: the exit code, or why there is none.
    fn exec(&mut self, spec: &Command, shell_name: &str, timeout_ms: Option<f64>) -> Result<i64, Stop> {
        if self.ctx.is_cancelled() {
            return Err(Stop::Aborted);
        }
        let cwd = self.ctx.cwd();
        if self.ctx.files().metadata(cwd).is_err() {
            return Err(Stop::Failed(ToolError::new(format!(
                "Working directory does not exist: {cwd}\nCannot execute {shell_name} commands."
            ))));
        }
        let mut process = self
            .ctx
            .spawn(spec)
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
                crate::LogLevel::Warn,
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
