//! The state of one plugin call: WASI (preopens of the grants, no network, the granted environment, stdout and
//! stderr captured for the log), the resource table, memory limits, and what the `host` import serves.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::{host, types};
use super::convert;
use toolwright_core::definition::ToolContext;
use toolwright_core::tool::UpdateSink;
use toolwright_core::types::AgentToolCallOutcome;
use toolwright_native::ProgramGrant;

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
    pub updates: UpdateSink,
    /// The programs the plugin may start.
    pub programs: ProgramGrant,
    /// The environment its processes get.
    pub env: Arc<Vec<(String, String)>>,
    /// When the call must end, and its limit.
    pub deadline: Option<(std::time::Instant, std::time::Duration)>,
    /// The session context of a tool call: nested calls go through it (none for handlers and loadout hooks, and
    /// for a call in place).
    pub session: Option<ToolContext>,
    /// A built-in's call on the thread that polls its batch, or on one of the brief threads
    /// ([`WasmGrants::in_place`](crate::WasmGrants)): an update never waits for room, and it makes no nested calls.
    /// (Any other call in place hands its updates on itself: `toolwright_core::pipeline::serving`.)
    pub inline: bool,
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
    pub(super) audit: Arc<std::sync::Mutex<UpdateSink>>,
    /// Whether the epoch callback saw the call cancelled (it gets one more tick to wind down).
    pub(super) cancel_seen: bool,
    /// Every process the call started, and their descendants: killed when the store (the call) ends.
    pub(super) processes: toolwright_native::CallScope,
    /// The nested calls started with `start-call` (made at the first).
    pub(super) started: Option<Started>,
    /// The instance's exports, type-checked at its first call and kept for the calls a reused instance serves
    /// after it (a store holds one instance).
    pub(super) exports: Exports,
}

/// The type-checked exports of a store's instance, once loaded.
#[derive(Default)]
pub(super) struct Exports {
    pub(super) tool: Option<crate::bindings::tool::Guest>,
    pub(super) handler: Option<crate::bindings::handler::Guest>,
}

/// How many started calls one plugin call may have uncollected at once: past it, `start-call` answers with an
/// error outcome at once (a plugin flooding the host with calls gets errors, not memory).
pub const MAX_STARTED_CALLS: usize = 1024;

/// The longest `search-tools` query the host ranks (characters; longer ones are cut): ranking is host work the
/// plugin's deadline cannot interrupt.
pub const MAX_SEARCH_QUERY_CHARS: usize = 4096;

/// Nested calls a plugin started and has not collected yet. Dropped with the store (the call's end): the ones
/// still running are cancelled then, and wind down on their own.
pub struct Started {
    /// The number of the next call.
    next: u64,
    /// How many have not been collected.
    running: usize,
    sender: tokio::sync::mpsc::UnboundedSender<(u64, types::CallOutcome)>,
    receiver: tokio::sync::mpsc::UnboundedReceiver<(u64, types::CallOutcome)>,
    /// Cancels every started call when the call ends.
    _cancel: tokio_util::sync::DropGuard,
    cancel: CancellationToken,
    /// The call's session: the calls still running when it ends stay unfinished in its record.
    session: Option<ToolContext>,
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
        let half = super::OUTPUT_CAPTURE / 2;
        self.stdout.contents().len() < half && self.stderr.contents().len() < half
    }

    /// Let go of what belonged to the call that ended, before the instance waits for the next: its processes
    /// (killed now), its started nested calls (cancelled), its updates, session and cancellation.
    pub fn end_call(&mut self) {
        self.processes = toolwright_native::CallScope::new();
        self.started = None;
        self.call.updates = UpdateSink::discard();
        self.call.session = None;
        self.call.cancel = CancellationToken::new();
        self.call.deadline = None;
        *self
            .audit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = UpdateSink::discard();
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

impl types::Host for PluginState {}

impl host::Host for PluginState {
    fn update(&mut self, partial: types::ToolResult) -> wasmtime::Result<()> {
        self.carried
            .add(convert::result_bytes(&partial))
            .map_err(wasmtime::Error::new)?;
        let result = match convert::result_from_wit(partial) {
            Ok(result) => result,
            Err(e) => {
                tracing::warn!(plugin = %self.call.plugin, "dropping a malformed partial result: {e}");
                return Ok(());
            }
        };
        // A plugin sending faster than its updates are consumed waits for room, within its deadline.
        let call = &self.call;
        let sent = match tokio::runtime::Handle::try_current() {
            // On the thread that polls its batch, which waits for it: it hands the update on itself.
            Ok(runtime) if toolwright_core::pipeline::serving() => {
                call.updates.update(result);
                toolwright_core::pipeline::flush_owed(&runtime);
                true
            }
            Ok(runtime) if !call.inline => call.updates.update_blocking(&runtime, result, call.stopped()),
            // In place nothing consumes updates until the call returns: one with no room is dropped.
            _ => {
                call.updates.update(result);
                true
            }
        };
        match sent {
            true => Ok(()),
            // Cancelled while waiting for room: the update is dropped and the plugin may wind down.
            false if call.cancel.is_cancelled() => Ok(()),
            false => Err(call.interrupted()),
        }
    }

    fn is_cancelled(&mut self) -> wasmtime::Result<bool> {
        Ok(self.call.should_stop())
    }

    fn log(&mut self, level: types::LogLevel, message: String) -> wasmtime::Result<()> {
        use toolwright_core::tool::LogLevel;
        let plugin = &self.call.plugin;
        let level = match level {
            types::LogLevel::Debug => {
                tracing::debug!(plugin, "{message}");
                LogLevel::Debug
            }
            types::LogLevel::Info => {
                tracing::info!(plugin, "{message}");
                LogLevel::Info
            }
            types::LogLevel::Warn => {
                tracing::warn!(plugin, "{message}");
                LogLevel::Warn
            }
            types::LogLevel::Error => {
                tracing::error!(plugin, "{message}");
                LogLevel::Error
            }
        };
        // The message is the plugin's: bounded like everything it sends.
        self.call.updates.log(level, message);
        if toolwright_core::pipeline::serving()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            toolwright_core::pipeline::flush_owed(&runtime);
        }
        Ok(())
    }

    fn cwd(&mut self) -> wasmtime::Result<String> {
        Ok(self.call.cwd.clone())
    }

    fn home(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(self.call.home.clone())
    }

    fn temp_dir(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(self.call.temp_dir.clone())
    }

    fn refusal(&mut self, path: String, write: bool) -> wasmtime::Result<Option<String>> {
        use toolwright_native::grants::{covers, refusal_text};
        let path = toolwright_sdk::paths::resolve_to_cwd(&path, &self.call.cwd, self.call.home.as_deref());
        let access = if write {
            toolwright_sdk::Access::Write
        } else {
            toolwright_sdk::Access::Read
        };
        let roots = || {
            self.call
                .roots
                .iter()
                .map(|(root, write)| (root.as_str(), *write))
        };
        Ok((!covers(roots(), &path, access)).then(|| refusal_text(roots(), &path, access)))
    }

    fn call_tool(&mut self, name: String, arguments: String) -> wasmtime::Result<types::CallOutcome> {
        let mut outcomes = self.run_nested(vec![(name, arguments)]);
        self.count_nested(&mut outcomes);
        Ok(outcomes.pop().unwrap_or_else(unavailable))
    }

    fn call_tools(&mut self, calls: Vec<(String, String)>) -> wasmtime::Result<Vec<types::CallOutcome>> {
        let mut outcomes = self.run_nested(calls);
        self.count_nested(&mut outcomes);
        Ok(outcomes)
    }

    fn start_call(&mut self, name: String, arguments: String) -> wasmtime::Result<u64> {
        if self.call.should_stop() {
            return Err(self.call.interrupted());
        }
        // What the call carries into the host counts against the plugin's per-call cap, as its results do.
        self.carried
            .add(name.len() + arguments.len())
            .map_err(wasmtime::Error::new)?;
        let started = self.started.get_or_insert_with(|| {
            let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
            let cancel = self
                .call
                .session
                .as_ref()
                .map_or_else(CancellationToken::new, |s| s.cancel.child_token());
            Started {
                next: 1,
                running: 0,
                sender,
                receiver,
                _cancel: cancel.clone().drop_guard(),
                cancel,
                session: self.call.session.clone(),
            }
        });
        let number = started.next;
        started.next += 1;
        started.running += 1;
        let sender = started.sender.clone();
        // A plugin that keeps starting past the bound without collecting is stopped, not queued without end.
        if started.running > 2 * MAX_STARTED_CALLS {
            return Err(wasmtime::format_err!(
                "the plugin {} started more than {} nested calls without taking their outcomes",
                self.call.plugin,
                2 * MAX_STARTED_CALLS
            ));
        }
        if started.running > MAX_STARTED_CALLS {
            let text = format!(
                "The plugin {} has {MAX_STARTED_CALLS} nested calls running: it must take their outcomes \
                 (next-outcomes) before it starts more",
                self.call.plugin
            );
            let _ = sender.send((number, error_outcome(&text)));
            return Ok(number);
        }
        let (Some(session), Ok(runtime)) = (&self.call.session, tokio::runtime::Handle::try_current()) else {
            let _ = sender.send((number, unavailable()));
            return Ok(number);
        };
        let args = match serde_json::from_str::<serde_json::Value>(&arguments) {
            Ok(args) => args,
            Err(e) => {
                let text = format!(
                    "The plugin {} passed arguments for {name} that are not JSON: {e}",
                    self.call.plugin
                );
                let _ = sender.send((number, error_outcome(&text)));
                return Ok(number);
            }
        };
        let mut scoped = session.clone();
        scoped.cancel = started.cancel.clone();
        // Beside its caller: a nested call never runs in place, even polled on the caller's thread.
        let mut run = Box::pin(toolwright_core::pipeline::beside(async move {
            let outcome = scoped.execute_tool(&name, args, UpdateSink::discard()).await;
            // Only what the plugin will see waits for it (the arguments go with the call).
            let _ = sender.send((number, outcome_to_wit(outcome)));
        }));
        // Polled once here, so the call takes its id (`<call>/<n>`) and emits its start now, in start order; then it
        // runs on its own while the plugin goes on (its events served meanwhile if the plugin runs in place).
        toolwright_core::pipeline::serve_others(&runtime);
        if runtime
            .block_on(async { futures::poll!(run.as_mut()) })
            .is_pending()
        {
            runtime.spawn(run);
        }
        Ok(number)
    }

    fn next_outcomes(&mut self, wait: bool) -> wasmtime::Result<Vec<(u64, types::CallOutcome)>> {
        let Some(started) = self.started.as_mut().filter(|s| s.running > 0) else {
            return Ok(Vec::new());
        };
        let mut done = Vec::new();
        if wait {
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return Ok(Vec::new());
            };
            let first = {
                let call = &self.call;
                let receiver = &mut started.receiver;
                toolwright_core::pipeline::block_on_serving(&runtime, async {
                    tokio::select! {
                        // An outcome that is ready wins over a deadline passing at the same moment.
                        biased;
                        first = receiver.recv() => first,
                        () = call.stopped() => None,
                    }
                })
            };
            let Some(first) = first else {
                return Err(self.call.interrupted());
            };
            done.push(first);
        }
        while let Ok(next) = started.receiver.try_recv() {
            done.push(next);
        }
        started.running -= done.len();
        let mut outcomes = done;
        for (_, outcome) in &mut outcomes {
            self.count_nested(std::slice::from_mut(outcome));
        }
        Ok(outcomes)
    }

    fn search_tools(
        &mut self,
        query: String,
        among: Option<Vec<String>>,
        limit: u32,
    ) -> wasmtime::Result<Vec<String>> {
        use toolwright_core::registry::search::{SearchDocument, rank};
        let sent = query.len() + among.iter().flatten().map(String::len).sum::<usize>();
        self.carried.add(sent).map_err(wasmtime::Error::new)?;
        let query: String = query.chars().take(MAX_SEARCH_QUERY_CHARS).collect();
        let among: Option<std::collections::HashSet<String>> = among.map(|names| names.into_iter().collect());
        let tools = self.call.callable_tools();
        let documents: Vec<SearchDocument> = tools
            .iter()
            .filter(|t| among.as_ref().is_none_or(|names| names.contains(&t.name)))
            .map(|t| {
                let parameters = t.parameters.clone().unwrap_or(serde_json::Value::Null);
                SearchDocument::new(&t.name, &t.description, &parameters, t.namespace.as_ref())
            })
            .collect();
        Ok(rank(&query, &documents, limit as usize)
            .into_iter()
            .map(|r| r.name)
            .collect())
    }

    fn callable_tools(&mut self) -> wasmtime::Result<Vec<types::ToolInfo>> {
        let tools = self.call.callable_tools();
        Ok(tools.iter().map(convert::tool_info_to_wit).collect())
    }
}

/// How long nested calls get to end after their caller's deadline cancelled them.
const NESTED_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// What a plugin's nested calls answer when they were abandoned at its deadline (the plugin, stopped, never
/// sees it; the records say `cancelled`).
const NESTED_ABANDONED: &str = "The nested call was abandoned at its caller's deadline";

/// An error outcome of a nested call that never reached the pipeline.
fn error_outcome(text: &str) -> types::CallOutcome {
    types::CallOutcome {
        result: convert::result_to_wit(&toolwright_core::types::ToolResult::error(text)),
        is_error: true,
        duration_ms: None,
    }
}

/// pi's answer when no nested-call runner is bound.
fn unavailable() -> types::CallOutcome {
    error_outcome(toolwright_sdk::NESTED_CALLS_UNAVAILABLE)
}

fn outcome_to_wit(outcome: AgentToolCallOutcome) -> types::CallOutcome {
    types::CallOutcome {
        result: convert::result_to_wit(&outcome.result),
        is_error: outcome.is_error,
        duration_ms: outcome.duration_ms,
    }
}

impl PluginState {
    /// Count nested results against the call's cap; one past it reaches the plugin as an error outcome naming the
    /// cap instead (the plugin may still answer with what it has).
    fn count_nested(&mut self, outcomes: &mut [types::CallOutcome]) {
        for outcome in outcomes {
            if let Err(over) = self.carried.add(convert::result_bytes(&outcome.result)) {
                *outcome = error_outcome(&format!("The nested call's result was dropped: {over}"));
            }
        }
    }

    /// Run nested calls for the plugin, blocking its (blocking-pool) thread until all settle. Arguments that are
    /// not JSON become error outcomes naming the tool. When the calling plugin's deadline passes, its nested
    /// calls are cancelled, so a plugin waiting on them is stopped like one that loops.
    fn run_nested(&self, calls: Vec<(String, String)>) -> Vec<types::CallOutcome> {
        let (Some(session), Ok(runtime)) = (&self.call.session, tokio::runtime::Handle::try_current()) else {
            return calls.iter().map(|_| unavailable()).collect();
        };
        let cancel = session.cancel.child_token();
        let mut scoped = session.clone();
        scoped.cancel = cancel.clone();
        let deadline = self
            .call
            .deadline
            .map(|(at, _)| tokio::time::Instant::from_std(at));
        let plugin = self.call.plugin.clone();
        let count = calls.len();
        toolwright_core::pipeline::block_on_serving(&runtime, async move {
            let runs = futures::future::join_all(calls.into_iter().map(|(name, arguments)| {
                let (scoped, plugin) = (&scoped, &plugin);
                async move {
                    match serde_json::from_str::<serde_json::Value>(&arguments) {
                        Ok(args) => {
                            outcome_to_wit(scoped.execute_tool(&name, args, UpdateSink::discard()).await)
                        }
                        Err(e) => error_outcome(&format!(
                            "The plugin {plugin} passed arguments for {name} that are not JSON: {e}"
                        )),
                    }
                }
            }));
            tokio::pin!(runs);
            match deadline {
                Some(at) => tokio::select! {
                    outcomes = &mut runs => outcomes,
                    () = tokio::time::sleep_until(at) => {
                        // The plugin is stopped with them: they stay unfinished in its record.
                        scoped.seal();
                        cancel.cancel();
                        // A nested call that cannot see its cancellation (a thread inside a system call) is
                        // abandoned after a grace: dropped, it records itself as cancelled, and the caller's
                        // own record is written as it stops.
                        match tokio::time::timeout(NESTED_GRACE, &mut runs).await {
                            Ok(outcomes) => outcomes,
                            Err(_) => (0..count).map(|_| error_outcome(NESTED_ABANDONED)).collect(),
                        }
                    }
                },
                None => runs.await,
            }
        })
    }
}
