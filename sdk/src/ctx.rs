//! [`Ctx`]: a tool's only door to files, processes, partial updates, cancellation and logging.
//!
//! Natively the host implements it with cap-std directories for the granted roots and real processes; in a wasm
//! plugin the SDK implements it over WASI and the `process` import. Both refuse what the grants do not allow,
//! with an error that names the grant that would.

use std::io;
use std::time::Duration;

use crate::ToolResult;

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
}
