//! The state of one plugin call: WASI (preopens of the grants, no network, the granted environment, stdout and
//! stderr captured for the log), the resource table, memory limits, and what the `host` import serves from
//! (`crate::host_import`).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::types;
use toolwright_core::definition::ToolContext;
use toolwright_core::tool::CallSink;
use toolwright_native::ProgramGrant;

/// Bytes of stdout or stderr a plugin may print per call; the rest is dropped (it goes to the log only).
pub(crate) const OUTPUT_CAPTURE: usize = 64 * 1024;

/// What a call's plugin may reach, and where its results go.
#[derive(Clone)]
pub struct CallEnv {
    /// The plugin's name, for logs and errors.
    pub plugin: String,
    /// The workspace, as the plugin sees it.
    pub cwd: String,
    /// The home directory, when granted.
    pub home: Option<String>,
    /// A writable temp directory, when granted.
    pub temp_dir: Option<String>,
    /// The directories the plugin sees (its preopens, as paths in its filesystem) and whether each is writable:
    /// what `refusal` explains.
    pub roots: Vec<(String, bool)>,
    /// The call's cancellation.
    pub cancel: CancellationToken,
    /// Where partial results go.
    pub updates: CallSink,
    /// The programs the plugin may start.
    pub programs: ProgramGrant,
    /// The environment its processes get.
    pub env: Arc<Vec<(String, String)>>,
    /// When the call must end, and its limit.
    pub deadline: Option<(std::time::Instant, std::time::Duration)>,
    /// The session context of a tool call: nested calls go through it (none for handlers and loadout hooks, and
    /// for a call placed here).
    pub session: Option<ToolContext>,
    /// How the call asks the client that made it (`ask`), for a tool execution under grants that let it.
    pub client: Option<CallClient>,
    /// A built-in's short call, on the thread that polls its batch or on a short-work thread
    /// ([`WasmGrants::work`](crate::WasmGrants)): an update never waits for room, and it makes no nested calls.
    /// (Any other call placed here hands its updates on itself: `toolwright_core::pipeline::runs_here`.)
    pub short: bool,
}

/// How one call asks the client that made it ([`toolwright_core::client`]).
#[derive(Clone, Debug)]
pub struct CallClient {
    /// Where the server registered the call's client.
    pub desk: toolwright_core::client::ClientDesk,
    /// The call's id (a nested call's finds its top call's client).
    pub call_id: String,
    /// Whether the plugin may ask the client's model (`[ask] sampling` in the user's policy).
    pub sampling: bool,
}

impl CallEnv {
    /// Cancelled, or past its deadline: what the plugin sees through `is-cancelled`.
    pub fn should_stop(&self) -> bool {
        self.cancel.is_cancelled() || self.deadline.is_some_and(|(d, _)| std::time::Instant::now() >= d)
    }

    /// The tools nested calls can reach now (pi's `ctx.tools`); none without a session.
    pub fn callable_tools(&self) -> Vec<toolwright_sdk::LoadoutTool> {
        self.session.as_ref().map(ToolContext::tools).unwrap_or_default()
    }

    /// Finishes when the call is cancelled or its deadline passes.
    pub async fn stopped(&self) {
        let cancel = self.cancel.clone();
        match self.deadline {
            Some((at, _)) => tokio::select! {
                () = cancel.cancelled() => {}
                () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {}
            },
            None => cancel.cancelled().await,
        }
    }

    /// Why the call was cut short while the host blocked on its behalf: the trap the epoch callback would raise.
    pub fn interrupted(&self) -> wasmtime::Error {
        match self.deadline {
            Some((at, limit)) if std::time::Instant::now() >= at && !self.cancel.is_cancelled() => {
                wasmtime::Error::new(Stopped::Deadline(limit))
            }
            _ => wasmtime::format_err!("the call was cancelled"),
        }
    }
}

/// How long a cancelled call may go on running to wind down on its own (kill its processes, say what it did, as
/// the bash tool does) before it is stopped. A tick of the epoch (10 ms) was too short on a loaded machine: a bash
/// call winding down was stopped mid-way and answered `Operation aborted` instead of `Command aborted`.
pub const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// The call stopped at a question its client answers with the call's next round, or one needing a capability
/// the client did not declare (the trap's cause): the server answers the client with that, not with the call's
/// result.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AskedClient(pub toolwright_core::client::AskError);

/// Why the host stopped a call (the trap's cause).
#[derive(Debug, thiserror::Error)]
pub enum Stopped {
    /// The wall-clock limit passed.
    #[error("it ran past its time limit of {} ms", .0.as_millis())]
    Deadline(std::time::Duration),
}

/// The data of a plugin's store.
pub struct PluginState {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) limits: super::budget::Limiter,
    /// What the call has carried into the host so far, against its cap.
    pub(super) carried: super::budget::Carried,
    pub(super) call: CallEnv,
    pub(super) stdout: MemoryOutputPipe,
    pub(super) stderr: MemoryOutputPipe,
    /// Where this call's output starts in `stdout` and `stderr` (a reused instance's pipes hold earlier calls'
    /// too).
    pub(super) output_from: (usize, usize),
    /// Where a connection's audit goes: the current call's updates.
    pub(super) audit: Arc<std::sync::Mutex<CallSink>>,
    /// When the epoch callback first saw the call cancelled: it gets [`CANCEL_GRACE`] to wind down on its own.
    pub(super) cancel_seen: Option<std::time::Instant>,
    /// Every process the call started, and their descendants: killed when the store (the call) ends.
    pub(super) processes: toolwright_native::CallScope,
    /// The nested calls started with `start-call` (made at the first).
    pub(super) started: Option<Started>,
    /// What the host refused the current call, as it saw it ([`toolwright_core::ask`]).
    pub(super) refused: Vec<toolwright_core::ask::Refused>,
    /// The names it may resolve (`crate::name_lookup`).
    pub(super) names: crate::name_lookup::NameGate,
    /// The connections its socket check refused during the current call (the check runs apart from the store).
    pub(super) net_refused: Arc<std::sync::Mutex<Vec<toolwright_core::ask::Refused>>>,
    /// What the proxies of the programs the current call started refused them (`host:port`, filled while they
    /// run; read when the call ends).
    pub(super) child_refused: Vec<Arc<std::sync::Mutex<Vec<String>>>>,
    /// The current call asked its client with nobody to ask (an offer read with no client: the plugin that wants
    /// to ask is the resource's, and is run again with the client).
    pub(super) asked_nobody: bool,
    /// The instance's exports, type-checked at its first call and kept for the calls a reused instance serves
    /// after it (a store holds one instance).
    pub(super) exports: Exports,
}

/// The type-checked exports of a store's instance, once loaded.
#[derive(Default)]
pub(super) struct Exports {
    pub(super) tool: Option<crate::v1::ToolGuest>,
    pub(super) handler: Option<crate::handler::Exports>,
}

/// Nested calls a plugin started and has not collected yet. Dropped with the store (the call's end): the ones
/// still running are cancelled then, and wind down on their own.
pub struct Started {
    /// The number of the next call.
    pub(crate) next: u64,
    /// How many have not been collected.
    pub(crate) running: usize,
    pub(crate) sender: tokio::sync::mpsc::UnboundedSender<(u64, types::CallOutcome)>,
    pub(crate) receiver: tokio::sync::mpsc::UnboundedReceiver<(u64, types::CallOutcome)>,
    /// Cancels every started call when the call ends.
    pub(crate) _cancel: tokio_util::sync::DropGuard,
    pub(crate) cancel: CancellationToken,
    /// The call's session: the calls still running when it ends stay unfinished in its record.
    pub(crate) session: Option<ToolContext>,
}

impl Drop for Started {
    fn drop(&mut self) {
        // Sealed before the drop guard cancels them: however fast a cancelled call winds down, the record shows
        // it unfinished, as pi's does.
        if self.running > 0
            && let Some(session) = &self.session
        {
            session.seal();
        }
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl PluginState {
    /// Send what the plugin printed to the host's log and the call's log (an MCP client's
    /// `notifications/message`: stdout as info, stderr as warnings), never to the protocol stream.
    pub fn flush_output(&self) {
        use toolwright_core::tool::LogLevel;
        for (stream, pipe, from, level) in [
            ("stdout", &self.stdout, self.output_from.0, LogLevel::Info),
            ("stderr", &self.stderr, self.output_from.1, LogLevel::Warn),
        ] {
            let bytes = pipe.contents();
            for line in String::from_utf8_lossy(bytes.get(from..).unwrap_or_default()).lines() {
                tracing::info!(plugin = %self.call.plugin, stream, "{line}");
                self.call.updates.log(level, line);
            }
        }
    }
}

impl PluginState {
    /// What this call wrote to stderr.
    pub fn stderr_of_call(&self) -> Vec<u8> {
        let all = self.stderr.contents();
        all.get(self.output_from.1..).unwrap_or_default().to_vec()
    }

    /// Whether the output capture has room for another call's output (half of it, at least).
    pub fn output_has_room(&self) -> bool {
        let half = OUTPUT_CAPTURE / 2;
        self.stdout.contents().len() < half && self.stderr.contents().len() < half
    }

    /// Let go of what belonged to the call that ended, before the instance waits for the next: its processes
    /// (killed now), its started nested calls (cancelled), its updates, session and cancellation.
    pub fn end_call(&mut self) {
        self.processes = toolwright_native::CallScope::new();
        self.started = None;
        self.call.updates = CallSink::discard();
        self.call.session = None;
        self.call.client = None;
        self.call.cancel = CancellationToken::new();
        self.call.deadline = None;
        *self
            .audit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = CallSink::discard();
    }

    /// What a fresh instance's call owes at its end, before its store is dropped off the call's path
    /// (`crate::instances::Instances::release`): [`end_call`](Self::end_call), and its resources (open files, sockets, child
    /// handles) closed, its memory given back to the host's budget. Nothing runs in the store after this.
    pub fn retire(&mut self) {
        self.end_call();
        self.table = ResourceTable::new();
        self.limits.release();
    }
}
