//! `toolwright exec`: one batch of tool calls through the full pipeline, events as JSON lines
//! (`spec/cli-contract.md`), or rendered for people on a terminal.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use toolwright::{AgentEvent, AssistantMessage, BoxFuture, EventSink, ExecutionMode, StopReason, ToolCall};

/// Arguments of `toolwright exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The calls file: `{"toolCalls": [{"id", "name", "arguments"}…], "mode"?, "stopReason"?}`, or a bare array
    /// of calls (`[{"id", "name", "arguments"}…]`); `-` reads it from standard input.
    calls: PathBuf,
    /// The workspace the tools work in (default: the current directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Run the batch sequentially (the same as `"mode": "sequential"`).
    #[arg(long)]
    sequential: bool,
    /// Print JSON lines even on a terminal.
    #[arg(long)]
    json: bool,
    /// Render the events for people even when stdout is not a terminal (with each tool's own rendering of its
    /// calls and results, pi's `renderCall` / `renderResult`, where it has one).
    #[arg(long, conflicts_with = "json")]
    human: bool,
    /// After the batch, write `{"type":"timing","batchMs":…,"calls":…}` to stderr: the batch alone, from the first
    /// event to the last result message, with start-up and plugin loading excluded (for benchmarks).
    #[arg(long)]
    timing: bool,
    /// Append one JSON line per tool call and nested call to FILE (besides the log the user's policy names with
    /// `audit = "FILE"`); `toolwright audit` prints it.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Build the plugin project in DIR (its `build.sh`) and run its build ahead of the installed plugin of its
    /// name, under that plugin's approved grants, as `toolwright dev` does (no `plugins update` or `approve`).
    #[arg(long, value_name = "DIR")]
    dev: Option<PathBuf>,
    /// Ask on the terminal for what a plugin's call was refused (a directory or a program it requested), when the
    /// user's policy says `[ask] grants = true`: once, for this run, always (written to the policy file), or deny;
    /// an approved call runs again after the batch. Plugins' own questions (`ask`: a form, the roots) are put on
    /// the terminal while the batch runs. Needs standard input to be a terminal (the calls then come from a file).
    #[arg(long)]
    ask: bool,
    #[command(flatten)]
    tools: super::ToolArgs,
}

/// The calls file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CallsFile {
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    mode: Option<ExecutionMode>,
    #[serde(default)]
    stop_reason: Option<StopReason>,
}

/// The batch `path` holds (standard input for `-`): a calls file, or a bare array of calls, which is a calls file
/// with its defaults (a parallel batch, stop reason `toolUse`).
fn read_batch(path: &std::path::Path) -> anyhow::Result<CallsFile> {
    let (text, name) = if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .context("cannot read the calls from standard input")?;
        (text, "standard input".to_owned())
    } else {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the calls file {}", path.display()))?;
        (text, path.display().to_string())
    };
    parse_batch(&text).with_context(|| {
        format!(
            "{name} is not a valid calls file (expected {{\"toolCalls\": [{{\"id\", \"name\", \"arguments\"}}…], \
             \"mode\"?, \"stopReason\"?}}, or a bare array of calls)"
        )
    })
}

/// A calls file's text as a batch: an object is a calls file, an array its calls alone.
fn parse_batch(text: &str) -> serde_json::Result<CallsFile> {
    if text.trim_start().starts_with('[') {
        let tool_calls = serde_json::from_str(text)?;
        return Ok(CallsFile {
            tool_calls,
            mode: None,
            stop_reason: None,
        });
    }
    serde_json::from_str(text)
}

pub fn run(mut args: ExecArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        !args.ask || (std::io::stdin().is_terminal() && args.calls.as_os_str() != "-"),
        "--ask asks on the terminal: standard input must be one, and the calls must come from a file, not `-`"
    );
    let file = read_batch(&args.calls)?;
    let cwd = super::workspace(args.cwd)?;
    let mode = if args.sequential {
        ExecutionMode::Sequential
    } else {
        file.mode.unwrap_or_default()
    };
    let message = AssistantMessage {
        tool_calls: file.tool_calls,
        stop_reason: file.stop_reason.unwrap_or_default(),
    };
    // The build's directory lives as long as the batch.
    let _dev = match &args.dev {
        Some(dir) => {
            let (build, staged) = super::dev::build_once(dir, args.tools.cache_dir.clone())?;
            args.tools.dev = Some(build);
            Some(staged)
        }
        None => None,
    };
    let audit_log = args.audit_log.as_deref();
    let mut session = args.tools.session_in_background(&cwd, mode, audit_log)?;
    // Installed plugins that were not in the cache compile in the background: the batch waits for them only
    // when it may reach them.
    let compiling = session.waits_for(&message).to_vec();
    if !compiling.is_empty() {
        tracing::info!(
            "the batch waits for the plugins compiling in the background: {}",
            names(&compiling)
        );
        finish_compiles(&compiling, "the batch needs");
        let waited: Vec<PathBuf> = compiling.iter().map(|d| d.path.clone()).collect();
        session = args.tools.session_again(&cwd, mode, audit_log, &waited)?;
    }
    let human = args.human || !args.json && std::io::stdout().is_terminal();
    let sink = StdoutSink {
        human,
        session: &session,
        out: Arc::default(),
    };

    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let cancel = CancellationToken::new();
        let on_interrupt = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                on_interrupt.cancel();
            }
        });
        let started = std::time::Instant::now();
        // With `--ask`, the plugins' questions (`ask`: forms, roots) are put on the terminal while the batch runs.
        let terminal: Arc<dyn toolwright::client::ClientInput> = Arc::new(super::ask::TerminalInput {
            cwd: session.options().cwd.clone(),
            turn: tokio::sync::Mutex::new(()),
        });
        let _asking: Vec<_> = match args.ask {
            true => message
                .tool_calls
                .iter()
                .map(|call| session.options().client.open(&call.id, terminal.clone()))
                .collect(),
            false => Vec::new(),
        };
        // The active tools, as pi's agent loop sees them: a call to any other tool is `Tool NAME not found`.
        // Nested calls' events go to the same stream.
        let mut outcome = session.run(&message, &sink, &cancel).await;
        // The batch's events are out before a question is.
        if args.ask {
            sink.out.write_out();
        }
        if args.ask
            && let Some(again) =
                super::ask::ask_on_terminal(&session, &message, &outcome, &sink, &cancel).await
        {
            outcome.terminate = again.terminate;
        }
        // The batch ends after every pi event: whether pi's agent loop would stop after it (every result voted
        // to terminate), then the line is out.
        sink.batch_end(outcome.terminate);
        sink.out.write_out();
        if args.timing {
            #[allow(clippy::print_stderr)]
            {
                eprintln!(
                    "{}",
                    serde_json::json!({
                        "type": "timing",
                        "batchMs": started.elapsed().as_secs_f64() * 1000.0,
                        "calls": message.tool_calls.len(),
                    })
                );
            }
        }
        // The results are out; what still compiles is finished, so the next start finds it in the cache (an
        // interrupt leaves it, and the next start compiles it again).
        let compiling: Vec<_> = session.toolset().deferred.clone();
        if compiling.iter().any(|d| !d.is_done()) {
            end_stdout();
            let (done, finished) = tokio::sync::oneshot::channel();
            std::thread::spawn(move || {
                finish_compiles(&compiling, "the next start needs");
                let _ = done.send(());
            });
            tokio::select! {
                _ = finished => {}
                () = cancel.cancelled() => {}
            }
        }
    });
    Ok(ExitCode::SUCCESS)
}

/// Point stdout at /dev/null (unless it is a terminal): a program reading the events sees their end now, not
/// when the process exits. Everything was written before.
fn end_stdout() {
    if std::io::stdout().is_terminal() {
        return;
    }
    let _ = std::io::stdout().flush();
    match std::fs::File::options().write(true).open("/dev/null") {
        Ok(null) => {
            if let Err(error) = rustix::stdio::dup2_stdout(&null) {
                tracing::debug!("cannot end stdout early: {error}");
            }
        }
        Err(error) => tracing::debug!("cannot open /dev/null: {error}"),
    }
}

/// The plugins' names, joined.
fn names<'a>(plugins: impl IntoIterator<Item = &'a toolwright::toolset::Deferred>) -> String {
    let names: Vec<&str> = plugins.into_iter().map(|d| d.name.as_str()).collect();
    names.join(", ")
}

/// Wait for those of `plugins` still compiling in the background, saying so on a terminal (`why`: who needs
/// them).
fn finish_compiles(plugins: &[toolwright::toolset::Deferred], why: &str) {
    let compiling: Vec<_> = plugins.iter().filter(|d| !d.is_done()).collect();
    if compiling.is_empty() {
        return;
    }
    let started = std::time::Instant::now();
    let terminal = std::io::stderr().is_terminal();
    if terminal {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "toolwright: compiling {} ({why} it; once, then cached)…",
                names(compiling.iter().copied())
            );
        }
    }
    for plugin in compiling {
        plugin.wait();
    }
    if terminal {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("toolwright: compiled in {:.1} s", started.elapsed().as_secs_f64());
        }
    }
}

/// Writes each event to stdout, at most [`WRITE_WITHIN`] after it happened.
struct StdoutSink<'a> {
    human: bool,
    /// The tools' own renderings come from the session's registry.
    session: &'a toolwright::Session,
    out: Arc<Output>,
}

/// How long an event line may wait to be written with the lines that follow it.
const WRITE_WITHIN: Duration = Duration::from_millis(1);
/// How many bytes of event lines are written at once, whatever their age.
const WRITE_AT: usize = 64 * 1024;

/// Event lines on their way to stdout. A batch of small calls makes four events per call, tens of thousands a
/// second: written one `write` each, they cost more than the calls. Lines gather here and go out together,
/// [`WRITE_WITHIN`] after the first of them waited (a task sleeps that long, then writes), or at once when
/// [`WRITE_AT`] bytes wait, always in order; [`Output::write_out`] writes what is left.
#[derive(Default)]
struct Output {
    /// The lines not yet written. Writes happen under this lock, so they keep the lines' order.
    pending: Mutex<Vec<u8>>,
    /// Whether a task will write the pending lines.
    scheduled: AtomicBool,
}

impl Output {
    fn push(self: &Arc<Self>, line: &str) {
        self.push_with(|pending| {
            pending.extend_from_slice(line.as_bytes());
            true
        });
    }

    /// Add the line `make` writes straight into the pending lines (no copy); a line it fails to make is dropped
    /// whole.
    fn push_with(self: &Arc<Self>, make: impl FnOnce(&mut Vec<u8>) -> bool) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let start = pending.len();
        if !make(&mut pending) {
            pending.truncate(start);
            return;
        }
        pending.push(b'\n');
        if pending.len() >= WRITE_AT {
            write(&mut pending);
            return;
        }
        drop(pending);
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            let out = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(WRITE_WITHIN).await;
                // Cleared first: a line pushed from here on is either written now or schedules the next write.
                out.scheduled.store(false, Ordering::Release);
                out.write_out();
            });
        }
    }

    /// Write every pending line now.
    fn write_out(&self) {
        write(&mut self.pending.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

fn write(pending: &mut Vec<u8>) {
    if pending.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    // A closed stdout (a reader that went away) must not stop the batch: results still matter on disk.
    let _ = out.write_all(pending).and_then(|()| out.flush());
    pending.clear();
}

impl StdoutSink<'_> {
    /// The batch's last line: `{"type":"batch_end","terminate":…}` (spec/cli-contract.md), or for people, a line
    /// when the loop would stop.
    fn batch_end(&self, terminate: bool) {
        if self.human {
            if terminate {
                self.out
                    .push("\x1b[2mevery result asks to end the run: the agent loop stops here\x1b[0m");
            }
        } else {
            let line = serde_json::json!({"type": "batch_end", "terminate": terminate});
            self.out.push(&line.to_string());
        }
    }
}

impl Drop for StdoutSink<'_> {
    fn drop(&mut self) {
        self.out.write_out();
    }
}

impl EventSink for StdoutSink<'_> {
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
        if self.human {
            if let Some(line) = render(&event, self.session) {
                self.out.push(&line);
            }
        } else {
            self.out
                .push_with(|pending| serde_json::to_writer(pending, &event).is_ok());
        }
        Box::pin(async {})
    }
}

/// One event for people: the call, its progress, and the result text — each as the tool renders it, when it
/// does (pi's `renderCall` / `renderResult`); nested calls indented by depth, and the nested-call record under the
/// result it belongs to.
fn render(event: &AgentEvent, session: &toolwright::Session) -> Option<String> {
    let indent = |id: &str| "  ".repeat(id.matches('/').count());
    match event {
        AgentEvent::ToolExecutionStart {
            tool_call_id,
            tool_name,
            args,
            ..
        } => {
            let pad = indent(tool_call_id);
            let shown = match session.render_call(tool_name, args) {
                Some(text) => text.replace('\n', &format!("\n{pad}  ")),
                None => args.to_string(),
            };
            Some(format!(
                "{pad}\x1b[1m▶ {tool_name}\x1b[0m \x1b[2m{tool_call_id}\x1b[0m {shown}"
            ))
        }
        AgentEvent::ToolExecutionUpdate { .. } | AgentEvent::MessageStart { .. } => None,
        AgentEvent::ToolExecutionEnd {
            tool_call_id,
            tool_name,
            result,
            is_error,
            duration_ms,
            ..
        } => {
            let (mark, colour) = if *is_error { ("✗", "31") } else { ("✓", "32") };
            let time = duration_ms.map(|ms| format!(" in {ms} ms")).unwrap_or_default();
            // The renderer sees the call's error flag on the result, whether the tool threw or flagged it.
            let mut seen = result.clone();
            if *is_error {
                seen.is_error = Some(true);
            }
            let text = session
                .render_result(tool_name, &seen, false, false)
                .unwrap_or_else(|| result.text_content());
            let pad = indent(tool_call_id);
            let body: String = text.lines().map(|l| format!("\n{pad}  {l}")).collect();
            Some(format!(
                "{pad}\x1b[{colour}m{mark} {tool_name}\x1b[0m \x1b[2m{tool_call_id}{time}\x1b[0m{body}"
            ))
        }
        AgentEvent::MessageEnd { message } => message.nested_calls.as_ref().map(|record| {
            let calls: Vec<String> = record
                .calls
                .iter()
                .map(|c| format!("{} {} ({})", c.id, c.name, c.status))
                .collect();
            let note = if record.complete {
                ""
            } else {
                ", record incomplete"
            };
            format!(
                "\x1b[2m  {} made {} nested call(s){note}: {}\x1b[0m",
                message.tool_call_id,
                record.calls.len(),
                calls.join(", ")
            )
        }),
    }
}
