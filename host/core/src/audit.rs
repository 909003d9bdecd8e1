//! The audit log: one JSON line per tool call and per nested call, saying what ran, under which grants, who
//! allowed, blocked or rewrote it, what it started and connected to, and how it ended.
//!
//! The pipeline writes an [`AuditRecord`] to its [`AuditSink`] when a call settles (with
//! [`Pipeline::with_audit`](crate::Pipeline::with_audit)); [`AuditLog`] is the sink that appends them to a
//! file, one `write` per line on a file opened for appending, so a crash loses at most the calls in progress.
//! What a call did is collected while it runs:
//!
//! - the **decision path** ([`Step`]s), from a [`Trail`] the hooks see in their context: a
//!   [`HookChain`](crate::hooks::HookChain) records each named hook's verdict, a handler-plugin hook each
//!   plugin's, the pipeline its own refusals (unknown tool, invalid arguments);
//! - the **activity** ([`Spawn`]s and [`Connection`]s), which the tool's runtime reports through the call's
//!   [`CallSink`](crate::tool::CallSink) as it checks each start and connection against the grants.
//!
//! Environment values never reach the log: grants name variables, not values, and every string that is
//! written (arguments of a started program, error texts, reasons) has the values of the variables the tool was
//! given replaced by `[env NAME]` (see [`Origin::secrets`]).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use toolwright_sdk::js;

/// How many spawns, and how many connections, one record keeps; later ones are counted in
/// [`AuditRecord::omitted`].
pub const MAX_ACTIVITY: usize = 64;
/// Bytes kept of each argument of a started program (cut at a character boundary, marked with `…`).
pub const MAX_ARG_BYTES: usize = 1024;
/// Arguments kept of a started program.
pub const MAX_ARGS: usize = 64;
/// Characters kept of an error text or a reason.
pub const MAX_TEXT_CHARS: usize = 500;
/// Bytes of a string kept while a call runs: redaction sees this much (so a secret that straddles the final
/// cut is still replaced whole), and the record is cut to its limits afterwards.
const COLLECTED_BYTES: usize = 64 * 1024;

/// What ran a tool: the source written with each of its calls. Its `Debug` names the secrets, never their
/// values.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Origin {
    /// `builtin`, `plugin`, `embedder` or `mcp`.
    pub kind: OriginKind,
    /// `native` (the host's own code) or `wasm` (a sandboxed component); written as `runtime`.
    #[serde(rename = "runtime")]
    pub machine: Machine,
    /// The plugin's name, for a plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The server's configured name, for an MCP server's tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The SHA-256 of the component's file, lower-case hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The grants in force, one capability each (`read /work`, `spawn git`, `env HOME`); `None` for code with
    /// the host's own authority (native built-ins and embedder tools, as in pi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grants: Option<Vec<String>>,
    /// The environment the tool was given, by name: values to keep out of the log. Never written.
    #[serde(skip)]
    pub secrets: Arc<Vec<(String, String)>>,
}

/// Where a tool's code comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OriginKind {
    /// One of the built-in tools.
    #[default]
    Builtin,
    /// A plugin.
    Plugin,
    /// A tool of the embedding application.
    Embedder,
    /// A tool of an MCP server (its process runs in the host's process sandbox, or it is reached over HTTP).
    Mcp,
}

/// The machine a tool's code runs on: the host's own, or wasm's in a sandbox.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Machine {
    /// In the host process.
    #[default]
    Native,
    /// In a wasm sandbox.
    Wasm,
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secrets: Vec<&str> = self.secrets.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Origin")
            .field("kind", &self.kind)
            .field("machine", &self.machine)
            .field("plugin", &self.plugin)
            .field("server", &self.server)
            .field("sha256", &self.sha256)
            .field("grants", &self.grants)
            .field("secrets", &secrets)
            .finish()
    }
}

impl Origin {
    /// `text` with the value of every variable in [`Origin::secrets`] replaced by `[env NAME]`, the longest
    /// values first (so that a value inside another is not left half shown). Values shorter than four bytes
    /// are left: they would mask ordinary text, and they are no secret worth the name.
    pub fn redact(&self, text: &str) -> String {
        let mut secrets: Vec<&(String, String)> = self.secrets.iter().filter(|(_, v)| v.len() >= 4).collect();
        secrets.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
        let mut text = text.to_owned();
        for (name, value) in secrets {
            if text.contains(value.as_str()) {
                text = text.replace(value.as_str(), &format!("[env {name}]"));
            }
        }
        text
    }

    /// This origin without its secrets (what a record keeps).
    fn public(&self) -> Origin {
        Origin {
            secrets: Arc::default(),
            ..self.clone()
        }
    }
}

/// The variables of `env` whose names say they hold a secret (`*TOKEN*`, `*SECRET*`, `*KEY*`, `*PASS*`,
/// `*AUTH*`, `*CREDENTIAL*`, `*COOKIE*`, `*PRIVATE*`): what the records of code with the host's whole
/// environment (native built-ins, wasm built-ins) keep out. A plugin's records keep out every variable it was
/// granted.
pub fn secret_looking(env: &[(String, String)]) -> Vec<(String, String)> {
    const MARKS: [&str; 8] = [
        "TOKEN",
        "SECRET",
        "KEY",
        "PASS",
        "AUTH",
        "CREDENTIAL",
        "COOKIE",
        "PRIVATE",
    ];
    env.iter()
        .filter(|(name, _)| {
            let upper = name.to_ascii_uppercase();
            MARKS.iter().any(|m| upper.contains(m))
        })
        .cloned()
        .collect()
}

/// One step of a call's decision path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// Who decided: `lookup`, `validation`, `prepareArguments`, `embedder hook 1`, `handler plugin guard`,
    /// `image normalisation`, `before_tool_call hook`…
    pub by: String,
    /// When: before execution (`before`, pi's `tool_call`) or after it (`after`, pi's `tool_result`), or in the
    /// pipeline's own checks (`preflight`).
    pub stage: Stage,
    /// What it decided.
    pub verdict: Verdict,
    /// Why (a block's reason, a failure's message), as the model saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Step {
    /// A step with no reason.
    pub fn new(by: impl Into<String>, stage: Stage, verdict: Verdict) -> Self {
        Step {
            by: by.into(),
            stage,
            verdict,
            reason: None,
        }
    }

    /// This step with a reason (the record keeps its first [`MAX_TEXT_CHARS`] characters).
    pub fn with_reason(mut self, reason: impl AsRef<str>) -> Self {
        self.reason = Some(cut(reason.as_ref(), COLLECTED_BYTES));
        self
    }
}

/// When a [`Step`] was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// The pipeline's own checks: lookup, argument shim, validation, abort.
    Preflight,
    /// A `before_tool_call` hook (pi's `tool_call` handlers).
    Before,
    /// An `after_tool_call` hook (pi's `tool_result` handlers).
    After,
    /// The user, asked for a grant the call was refused ([`crate::ask`]).
    Asked,
}

/// What a [`Step`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Let the call run unchanged.
    Allowed,
    /// Let it run with other arguments.
    Rewrote,
    /// Stopped it; the model got the reason.
    Blocked,
    /// The pipeline refused it (unknown tool, invalid arguments, aborted batch).
    Refused,
    /// Changed the result.
    Changed,
    /// Failed: before execution this blocks the call, after it the result becomes an error.
    Failed,
}

/// A program a call started, or tried to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spawn {
    /// The program, as the tool named it.
    pub program: String,
    /// Its arguments (at most [`MAX_ARGS`], each at most [`MAX_ARG_BYTES`]).
    pub argv: Vec<String>,
    /// Whether the grants let it start.
    pub allowed: bool,
    /// Why it was refused, or (allowed) why it could not be started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who started it, when not the tool itself (`handler plugin NAME`, deciding on the call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A network connection a call opened, or tried to (a datagram sent counts as one per address).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    /// `IP:PORT`.
    pub address: String,
    /// Whether the grants let it through.
    pub allowed: bool,
    /// Who connected, when not the tool itself (`handler plugin NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// A question a call's plugin put to the MCP client that made the call (`ask`, [`crate::client`]): what was
/// asked and what came of it, never the answer's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientQuestion {
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// The plugin's key for it.
    pub key: String,
    /// What came of it: a form's action (`accept`, `decline`, `cancel`), `answered`, `asked` (put to a
    /// 2026-07-28 client, answered with the call's next round), or `refused: WHY`.
    pub outcome: String,
}

/// What a call did while it ran: programs started and connections opened, as its runtime checked them, and the
/// questions it put to its client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Activity {
    /// Programs started or refused, in order.
    pub spawns: Vec<Spawn>,
    /// Connections opened or refused, each address once per verdict.
    pub connections: Vec<Connection>,
    /// Questions put to the client, in order.
    pub questions: Vec<ClientQuestion>,
    /// Entries beyond [`MAX_ACTIVITY`], counted.
    pub omitted: u64,
}

impl Activity {
    /// Record a start (or a refusal, with its reason).
    pub fn spawned(&mut self, program: &str, argv: &[String], refusal: Option<&str>) {
        if self.spawns.len() >= MAX_ACTIVITY {
            self.omitted += 1;
            return;
        }
        let mut kept: Vec<String> = argv
            .iter()
            .take(MAX_ARGS)
            .map(|a| cut(a, COLLECTED_BYTES))
            .collect();
        if argv.len() > MAX_ARGS {
            kept.push(format!("… {} more", argv.len() - MAX_ARGS));
        }
        self.spawns.push(Spawn {
            program: cut(program, COLLECTED_BYTES),
            argv: kept,
            allowed: refusal.is_none(),
            reason: refusal.map(|r| cut(r, COLLECTED_BYTES)),
            by: None,
        });
    }

    /// Record a start the grants allowed that failed (`error` says why).
    pub fn spawn_failed(&mut self, program: &str, argv: &[String], error: &str) {
        let before = self.spawns.len();
        self.spawned(program, argv, Some(error));
        if self.spawns.len() > before
            && let Some(last) = self.spawns.last_mut()
        {
            last.allowed = true;
        }
    }

    /// Record a connection to `address` (or its refusal).
    pub fn connected(&mut self, address: String, allowed: bool) {
        if self
            .connections
            .iter()
            .any(|c| c.address == address && c.allowed == allowed)
        {
            return;
        }
        if self.connections.len() >= MAX_ACTIVITY {
            self.omitted += 1;
            return;
        }
        self.connections.push(Connection {
            address,
            allowed,
            by: None,
        });
    }

    /// Record a question put to the client and what came of it.
    pub fn asked(&mut self, method: &str, key: &str, outcome: &str) {
        if self.questions.len() >= MAX_ACTIVITY {
            self.omitted += 1;
            return;
        }
        self.questions.push(ClientQuestion {
            method: cut(method, MAX_ARG_BYTES),
            key: cut(key, MAX_ARG_BYTES),
            outcome: cut(outcome, COLLECTED_BYTES),
        });
    }

    fn append(&mut self, other: Activity) {
        self.omitted += other.omitted;
        for question in other.questions {
            if self.questions.len() >= MAX_ACTIVITY {
                self.omitted += 1;
            } else {
                self.questions.push(question);
            }
        }
        for spawn in other.spawns {
            if self.spawns.len() >= MAX_ACTIVITY {
                self.omitted += 1;
            } else {
                self.spawns.push(spawn);
            }
        }
        for c in other.connections {
            if self.connections.contains(&c) {
                continue;
            }
            if self.connections.len() >= MAX_ACTIVITY {
                self.omitted += 1;
            } else {
                self.connections.push(c);
            }
        }
    }
}

/// `text` cut to at most `max` bytes at a character boundary, marked with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The decision path and activity of one call, collected while it runs. Cheap to clone; a trail that is off
/// (no audit sink) records nothing and costs nothing.
#[derive(Debug, Clone, Default)]
pub struct Trail(Option<Arc<Mutex<TrailData>>>);

#[derive(Debug, Default)]
struct TrailData {
    steps: Vec<Step>,
    activity: Activity,
    /// Values to keep out of the record besides the tool's own (a handler plugin's granted environment).
    secrets: Vec<(String, String)>,
}

impl Trail {
    /// A trail that records nothing.
    pub fn off() -> Self {
        Trail(None)
    }

    /// A trail that records.
    pub fn on() -> Self {
        Trail(Some(Arc::default()))
    }

    /// Whether it records: a hook may skip building steps nobody reads.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    fn data(&self) -> Option<std::sync::MutexGuard<'_, TrailData>> {
        self.0
            .as_ref()
            .map(|d| d.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Add a step to the decision path.
    pub fn step(&self, step: Step) {
        if let Some(mut data) = self.data() {
            data.steps.push(step);
        }
    }

    /// How many steps were recorded: a chain compares it before and after a hook, to name the hooks that did
    /// not record steps of their own.
    pub fn steps_len(&self) -> usize {
        self.data().map_or(0, |d| d.steps.len())
    }

    /// Add what a call did while it ran.
    pub fn add_activity(&self, activity: Activity) {
        if let Some(mut data) = self.data() {
            data.activity.append(activity);
        }
    }

    /// Add what `by` (a handler plugin deciding on the call) did, marked as its own.
    pub fn add_activity_by(&self, mut activity: Activity, by: &str) {
        for spawn in &mut activity.spawns {
            spawn.by = Some(by.to_owned());
        }
        for connection in &mut activity.connections {
            connection.by = Some(by.to_owned());
        }
        self.add_activity(activity);
    }

    /// Keep these values out of the record too (the environment of a handler plugin that decided on the call,
    /// whose reasons and starts the record holds).
    pub fn add_secrets(&self, secrets: &[(String, String)]) {
        if let Some(mut data) = self.data() {
            data.secrets.extend(secrets.iter().cloned());
        }
    }

    fn take(&self) -> (Vec<Step>, Activity, Vec<(String, String)>) {
        match self.data() {
            Some(mut data) => (
                std::mem::take(&mut data.steps),
                std::mem::take(&mut data.activity),
                std::mem::take(&mut data.secrets),
            ),
            None => Default::default(),
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A result.
    Ok,
    /// An error result: the tool's, a hook's block, the pipeline's refusal.
    Error,
    /// The host stopped it at a limit: its deadline, memory, fuel or result size.
    Limit,
    /// Cancelled before or while it ran.
    Cancelled,
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    /// The hex SHA-256 of the log's previous line (without its newline), or [`GENESIS`] for a log's first
    /// record: the chain [`verify`] checks. Set by [`AuditLog`] as it appends; `None` in a record not yet written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
    /// When the call started, RFC 3339 in UTC with milliseconds.
    pub time: String,
    /// The call's id.
    pub id: String,
    /// The calling tool's call id, for a nested call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The tool's name, as called.
    pub tool: String,
    /// Whose authority the call ran under, when a plugin made it (`the plugin NAME`); absent: the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<String>,
    /// What runs the tool (absent when no tool has the name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Origin>,
    /// Who allowed, blocked or rewrote the call, and who changed its result, in order.
    pub decision: Vec<Step>,
    /// Programs started or refused.
    pub spawns: Vec<Spawn>,
    /// Connections opened or refused.
    pub connections: Vec<Connection>,
    /// Questions the call's plugin put to the MCP client (what and what came of it, not the answers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<ClientQuestion>,
    /// Spawns, connections and questions left out beyond [`MAX_ACTIVITY`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: u64,
    /// Milliseconds from the start of preflight to the final result.
    pub duration_ms: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// The error text the model got (its first [`MAX_TEXT_CHARS`] characters), for an outcome other than `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What the pipeline knows when a call settles: the rest of an [`AuditRecord`].
#[derive(Debug)]
pub struct Settled<'a> {
    /// The call's start, for [`AuditRecord::time`].
    pub started: std::time::SystemTime,
    /// Milliseconds it took.
    pub duration_ms: u64,
    /// The call.
    pub call: &'a crate::types::ToolCall,
    /// The calling tool's call id.
    pub parent: Option<&'a str>,
    /// Whose authority the call ran under, when a plugin made it.
    pub authority: Option<&'a str>,
    /// What runs the tool, when one has the name.
    pub origin: Option<&'a Origin>,
    /// How it ended.
    pub outcome: Outcome,
    /// The final error text, for an outcome other than `ok`.
    pub error: Option<&'a str>,
}

impl AuditRecord {
    /// The record of a settled call, with the steps and activity of its `trail`, every written string redacted
    /// by the tool's origin.
    pub fn settle(settled: Settled<'_>, trail: &Trail) -> AuditRecord {
        let (mut decision, activity, extra) = trail.take();
        let mut spawns = activity.spawns;
        // Redacted whole, then cut: a secret that straddles a cut is never left half shown.
        let mut redacting = settled.origin.cloned().unwrap_or_default();
        if !extra.is_empty() {
            let mut all = redacting.secrets.as_ref().clone();
            all.extend(extra);
            redacting.secrets = Arc::new(all);
        }
        let origin = &redacting;
        let text = |t: &str| js::utf16_prefix(&origin.redact(t), MAX_TEXT_CHARS).to_owned();
        let arg = |a: &str| cut(&origin.redact(a), MAX_ARG_BYTES);
        for spawn in &mut spawns {
            spawn.program = arg(&spawn.program);
            spawn.argv = spawn.argv.iter().map(|a| arg(a)).collect();
            spawn.reason = spawn.reason.as_deref().map(text);
        }
        for step in &mut decision {
            step.reason = step.reason.as_deref().map(text);
        }
        let error = settled.error.map(text);
        AuditRecord {
            prev: None,
            time: rfc3339(settled.started),
            id: settled.call.id.clone(),
            parent: settled.parent.map(str::to_owned),
            tool: settled.call.name.clone(),
            authority: settled.authority.map(str::to_owned),
            source: settled.origin.map(Origin::public),
            decision,
            spawns,
            connections: activity.connections,
            questions: activity
                .questions
                .into_iter()
                .map(|mut q| {
                    q.outcome = text(&q.outcome);
                    q
                })
                .collect(),
            omitted: activity.omitted,
            duration_ms: settled.duration_ms,
            outcome: settled.outcome,
            error,
        }
    }
}

/// `time` as RFC 3339 in UTC with milliseconds (`2026-12-01T23:04:05.123Z`).
pub fn rfc3339(time: std::time::SystemTime) -> String {
    let time = time::OffsetDateTime::from(time);
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    time.format(&format).unwrap_or_default()
}

/// Where the pipeline writes [`AuditRecord`]s. Called once per settled call, from the task that ran it: keep it
/// short (a write, not a round trip).
pub trait AuditSink: Send + Sync {
    /// Write one record.
    fn record(&self, record: &AuditRecord);
}

/// Every record to each sink in turn.
impl AuditSink for Vec<Arc<dyn AuditSink>> {
    fn record(&self, record: &AuditRecord) {
        for sink in self {
            sink.record(record);
        }
    }
}

/// An [`AuditSink`] keeping the records in memory, for tests and inspection.
#[derive(Debug, Default)]
pub struct AuditMemory(Mutex<Vec<AuditRecord>>);

impl AuditMemory {
    /// The records so far.
    pub fn records(&self) -> Vec<AuditRecord> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl AuditSink for AuditMemory {
    fn record(&self, record: &AuditRecord) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record.clone());
    }
}

/// The `prev` of a log's first record: where every chain starts.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The hex SHA-256 of one line of the log, without its newline: the next record's `prev`.
pub fn line_hash(line: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(line)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The audit log file: one JSON line per record, each chained to the line before by its `prev` (the hash of
/// that line), appended with a single `write` each, created readable by its owner only.
///
/// One writer at a time: the records of one process pass a mutex, and every append holds an exclusive `flock`
/// on the file, so that several processes logging to one file (an `mcp` server and an `exec`) keep one chain.
/// The hash of the last line is kept with the file length it was taken at; when the file has grown since
/// (another process wrote), the last line is read again under the lock.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    file: Mutex<Chained>,
    /// Whether a failed write was already reported (once is enough; the calls go on).
    reported: std::sync::atomic::AtomicBool,
}

/// The open log and where its chain ends.
#[derive(Debug)]
struct Chained {
    file: File,
    /// (the file's length, the hash of its last line) as of this process's last append.
    head: Option<(u64, String)>,
}

impl AuditLog {
    /// Open (or create, with its directory) the log at `path` for appending.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<AuditLog> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = path.as_ref();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)?;
        Ok(AuditLog {
            path: path.to_owned(),
            file: Mutex::new(Chained { file, head: None }),
            reported: Default::default(),
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append `record` chained to the last line, under the writer lock.
    fn append(&self, record: &AuditRecord) -> std::io::Result<()> {
        let body = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        let mut chained = self.file.lock().unwrap_or_else(|e| e.into_inner());
        // A file system without `flock` still gets the record: only writers in other processes could then
        // interleave their links (which `--verify` would show), never lose a line.
        let locked = chained.file.lock().is_ok();
        let written = chained.append(&body);
        if locked {
            chained.file.unlock()?;
        }
        written
    }
}

impl Chained {
    /// Append the record serialised as `body` (a JSON object, without `prev`), with the file locked.
    fn append(&mut self, body: &[u8]) -> std::io::Result<()> {
        let len = self.file.metadata()?.len();
        let (mut line, prev) = match &self.head {
            Some((at, hash)) if *at == len => (Vec::new(), hash.clone()),
            _ => self.last_line_hash(len)?,
        };
        // `{"prev":"…",` and the rest of the record: `prev` first, as the struct declares it.
        let start = line.len();
        line.extend_from_slice(b"{\"prev\":\"");
        line.extend_from_slice(prev.as_bytes());
        line.extend_from_slice(b"\"");
        match body.get(1..) {
            Some(rest) if rest != b"}" => {
                line.push(b',');
                line.extend_from_slice(rest);
            }
            _ => line.push(b'}'),
        }
        let hash = line_hash(&line[start..]);
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.head = Some((len + line.len() as u64, hash));
        Ok(())
    }

    /// The hash of the file's last line (the file is `len` bytes long), or [`GENESIS`] for an empty file; and,
    /// when the file does not end in a newline (a write cut short), the newline that ends that line first.
    fn last_line_hash(&mut self, len: u64) -> std::io::Result<(Vec<u8>, String)> {
        use std::io::{Read, Seek, SeekFrom};
        if len == 0 {
            return Ok((Vec::new(), GENESIS.to_owned()));
        }
        // Read back from the end until the newline before the last line (a record is at most a few MiB).
        let mut tail = Vec::new();
        let mut at = len;
        let mut chunk = vec![0; 64 * 1024];
        let start = loop {
            let from = at.saturating_sub(chunk.len() as u64);
            let n = (at - from) as usize;
            self.file.seek(SeekFrom::Start(from))?;
            self.file.read_exact(&mut chunk[..n])?;
            tail.splice(0..0, chunk[..n].iter().copied());
            at = from;
            let body = tail.strip_suffix(b"\n").unwrap_or(&tail);
            if let Some(i) = body.iter().rposition(|b| *b == b'\n') {
                break i + 1;
            }
            if at == 0 {
                break 0;
            }
        };
        let ends_line = tail.last() == Some(&b'\n');
        let last = &tail[start..tail.len() - usize::from(ends_line)];
        let newline = if ends_line { Vec::new() } else { b"\n".to_vec() };
        Ok((newline, line_hash(last)))
    }
}

impl AuditSink for AuditLog {
    fn record(&self, record: &AuditRecord) {
        if let Err(e) = self.append(record)
            && !self.reported.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::error!(
                "cannot write the audit log {}: {e} (calls go on; later failures are not reported)",
                self.path.display()
            );
        }
    }
}

/// Where a log's chain breaks: the first line that is not where the chain says it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct Broken {
    /// The line (from 1) the report is about.
    pub line: usize,
    /// What is wrong, in words.
    pub what: String,
}

/// Check the chain of the log read from `lines` (its lines without their newlines): the number of records and
/// the hash of the last line (the head to keep elsewhere, to detect a log rewritten from some record on), or the
/// first place it breaks. Each record's `prev` must be the hash of the line before it ([`GENESIS`] for the
/// first): a record edited, inserted or removed breaks it at that place. The records after the last one cannot
/// be missed this way: compare the head with one kept elsewhere.
pub fn verify(lines: impl IntoIterator<Item = Vec<u8>>) -> Result<(usize, String), Broken> {
    let prev_of = |line: &[u8]| -> Option<String> {
        let value: serde_json::Value = serde_json::from_slice(line).ok()?;
        value.get("prev")?.as_str().map(str::to_owned)
    };
    let lines: Vec<Vec<u8>> = lines.into_iter().collect();
    let mut expected = GENESIS.to_owned();
    for (i, line) in lines.iter().enumerate() {
        let n = i + 1;
        let broken = |what: String| Err(Broken { line: n, what });
        if serde_json::from_slice::<AuditRecord>(line).is_err() {
            return broken("not an audit record (edited, or a line cut short)".into());
        }
        let Some(prev) = prev_of(line) else {
            return broken("the record has no `prev`: it was written outside the chain, or edited".into());
        };
        if prev == expected {
            expected = line_hash(line);
            continue;
        }
        if n == 1 {
            return broken(
                "the first record does not start the chain: records were removed before it, or it was edited"
                    .into(),
            );
        }
        // An inserted line: the one after it chains to the one before it.
        if lines.get(n).and_then(|next| prev_of(next)) == Some(expected.clone()) {
            return broken(format!(
                "the record was inserted (line {} chains to line {})",
                n + 1,
                n - 1
            ));
        }
        return Err(Broken {
            line: n - 1,
            what: format!(
                "the record was edited, or records were removed after it (line {n} does not chain to it)"
            ),
        });
    }
    Ok((lines.len(), expected))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolCall;
    use serde_json::json;

    #[test]
    fn a_record_is_one_line_with_secrets_replaced() {
        let trail = Trail::on();
        trail.step(
            Step::new("handler plugin guard", Stage::Before, Verdict::Blocked)
                .with_reason("no: s3cr3t-token"),
        );
        let mut activity = Activity::default();
        activity.spawned("curl", &["-H".into(), "Authorization: s3cr3t-token".into()], None);
        activity.connected("127.0.0.1:80".into(), true);
        activity.connected("127.0.0.1:80".into(), true);
        trail.add_activity(activity);
        let origin = Origin {
            kind: OriginKind::Plugin,
            machine: Machine::Wasm,
            plugin: Some("probe".into()),
            server: None,
            sha256: Some("ab".repeat(32)),
            grants: Some(vec!["env TOKEN".into()]),
            secrets: Arc::new(vec![
                ("TOKEN".into(), "s3cr3t-token".into()),
                ("X".into(), "ab".into()),
            ]),
        };
        let call = ToolCall::new("c1", "probe", json!({}));
        let record = AuditRecord::settle(
            Settled {
                started: std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_764_630_245_123),
                duration_ms: 3,
                call: &call,
                parent: None,
                authority: None,
                origin: Some(&origin),
                outcome: Outcome::Error,
                error: Some("no: s3cr3t-token"),
            },
            &trail,
        );
        let line = serde_json::to_string(&record).unwrap();
        assert!(!line.contains("s3cr3t"), "{line}");
        assert!(!line.contains("secrets"), "{line}");
        assert_eq!(record.time, "2025-12-01T23:04:05.123Z");
        assert_eq!(record.spawns[0].argv[1], "Authorization: [env TOKEN]");
        assert_eq!(record.connections.len(), 1);
        assert_eq!(record.error.as_deref(), Some("no: [env TOKEN]"));
        assert_eq!(record.decision[0].reason.as_deref(), Some("no: [env TOKEN]"));
        let back: AuditRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(back.source.unwrap().plugin.as_deref(), Some("probe"));
        // A short value masks nothing.
        assert_eq!(origin.redact("ab ab"), "ab ab");
    }

    #[test]
    fn a_handlers_activity_and_secrets_reach_the_record_of_the_call_it_decides_on() {
        let trail = Trail::on();
        let sink = crate::tool::CallSink::for_trail(trail.clone(), "handler plugin g");
        assert!(!sink.is_connected(), "nobody reads its partial results");
        sink.update(crate::types::ToolResult::text("dropped"));
        sink.log(crate::tool::LogLevel::Info, "dropped");
        trail.add_secrets(&[("G_TOKEN".into(), "handler-secret".into())]);
        sink.spawned(
            "curl",
            &["-H".into(), "handler-secret".into()],
            Some("not granted"),
        );
        sink.connected("127.0.0.1:9".parse().unwrap(), false);
        let call = ToolCall::new("c1", "ls", json!({}));
        let settled = Settled {
            started: std::time::SystemTime::now(),
            duration_ms: 0,
            call: &call,
            parent: None,
            authority: None,
            origin: None,
            outcome: Outcome::Ok,
            error: None,
        };
        let record = AuditRecord::settle(settled, &trail);
        assert_eq!(record.spawns[0].by.as_deref(), Some("handler plugin g"));
        assert_eq!(record.spawns[0].argv[1], "[env G_TOKEN]");
        assert_eq!(record.connections[0].by.as_deref(), Some("handler plugin g"));
        assert!(!serde_json::to_string(&record).unwrap().contains("handler-secret"));
        // Off: nothing is recorded, and the sink is the discarding one.
        assert!(!crate::tool::CallSink::for_trail(Trail::off(), "x").is_connected());
    }

    #[test]
    fn activity_is_bounded() {
        let mut activity = Activity::default();
        let argv: Vec<String> = (0..100).map(|i| format!("{i}{}", "x".repeat(2000))).collect();
        for _ in 0..MAX_ACTIVITY + 3 {
            activity.spawned("p", &argv, Some("not granted"));
        }
        assert_eq!(activity.spawns.len(), MAX_ACTIVITY);
        assert_eq!(activity.omitted, 3);
        let first = &activity.spawns[0];
        assert_eq!(first.argv.len(), MAX_ARGS + 1);
        assert_eq!(first.argv[MAX_ARGS], "… 36 more");
        assert!(first.argv[0].len() <= COLLECTED_BYTES + '…'.len_utf8());
        assert!(!first.allowed);
    }

    #[test]
    fn the_log_appends_one_line_per_record_and_a_trail_that_is_off_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let call = ToolCall::new("c1", "ls", json!({}));
        let off = Trail::off();
        off.step(Step::new("x", Stage::Before, Verdict::Allowed));
        assert_eq!(off.steps_len(), 0);
        for outcome in [Outcome::Ok, Outcome::Cancelled] {
            let settled = Settled {
                started: std::time::SystemTime::now(),
                duration_ms: 0,
                call: &call,
                parent: Some("p1"),
                authority: None,
                origin: None,
                outcome,
                error: None,
            };
            log.record(&AuditRecord::settle(settled, &off));
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[1].contains("\"outcome\":\"cancelled\""), "{}", lines[1]);
        assert!(lines[0].contains("\"parent\":\"p1\""), "{}", lines[0]);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    fn ls_record(id: &str) -> AuditRecord {
        let call = ToolCall::new(id, "ls", json!({}));
        let settled = Settled {
            started: std::time::SystemTime::now(),
            duration_ms: 0,
            call: &call,
            parent: None,
            authority: None,
            origin: None,
            outcome: Outcome::Ok,
            error: None,
        };
        AuditRecord::settle(settled, &Trail::off())
    }

    fn lines(path: &Path) -> Vec<Vec<u8>> {
        let text = std::fs::read(path).unwrap();
        text.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    }

    #[test]
    fn two_writers_on_one_file_keep_one_chain_and_a_cut_line_is_ended_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let (a, b) = (AuditLog::open(&path).unwrap(), AuditLog::open(&path).unwrap());
        for i in 0..3 {
            a.record(&ls_record(&format!("a{i}")));
            b.record(&ls_record(&format!("b{i}")));
        }
        let (count, head) = verify(lines(&path)).unwrap();
        assert_eq!(count, 6);
        let all = lines(&path);
        assert!(all[0].starts_with(format!("{{\"prev\":\"{GENESIS}\",\"time\":").as_bytes()));
        assert_eq!(head, line_hash(&all[5]));
        let back: AuditRecord = serde_json::from_slice(&all[1]).unwrap();
        assert_eq!(back.prev, Some(line_hash(&all[0])));
        // A line cut short by a crash: ended before the next record, which chains to it; verify names it.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"prev\":\"ab")
            .unwrap();
        a.record(&ls_record("after"));
        let all = lines(&path);
        assert_eq!(all.len(), 8);
        assert_eq!(all[6], b"{\"prev\":\"ab");
        let last: AuditRecord = serde_json::from_slice(&all[7]).unwrap();
        assert_eq!(last.prev, Some(line_hash(&all[6])));
        assert_eq!(
            verify(all).unwrap_err(),
            Broken {
                line: 7,
                what: "not an audit record (edited, or a line cut short)".into()
            }
        );
    }
}
