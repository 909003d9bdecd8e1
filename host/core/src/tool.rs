//! The runtime layer: [`AgentTool`], what the pipeline runs (pi's `AgentTool`).

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use toolwright_sdk::ExecutionMode;

use crate::schema::{SchemaDefinitionError, Validator};
use crate::types::ToolResult;

/// A boxed, sendable future: what tools and hooks return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub use toolwright_sdk::{HostFault, ToolError};

/// How many partial results may wait for the consumer of one call. A tool that sends faster than they are
/// consumed is slowed down ([`CallSink::update_blocking`]) or has its newest pending update replaced
/// ([`CallSink::update`]): memory stays bounded whatever a plugin sends.
pub const PENDING_UPDATES: usize = 64;

/// How many log lines may wait for the consumer of one call; later ones are dropped (and counted) until it
/// catches up. Logs never slow a tool down.
pub const PENDING_LOG_LINES: usize = 256;

/// The longest log line kept, in bytes; a longer one is cut at a character boundary and marked with `…`.
pub const LOG_LINE_MAX_BYTES: usize = 8 * 1024;

pub use toolwright_sdk::LogLevel;

/// A line a running tool wrote to the host's log ([`CallSink::log`]): what an MCP client receives as
/// `notifications/message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Its severity.
    pub level: LogLevel,
    /// The text.
    pub message: String,
}

/// Where a running call sends all it reports besides its result: partial results (pi's `onUpdate`), log lines,
/// and the activity the audit log records (programs started, connections opened).
///
/// Updates sent after the call settled are ignored, as pi ignores late `onUpdate` calls. At most
/// [`PENDING_UPDATES`] wait for the consumer at a time. Cloning is cheap; a sink from [`CallSink::discard`]
/// drops everything.
#[derive(Clone, Default)]
pub struct CallSink {
    inner: Option<Arc<CallChannel>>,
    /// Sees every partial result first and decides what goes on ([`CallSink::tapped`]).
    tap: Option<UpdateTap>,
}

/// What [`CallSink::tapped`] runs on each partial result: what it returns goes on, `None` nothing.
pub type UpdateTap = Arc<dyn Fn(ToolResult) -> Option<ToolResult> + Send + Sync>;

struct CallChannel {
    accepting: AtomicBool,
    queue: Mutex<VecDeque<ToolResult>>,
    /// Log lines waiting, and how many were dropped since the consumer last took one.
    logs: Mutex<(VecDeque<LogLine>, usize)>,
    /// Signalled when an update is queued.
    ready: Notify,
    /// Signalled when the consumer takes one.
    room: Notify,
    /// Programs started and connections opened, for the audit log.
    activity: Mutex<crate::audit::Activity>,
    /// For a sink no consumer reads ([`CallSink::for_trail`]): the trail its activity goes to, and who it is.
    report: Option<(crate::audit::Trail, String)>,
}

impl CallChannel {
    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<ToolResult>> {
        // A panic while holding the lock leaves a valid queue behind.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn logs(&self) -> std::sync::MutexGuard<'_, (VecDeque<LogLine>, usize)> {
        self.logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn activity(&self) -> std::sync::MutexGuard<'_, crate::audit::Activity> {
        self.activity
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl CallSink {
    /// A sink that drops every update.
    pub fn discard() -> Self {
        CallSink {
            inner: None,
            tap: None,
        }
    }

    /// This sink with `tap` in front: every partial result passes through it, and only what it returns reaches
    /// the consumer (a host component reads a side channel of its own tool this way, and drops it). Log lines
    /// and activity pass untouched. Taps stack: the newest runs first.
    pub fn tapped(&self, tap: impl Fn(ToolResult) -> Option<ToolResult> + Send + Sync + 'static) -> Self {
        let outer = self.tap.clone();
        let tap: UpdateTap = match outer {
            None => Arc::new(tap),
            Some(outer) => Arc::new(move |partial| tap(partial).and_then(|p| outer(p))),
        };
        CallSink {
            inner: self.inner.clone(),
            tap: Some(tap),
        }
    }

    /// The partial result after the tap, if any is left.
    fn through_tap(&self, partial: ToolResult) -> Option<ToolResult> {
        match &self.tap {
            Some(tap) => tap(partial),
            None => Some(partial),
        }
    }

    /// Report a partial result without waiting. Ignored once the call has settled. When [`PENDING_UPDATES`]
    /// already wait, it replaces the newest of them: partial results are snapshots, and the latest one wins.
    pub fn update(&self, partial: ToolResult) {
        let Some(partial) = self.through_tap(partial) else {
            return;
        };
        let Some(inner) = &self.inner else { return };
        if inner.report.is_some() {
            return;
        }
        let mut queue = inner.queue();
        if !inner.accepting.load(Ordering::Acquire) {
            return;
        }
        let full = queue.len() >= PENDING_UPDATES;
        match queue.back_mut() {
            Some(newest) if full => *newest = partial,
            _ => queue.push_back(partial),
        }
        drop(queue);
        inner.ready.notify_one();
    }

    /// Write a line to the call's log without waiting: the consumer (an MCP client's `notifications/message`)
    /// receives it in order with the call's partial results. Ignored once the call has settled; beyond
    /// [`PENDING_LOG_LINES`] waiting lines are dropped, and the consumer is told how many.
    pub fn log(&self, level: LogLevel, message: impl Into<String>) {
        let Some(inner) = &self.inner else { return };
        if inner.report.is_some() {
            return;
        }
        let mut message = message.into();
        if message.len() > LOG_LINE_MAX_BYTES {
            let mut end = LOG_LINE_MAX_BYTES;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push('…');
        }
        {
            let mut logs = inner.logs();
            if !inner.accepting.load(Ordering::Acquire) {
                return;
            }
            if logs.0.len() >= PENDING_LOG_LINES {
                logs.1 += 1;
                return;
            }
            logs.0.push_back(LogLine { level, message });
        }
        inner.ready.notify_one();
    }

    /// A sink for code that runs on behalf of another call and has no consumer of its own (a handler plugin
    /// deciding on a call): partial results and log lines are dropped, and what it starts and connects to goes
    /// to `trail`, the decided call's, marked as `by`'s. A trail that is off gives [`CallSink::discard`].
    pub fn for_trail(trail: crate::audit::Trail, by: impl Into<String>) -> Self {
        if !trail.is_on() {
            return Self::discard();
        }
        CallSink {
            inner: Some(Arc::new(CallChannel {
                accepting: AtomicBool::new(true),
                queue: Mutex::new(VecDeque::new()),
                logs: Mutex::new((VecDeque::new(), 0)),
                ready: Notify::new(),
                room: Notify::new(),
                activity: Mutex::default(),
                report: Some((trail, by.into())),
            })),
            tap: None,
        }
    }

    /// Hand what was recorded to the trail of a [`CallSink::for_trail`] sink; false for other sinks.
    fn reported(inner: &CallChannel) -> bool {
        let Some((trail, by)) = &inner.report else {
            return false;
        };
        trail.add_activity_by(std::mem::take(&mut *inner.activity()), by);
        true
    }

    /// Record, for the audit log, that the call started `program` with `argv`, or was refused (`refusal`
    /// says why). A runtime calls it where it checks a start against the grants. Ignored once the call settled.
    pub fn spawned(&self, program: &str, argv: &[String], refusal: Option<&str>) {
        let Some(inner) = &self.inner else { return };
        if inner.accepting.load(Ordering::Acquire) {
            inner.activity().spawned(program, argv, refusal);
            Self::reported(inner);
        }
    }

    /// Record, for the audit log, that the grants let the call start `program` but it could not be started
    /// (`error` says why). Ignored once the call settled.
    pub fn spawn_failed(&self, program: &str, argv: &[String], error: &str) {
        let Some(inner) = &self.inner else { return };
        if inner.accepting.load(Ordering::Acquire) {
            inner.activity().spawn_failed(program, argv, error);
            Self::reported(inner);
        }
    }

    /// Record, for the audit log, a question the call put to its client and what came of it. Ignored once the
    /// call settled.
    pub fn asked(&self, method: &str, key: &str, outcome: &str) {
        let Some(inner) = &self.inner else { return };
        if inner.accepting.load(Ordering::Acquire) {
            inner.activity().asked(method, key, outcome);
            Self::reported(inner);
        }
    }

    /// Record, for the audit log, that the call connected (or sent a datagram) to `address`, or was refused.
    /// Ignored once the call settled.
    pub fn connected(&self, address: std::net::SocketAddr, allowed: bool) {
        self.connected_to(&address.to_string(), allowed);
    }

    /// [`CallSink::connected`] for a target by name (`host:port`, as the sandbox's proxy was asked for it).
    pub fn connected_to(&self, target: &str, allowed: bool) {
        let Some(inner) = &self.inner else { return };
        if inner.accepting.load(Ordering::Acquire) {
            inner.activity().connected(target.to_owned(), allowed);
            Self::reported(inner);
        }
    }

    /// Whether anything listens: a tool may skip building log lines nobody reads.
    pub fn is_connected(&self) -> bool {
        self.inner.as_ref().is_some_and(|i| i.report.is_none())
    }

    /// Report a partial result, waiting while [`PENDING_UPDATES`] wait for the consumer (backpressure), or
    /// until `stop` finishes (then the update is dropped and this returns `false`). Ignored once the call has
    /// settled.
    pub async fn update_or_stop(&self, partial: ToolResult, stop: impl Future<Output = ()>) -> bool {
        let Some(partial) = self.through_tap(partial) else {
            return true;
        };
        let Some(inner) = self.inner.as_ref().filter(|i| i.report.is_none()) else {
            drop(partial);
            return true;
        };
        tokio::pin!(stop);
        loop {
            let room = inner.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let mut queue = inner.queue();
                if !inner.accepting.load(Ordering::Acquire) {
                    return true;
                }
                if queue.len() < PENDING_UPDATES {
                    queue.push_back(partial);
                    drop(queue);
                    inner.ready.notify_one();
                    return true;
                }
            }
            tokio::select! {
                () = &mut room => {}
                () = &mut stop => return false,
            }
        }
    }

    /// [`CallSink::update_or_stop`] for a tool running on a blocking thread of `runtime` (never call it from
    /// async code: it blocks the thread).
    pub fn update_blocking(
        &self,
        runtime: &tokio::runtime::Handle,
        partial: ToolResult,
        stop: impl Future<Output = ()>,
    ) -> bool {
        if self.inner.is_none() && self.tap.is_none() {
            return true;
        }
        runtime.block_on(self.update_or_stop(partial, stop))
    }

    /// A connected sink and the receiving end of its updates.
    pub(crate) fn channel() -> (Self, UpdateReceiver) {
        let inner = Arc::new(CallChannel {
            accepting: AtomicBool::new(true),
            queue: Mutex::new(VecDeque::new()),
            logs: Mutex::new((VecDeque::new(), 0)),
            ready: Notify::new(),
            room: Notify::new(),
            activity: Mutex::default(),
            report: None,
        });
        (
            CallSink {
                inner: Some(inner.clone()),
                tap: None,
            },
            UpdateReceiver { inner },
        )
    }
}

impl fmt::Debug for CallSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallSink")
            .field("connected", &self.inner.is_some())
            .finish()
    }
}

/// The receiving end of an [`CallSink`].
pub(crate) struct UpdateReceiver {
    inner: Arc<CallChannel>,
}

/// What a running call sent: a partial result or a log line. (Taken off a queue and handed on at once.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Sent {
    /// A partial result.
    Update(ToolResult),
    /// A log line.
    Log(LogLine),
}

impl UpdateReceiver {
    /// The next thing sent, waiting for one.
    pub(crate) async fn recv(&self) -> Sent {
        loop {
            let ready = self.inner.ready.notified();
            tokio::pin!(ready);
            ready.as_mut().enable();
            if let Some(sent) = self.try_recv() {
                return sent;
            }
            ready.await;
        }
    }

    /// The next thing sent, if one waits: log lines first (they were written before the update that follows
    /// them, or at worst beside it), then partial results.
    pub(crate) fn try_recv(&self) -> Option<Sent> {
        {
            let mut logs = self.inner.logs();
            if logs.1 > 0 {
                let dropped = std::mem::take(&mut logs.1);
                return Some(Sent::Log(LogLine {
                    level: LogLevel::Warn,
                    message: format!(
                        "{dropped} log lines were dropped: the tool wrote faster than they were sent"
                    ),
                }));
            }
            if let Some(line) = logs.0.pop_front() {
                return Some(Sent::Log(line));
            }
        }
        let partial = self.inner.queue().pop_front();
        if partial.is_some() {
            self.inner.room.notify_waiters();
        }
        partial.map(Sent::Update)
    }

    /// What the call started and connected to (taken once the call settled).
    pub(crate) fn take_activity(&self) -> crate::audit::Activity {
        std::mem::take(&mut *self.inner.activity())
    }

    /// Stop accepting updates; the ones already sent can still be drained. Senders waiting for room give up.
    pub(crate) fn close(&mut self) {
        let _queue = self.inner.queue();
        let _logs = self.inner.logs();
        self.inner.accepting.store(false, Ordering::Release);
        self.inner.room.notify_waiters();
    }
}

/// One execution of a tool: what `execute` receives.
#[derive(Debug, Clone)]
pub struct ToolExecution {
    /// The tool call id.
    pub call_id: String,
    /// The validated (possibly coerced, possibly hook-rewritten) arguments.
    pub params: Value,
    /// Cancelled when the batch is aborted; long-running tools should watch it.
    pub cancel: CancellationToken,
    /// Where partial results go.
    pub updates: CallSink,
}

/// The code behind an [`AgentTool`]: does the work of one call.
///
/// Return `Err` to "throw" (the error's message becomes the result text), or `Ok` with `is_error` set to return
/// an error result that keeps its details. Any `Fn(ToolExecution) -> impl Future` closure is an executor.
pub trait ToolExecutor: Send + Sync {
    /// Run one call.
    fn execute(&self, run: ToolExecution) -> BoxFuture<'static, Result<ToolResult, ToolError>>;
}

impl<F, Fut> ToolExecutor for F
where
    F: Fn(ToolExecution) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
{
    fn execute(&self, run: ToolExecution) -> BoxFuture<'static, Result<ToolResult, ToolError>> {
        Box::pin(self(run))
    }
}

/// A compatibility shim run on the raw arguments before validation (pi's `prepareArguments`).
pub type PrepareArguments = Arc<dyn Fn(&Value) -> Result<Value, ToolError> + Send + Sync>;

/// A tool as the pipeline runs it (pi's `AgentTool`): a declaration plus the code that executes it.
///
/// It knows nothing of prompts, exposure or UI; see [`crate::ToolDefinition`] for those. Cloning is cheap: one
/// reference count (every call of a batch holds a clone).
#[derive(Clone)]
pub struct AgentTool {
    inner: Arc<Declared>,
}

/// What an [`AgentTool`] is, shared by its clones; a `with_` method on a shared tool copies it first.
#[derive(Clone)]
struct Declared {
    name: String,
    label: String,
    description: String,
    parameters: Value,
    constrained_sampling: Option<Value>,
    output_schema: Option<Value>,
    execution_mode: Option<ExecutionMode>,
    prepare_arguments: Option<PrepareArguments>,
    executor: Arc<dyn ToolExecutor>,
    origin: Option<Arc<crate::audit::Origin>>,
    validator: Arc<OnceLock<Result<Validator, SchemaDefinitionError>>>,
}

impl AgentTool {
    /// A tool named `name` with its model-visible description, its JSON Schema parameters and its executor. The
    /// label defaults to the name.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        executor: impl ToolExecutor + 'static,
    ) -> Self {
        Self::from_executor(name.into(), description.into(), parameters, Arc::new(executor))
    }

    pub(crate) fn from_executor(
        name: String,
        description: String,
        parameters: Value,
        executor: Arc<dyn ToolExecutor>,
    ) -> Self {
        AgentTool {
            inner: Arc::new(Declared {
                label: name.clone(),
                name,
                description,
                parameters,
                constrained_sampling: None,
                output_schema: None,
                execution_mode: None,
                prepare_arguments: None,
                executor,
                origin: None,
                validator: Arc::new(OnceLock::new()),
            }),
        }
    }

    /// This tool with what the audit log says runs it.
    pub fn with_origin(mut self, origin: Arc<crate::audit::Origin>) -> Self {
        self.declared().origin = Some(origin);
        self
    }

    /// What the audit log says runs it (`None` for a tool made with [`AgentTool::new`]: the embedder's).
    pub fn origin(&self) -> Option<&Arc<crate::audit::Origin>> {
        self.inner.origin.as_ref()
    }

    /// This tool with a UI label.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.declared().label = label.into();
        self
    }

    /// This tool with another model-visible description (a loadout override); the code is shared.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.declared().description = description.into();
        self
    }

    /// This tool with an output schema for `structuredContent`.
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.declared().output_schema = Some(schema);
        self
    }

    /// This tool with a constrained-sampling request (pi's `constrainedSampling`), passed through to providers.
    pub fn with_constrained_sampling(mut self, request: Value) -> Self {
        self.declared().constrained_sampling = Some(request);
        self
    }

    /// This tool with an execution mode; `Sequential` makes every batch it is in run sequentially.
    pub fn with_execution_mode(mut self, mode: ExecutionMode) -> Self {
        self.declared().execution_mode = Some(mode);
        self
    }

    /// This tool with an argument shim run before validation.
    pub fn with_prepare_arguments(
        mut self,
        prepare: impl Fn(&Value) -> Result<Value, ToolError> + Send + Sync + 'static,
    ) -> Self {
        self.declared().prepare_arguments = Some(Arc::new(prepare));
        self
    }

    pub(crate) fn with_prepare_arguments_shared(mut self, prepare: Option<PrepareArguments>) -> Self {
        self.declared().prepare_arguments = prepare;
        self
    }

    /// Its declaration, to change: copied first if another clone shares it.
    fn declared(&mut self) -> &mut Declared {
        Arc::make_mut(&mut self.inner)
    }

    /// The name the model calls.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The UI label.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// The model-visible description.
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// The parameters' JSON Schema.
    pub fn parameters(&self) -> &Value {
        &self.inner.parameters
    }

    /// The constrained-sampling request, if any.
    pub fn constrained_sampling(&self) -> Option<&Value> {
        self.inner.constrained_sampling.as_ref()
    }

    /// The output schema, if any.
    pub fn output_schema(&self) -> Option<&Value> {
        self.inner.output_schema.as_ref()
    }

    /// The execution mode, if the tool sets one.
    pub fn execution_mode(&self) -> Option<ExecutionMode> {
        self.inner.execution_mode
    }

    /// The argument shim, if any.
    pub fn prepare_arguments(&self) -> Option<&PrepareArguments> {
        self.inner.prepare_arguments.as_ref()
    }

    /// The executor.
    pub fn executor(&self) -> &Arc<dyn ToolExecutor> {
        &self.inner.executor
    }

    /// The validator of the parameters, compiled on first use and shared by clones, or why the host cannot
    /// enforce the schema; every call of such a tool is then an error result naming the problem.
    pub fn validator(&self) -> Result<&Validator, &SchemaDefinitionError> {
        self.inner
            .validator
            .get_or_init(|| Validator::new(self.inner.parameters.clone()))
            .as_ref()
    }

    /// Run the tool directly, outside the pipeline (no validation, no hooks, no events).
    pub fn execute(&self, run: ToolExecution) -> BoxFuture<'static, Result<ToolResult, ToolError>> {
        self.inner.executor.execute(run)
    }
}

impl fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentTool")
            .field("name", &self.inner.name)
            .field("label", &self.inner.label)
            .field("execution_mode", &self.inner.execution_mode)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(receiver: &UpdateReceiver) -> Vec<String> {
        std::iter::from_fn(|| receiver.try_recv())
            .map(|sent| match sent {
                Sent::Update(r) => r.text_lines(),
                Sent::Log(line) => format!("log {:?}: {}", line.level, line.message),
            })
            .collect()
    }

    #[test]
    fn log_lines_come_in_order_bounded_and_cut_and_the_consumer_hears_of_what_was_dropped() {
        let (sink, mut receiver) = CallSink::channel();
        sink.log(LogLevel::Info, "first");
        sink.update(ToolResult::text("partial"));
        sink.log(LogLevel::Error, "x".repeat(LOG_LINE_MAX_BYTES + 10));
        let got = texts(&receiver);
        assert_eq!(got[0], "log Info: first");
        assert_eq!(got[1], format!("log Error: {}…", "x".repeat(LOG_LINE_MAX_BYTES)));
        assert_eq!(got[2], "partial");

        for i in 0..PENDING_LOG_LINES + 5 {
            sink.log(LogLevel::Debug, format!("{i}"));
        }
        let got = texts(&receiver);
        assert_eq!(got.len(), PENDING_LOG_LINES + 1);
        assert_eq!(
            got[0],
            "log Warn: 5 log lines were dropped: the tool wrote faster than they were sent"
        );
        assert_eq!(got[1], "log Debug: 0");

        receiver.close();
        sink.log(LogLevel::Info, "late");
        assert!(texts(&receiver).is_empty(), "a settled call's lines are ignored");
    }

    #[tokio::test]
    async fn taps_see_every_partial_result_first_and_stack_newest_first() {
        let (sink, receiver) = CallSink::channel();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let outer = sink.tapped(move |r: ToolResult| {
            log.lock().unwrap().push(format!("outer {}", r.text_lines()));
            Some(r)
        });
        let log = seen.clone();
        let inner = outer.tapped(move |r: ToolResult| {
            log.lock().unwrap().push(format!("inner {}", r.text_lines()));
            (r.text_lines() != "drop").then_some(r)
        });
        inner.update(ToolResult::text("keep"));
        inner.update(ToolResult::text("drop"));
        assert!(
            inner
                .update_or_stop(ToolResult::text("waited"), std::future::pending())
                .await
        );
        inner.log(LogLevel::Info, "a line passes untouched");
        assert_eq!(
            *seen.lock().unwrap(),
            [
                "inner keep",
                "outer keep",
                "inner drop",
                "inner waited",
                "outer waited"
            ]
        );
        assert_eq!(
            texts(&receiver),
            ["log Info: a line passes untouched", "keep", "waited"]
        );
        // A tap on a sink with no consumer still runs (it may be the only reader of its side channel).
        let log = seen.clone();
        let alone = CallSink::discard().tapped(move |r: ToolResult| {
            log.lock().unwrap().push(r.text_lines());
            None
        });
        alone.update(ToolResult::text("side channel"));
        assert_eq!(seen.lock().unwrap().last().unwrap(), "side channel");
    }

    #[test]
    fn a_flood_without_a_consumer_keeps_the_oldest_and_the_newest_within_the_bound() {
        let (sink, receiver) = CallSink::channel();
        for i in 0..10_000 {
            sink.update(ToolResult::text(format!("{i}")));
        }
        let got = texts(&receiver);
        assert_eq!(got.len(), PENDING_UPDATES);
        assert_eq!(got[0], "0");
        assert_eq!(got[PENDING_UPDATES - 2], format!("{}", PENDING_UPDATES - 2));
        assert_eq!(
            got[PENDING_UPDATES - 1],
            "9999",
            "the newest update wins the last place"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_blocking_producer_waits_for_room_and_loses_nothing() {
        let (sink, receiver) = CallSink::channel();
        let runtime = tokio::runtime::Handle::current();
        let producer = tokio::task::spawn_blocking(move || {
            (0..1000).all(|i| {
                sink.update_blocking(&runtime, ToolResult::text(format!("{i}")), std::future::pending())
            })
        });
        let mut got = Vec::new();
        while got.len() < 1000 {
            let Sent::Update(partial) = receiver.recv().await else {
                panic!("no log line was written")
            };
            got.push(partial.text_lines());
            if got.len() % 100 == 0 {
                // A slow consumer: the producer must wait, never exceed the bound.
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                assert!(receiver.inner.queue().len() <= PENDING_UPDATES);
            }
        }
        assert!(producer.await.unwrap());
        let expected: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        assert_eq!(got, expected);
    }

    #[tokio::test]
    async fn a_waiting_producer_gives_up_when_stopped_or_when_the_call_settles() {
        let (sink, mut receiver) = CallSink::channel();
        for i in 0..PENDING_UPDATES {
            sink.update(ToolResult::text(format!("{i}")));
        }
        let stopped = sink
            .update_or_stop(ToolResult::text("late"), std::future::ready(()))
            .await;
        assert!(!stopped, "a full queue and a stop: the update is dropped");
        let waiting = tokio::spawn({
            let sink = sink.clone();
            async move {
                sink.update_or_stop(ToolResult::text("after"), std::future::pending())
                    .await
            }
        });
        tokio::task::yield_now().await;
        receiver.close();
        assert!(
            waiting.await.unwrap(),
            "released, not stuck, when the call settles"
        );
        sink.update(ToolResult::text("ignored"));
        let got = texts(&receiver);
        assert_eq!(got.len(), PENDING_UPDATES);
        assert!(!got.contains(&"ignored".to_string()) && !got.contains(&"after".to_string()));
    }
}
