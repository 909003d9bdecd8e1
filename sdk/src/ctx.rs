//! [`Ctx`]: a tool's only door to files, processes, partial updates, cancellation and logging.
//!
//! Natively the host implements it with cap-std directories for the granted roots and real processes; in a wasm
//! plugin the SDK implements it over WASI and the `process` import. Both refuse what the grants do not allow,
//! with an error that names the grant that would.

use std::io;
use std::time::Duration;

use crate::{LoadoutTool, ToolResult};

/// The text of a nested call made where no nested-call runner is bound (pi's text).
pub const NESTED_CALLS_UNAVAILABLE: &str = "Nested tool calls are not available in this context";

/// What [`Ctx::ask`] answers where there is no client to ask.
pub const NO_CLIENT_TO_ASK: &str = "There is no client to ask in this context";

/// A question for the client that made the call (an MCP client's input request), for [`Ctx::ask`].
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequest {
    /// The question's name among the call's questions: its answer comes back under it, and a call that runs
    /// again with the answers gets the same answer for the same key.
    pub key: String,
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// The method's parameters (MCP's), a JSON object.
    pub params: serde_json::Value,
}

impl InputRequest {
    /// A form the user fills in (`elicitation/create`): `message`, and `schema`, the JSON Schema of its fields (an
    /// object of flat properties). The answer is `{"action": "accept", "content": {…}}`, or `decline` / `cancel`.
    pub fn form(key: impl Into<String>, message: impl Into<String>, schema: serde_json::Value) -> Self {
        InputRequest {
            key: key.into(),
            method: "elicitation/create".into(),
            params: serde_json::json!({ "message": message.into(), "requestedSchema": schema }),
        }
    }

    /// A message from the client's model (`sampling/createMessage`), with MCP's parameters (`messages`,
    /// `maxTokens`, …). The user's policy must list the plugin in `[ask] sampling`.
    pub fn sample(key: impl Into<String>, params: serde_json::Value) -> Self {
        InputRequest {
            key: key.into(),
            method: "sampling/createMessage".into(),
            params,
        }
    }

    /// The client's roots (`roots/list`): the answer is `{"roots": [{"uri": "file:///…", "name": …}]}`.
    pub fn roots(key: impl Into<String>) -> Self {
        InputRequest {
            key: key.into(),
            method: "roots/list".into(),
            params: serde_json::json!({}),
        }
    }
}

/// The outcome of a nested tool call (pi's `AgentToolCallOutcome`, without the call).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallOutcome {
    /// The final result, after the hooks.
    pub result: ToolResult,
    /// The final error flag.
    pub is_error: bool,
    /// Wall time of the call's execution; absent when it never executed (not found, invalid, blocked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

impl CallOutcome {
    /// An error outcome with one text block, as pi makes for failures it catches.
    pub fn error(text: impl Into<String>) -> Self {
        CallOutcome {
            result: ToolResult::error(text),
            is_error: true,
            duration_ms: None,
        }
    }

    /// The text blocks of the result, joined with `\n`.
    pub fn text(&self) -> String {
        self.result.text_lines()
    }
}

/// How much a log line matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Fine detail.
    Debug,
    /// Normal progress.
    Info,
    /// Something unexpected that the tool survived.
    Warn,
    /// A failure.
    Error,
}

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only from [`Files::symlink_metadata`]).
    Symlink,
    /// Anything else (socket, device, fifo).
    Other,
}

/// The error for reading or writing a path that is neither a regular file nor a directory. pi would open a FIFO
/// and wait for a writer (or reader) without end, and read a device such as `/dev/zero` without end; the
/// built-ins refuse them instead, with this text natively and as wasm.
pub fn not_a_regular_file(path: &str, access: Access) -> io::Error {
    let verb = match access {
        Access::Read => "read",
        Access::Write => "written",
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "Not a regular file: {path} (pipes, sockets and devices are not {verb}: they can block without end)"
        ),
    )
}

/// Metadata of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata {
    /// What it is.
    pub kind: FileKind,
    /// Its size in bytes.
    pub len: u64,
}

impl Metadata {
    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Dir
    }

    /// Whether it is a regular file.
    pub fn is_file(&self) -> bool {
        self.kind == FileKind::File
    }
}

/// The access a file operation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading.
    Read,
    /// Creating, writing or deleting.
    Write,
}

/// File operations on absolute paths, confined to the tool's grants.
pub trait Files {
    /// The whole file.
    fn read(&self, path: &str) -> io::Result<Vec<u8>>;
    /// At most `max` bytes from the start of the file.
    fn read_prefix(&self, path: &str, max: usize) -> io::Result<Vec<u8>>;
    /// Replace (or create) the file with `bytes`.
    fn write(&self, path: &str, bytes: &[u8]) -> io::Result<()>;
    /// Create the directory and its missing parents.
    fn create_dir_all(&self, path: &str) -> io::Result<()>;
    /// Metadata, following symlinks.
    fn metadata(&self, path: &str) -> io::Result<Metadata>;
    /// Metadata of the path itself.
    fn symlink_metadata(&self, path: &str) -> io::Result<Metadata>;
    /// The names of a directory's entries, in no particular order.
    fn read_dir(&self, path: &str) -> io::Result<Vec<String>>;
    /// Check that `path` may be accessed as `access`, and return the path to hand to libraries that walk the
    /// filesystem themselves (ripgrep's walker). Refused paths give the same error every other operation gives.
    fn check(&self, path: &str, access: Access) -> io::Result<String>;
}

/// A program to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Command {
    /// The program: an absolute path or a name looked up on `PATH`.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its working directory (absolute).
    pub cwd: Option<String>,
    /// Extra environment variables, on top of what the grants pass through.
    pub env: Vec<(String, String)>,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// The exit code, when it exited normally.
    pub code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
}

/// What a running process did next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessEvent {
    /// Bytes of output, stdout and stderr merged in arrival order.
    Output(Vec<u8>),
    /// It exited and its pipes are drained (or idle for 100 ms).
    Exited(ExitStatus),
    /// Nothing happened within the timeout.
    Idle,
}

/// A process started through [`Ctx::spawn`]. Dropping it kills the whole process group.
pub trait Process: Send {
    /// Wait at most `timeout` for the next event.
    fn next(&mut self, timeout: Duration) -> io::Result<ProcessEvent>;
    /// Kill the process and everything it started (its process group).
    fn kill(&mut self);
}

/// A temporary file the host created for the tool (bash's full output).
pub struct TempFile {
    /// Its absolute path, as reported to the model.
    pub path: String,
    /// Where to write.
    pub writer: Box<dyn io::Write + Send>,
}

impl std::fmt::Debug for TempFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Everything a tool may reach while it runs.
pub trait Ctx {
    /// The workspace directory (absolute); relative paths resolve against it.
    fn cwd(&self) -> &str;
    /// The user's home directory, for `~` in paths.
    fn home(&self) -> Option<String>;
    /// Whether the call was cancelled; long-running tools check it often.
    fn is_cancelled(&self) -> bool;
    /// Report a partial result.
    fn update(&self, partial: ToolResult);
    /// Write a line to the host's log (never to the protocol stream).
    fn log(&self, level: LogLevel, message: &str);
    /// The files the tool may touch.
    fn files(&self) -> &dyn Files;
    /// Start a program, if the grants allow it.
    fn spawn(&self, command: &Command) -> io::Result<Box<dyn Process>>;
    /// A fresh temporary file named `<prefix>-<16 hex digits><suffix>` in the host's temp directory.
    fn temp_file(&self, prefix: &str, suffix: &str) -> io::Result<TempFile>;
    /// The environment variables the tool may see (none unless granted).
    fn env(&self) -> Vec<(String, String)>;

    /// Run another tool as a nested call (pi's `ctx.executeTool`): the full pipeline (lookup among the callable
    /// tools, argument shim, validation, hooks, execution), an id `<this call's id>/<n>`, events with this call as
    /// parent, and a record on this call's result message. Never fails: every failure is an error outcome.
    fn call_tool(&self, name: &str, arguments: &serde_json::Value) -> CallOutcome {
        let _ = (name, arguments);
        CallOutcome::error(NESTED_CALLS_UNAVAILABLE)
    }

    /// Run several nested calls concurrently (ids in list order) and wait for all of them; the outcomes are in
    /// call order. Calls to sequential tools still wait for each other.
    fn call_tools(&self, calls: &[(String, serde_json::Value)]) -> Vec<CallOutcome> {
        calls
            .iter()
            .map(|(name, args)| self.call_tool(name, args))
            .collect()
    }

    /// The tools nested calls can reach right now (pi's `ctx.tools`): the active `direct` tools and every
    /// registered `codemode` or `deferred` tool, with their parameters and output schemas.
    fn tools(&self) -> Vec<LoadoutTool> {
        Vec::new()
    }

    /// Ask the MCP client that made the call: the answers (the client's results, as JSON) in the questions'
    /// order, or why nobody could answer. A 2026-07-28 client answers with the call's next round: the call stops
    /// at its first unanswered question and runs again from the start with every answer so far, so ask before
    /// changing anything (`wit/plugin.wit`'s `ask` says the rest).
    fn ask(&self, questions: &[InputRequest]) -> Result<Vec<serde_json::Value>, String> {
        let _ = questions;
        Err(NO_CLIENT_TO_ASK.into())
    }

    /// The methods [`Ctx::ask`] can put to the client (`elicitation/create`, `sampling/createMessage`,
    /// `roots/list`): those the client declared and this plugin may use; empty when there is nobody to ask.
    fn client_answers(&self) -> Vec<String> {
        Vec::new()
    }
}
