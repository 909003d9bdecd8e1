//! The one door into a plugin's code. Every call into a component — `metadata` and `list-tools` at load,
//! `execute`, `prepare-arguments`, `mutated-path`, `prepare-loadout`, both handler exports — passes through
//! [`PluginInner::enter`]: it takes an instance slot, builds a fresh store under the call's grants (deadline,
//! memory limit, cancellation, fuel), instantiates, runs the export, sends the plugin's output to the log, and
//! turns every failure into an error that names the plugin and the limit or fault. A second path into a component
//! would be where the sandbox leaks, so there is none: the one other place that instantiates a component, a
//! spare made ahead of the next call (`crate::warm`), builds its store with the same `PluginInner::store` (the
//! call's grants, memory limit and budget, a deadline), runs no export, and hands the instance to this gate, which
//! re-arms it for its call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use toolwright_sdk::{HostFault, ToolError};
use wasmtime::Store;
use wasmtime::component::Instance;

use super::state::PluginState;
use super::{PluginInner, WasmGrants};
use toolwright_core::definition::ToolContext;
use toolwright_core::pipeline::{Placement, Work};
use toolwright_core::tool::CallSink;

/// How long a plugin may take to describe itself at load (its `metadata` and `list-tools`) when its policy sets
/// no `timeout-ms`: a plugin that loops there is skipped after this, so it cannot hold a start hostage.
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a caller waiting for an instance slot on a plain thread looks again (and at its deadline).
const SLOT_POLL: Duration = Duration::from_millis(1);

/// What one call into a plugin gets besides its grants.
pub(crate) struct Entry {
    /// The export, for errors and logs (`execute`, `tool_call`, …).
    pub export: &'static str,
    /// The call's cancellation.
    pub cancel: CancellationToken,
    /// Where partial results go.
    pub updates: CallSink,
    /// The session context (nested calls), for tool executions only.
    pub session: Option<ToolContext>,
    /// Whether an idle instance may serve it and it may leave its instance for the next, when the grants say
    /// `instance = "reuse"` (tool executions and the handler hooks; never a description or a rendering).
    pub reusable: bool,
    /// A built-in's short call, wherever it is placed (see [`WasmGrants::in_place`]).
    pub inline: bool,
}

impl Entry {
    /// An entry with no cancellation of its own, no updates and no session: hooks and descriptions.
    pub fn bare(export: &'static str) -> Self {
        Entry {
            export,
            cancel: CancellationToken::new(),
            updates: CallSink::discard(),
            session: None,
            reusable: false,
            inline: false,
        }
    }
}

impl PluginInner {
    /// Run `body` in a fresh instance under `grants`, on this (blocking-capable) thread: the gate's synchronous
    /// side. Waiting for a slot ends at the call's cancellation or deadline.
    pub(crate) fn enter<T>(
        &self,
        grants: &WasmGrants,
        entry: Entry,
        body: impl FnOnce(&mut Store<PluginState>, &Instance) -> wasmtime::Result<T>,
    ) -> Result<T, ToolError> {
        let deadline = grants.timeout.map(|t| Instant::now() + t);
        let slot = loop {
            match self.slots.clone().try_acquire_owned() {
                Ok(slot) => break slot,
                Err(tokio::sync::TryAcquireError::Closed) => {
                    return Err(ToolError::host(
                        HostFault::Unavailable,
                        "the plugin runtime is shutting down",
                    ));
                }
                Err(tokio::sync::TryAcquireError::NoPermits) => {}
            }
            if entry.cancel.is_cancelled() {
                return Err(ToolError::host(HostFault::Cancelled, "Operation aborted"));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(self.stopped_message(grants, None));
            }
            std::thread::sleep(SLOT_POLL);
        };
        let leave = crate::warm::Leave {
            slot,
            alone: false,
            spare: None,
            after_idle: false,
        };
        self.enter_with_slot(grants, None, None, leave, entry, body)
    }

    /// The gate's asynchronous side: the slot is awaited (ending with the call's cancellation, so a nested call
    /// queued behind its own ancestors is released by them), then the call runs where its
    /// [`Placement`](toolwright_core::pipeline::Placement) says: right here when it runs alone (no thread hop),
    /// else on a short-work thread for a built-in ([`WasmGrants::in_place`]) or on a blocking thread.
    pub(crate) async fn enter_async<T: Send + 'static>(
        self: &Arc<Self>,
        grants: Arc<WasmGrants>,
        entry: Entry,
        body: impl FnOnce(&mut Store<PluginState>, &Instance) -> wasmtime::Result<T> + Send + 'static,
    ) -> Result<T, ToolError> {
        let slot = tokio::select! {
            slot = self.slots.clone().acquire_owned() => {
                slot.map_err(|_| ToolError::host(HostFault::Unavailable, "the plugin runtime is shutting down"))?
            }
            () = entry.cancel.cancelled() => return Err(ToolError::host(HostFault::Cancelled, "Operation aborted")),
        };
        let inner = self.clone();
        let export = entry.export;
        let cancel = entry.cancel.clone();
        // A call that runs alone is placed here: what it sends and the nested calls it waits for, it serves itself
        // (`toolwright_core::pipeline::runs_here`), so it may stream and nest. Beside others, a built-in's call
        // goes to a short-work thread, as its native twin does: a thousand at once do not each wake (or start) a
        // thread of tokio's blocking pool. (A third party's may wait for its nested calls: it takes a thread of
        // its own.)
        let placement = Placement::of(if grants.in_place {
            Work::Short
        } else {
            Work::Relaying
        });
        let here = placement == Placement::Here;
        let mut entry = entry;
        if grants.in_place {
            entry.inline = true;
            entry.session = None;
        }
        // A tool execution or a hook takes an idle instance of the plugin's pool when one waits: a spare (made
        // ahead, no call ran in it) or, where the grants allow reuse, one an earlier call left. One that runs
        // alone has its store dropped and the next call's spare made after it, on another thread
        // (`crate::warm`); beside others, where every core has calls to run, it drops its store itself.
        let taken = entry.reusable.then(|| self.pool.take(&grants)).flatten();
        let leave = crate::warm::Leave {
            slot,
            alone: here,
            spare: (here && entry.reusable).then(|| (self.clone(), grants.clone())),
            after_idle: here && crate::warm::host_was_idle(),
        };
        let work = move || {
            let reuse = (entry.reusable && grants.reuse.is_some()).then_some(&grants);
            inner.enter_with_slot(&grants, reuse, taken, leave, entry, body)
        };
        let failed = |why: String| {
            Err(ToolError::host(
                HostFault::Trap,
                format!(
                    "The plugin {} failed: its `{export}` call did not finish: {why}",
                    self.name
                ),
            ))
        };
        let ran = placement.run(&cancel, work).await;
        crate::warm::call_ended();
        match ran {
            Ok(outcome) => outcome,
            Err(toolwright_core::pipeline::Blocked::Panicked(_)) => failed("the host panicked".into()),
            // Cancelled while it waited for a short-work thread: it never started.
            Err(toolwright_core::pipeline::Blocked::Aborted) if cancel.is_cancelled() => {
                Err(ToolError::host(HostFault::Cancelled, "Operation aborted"))
            }
            Err(toolwright_core::pipeline::Blocked::Aborted) => failed("the runtime shut down".into()),
        }
    }

    /// Run `body` in an instance holding `slot`: `taken` from the plugin's pool (a spare, or with `reuse` an
    /// instance an earlier call left), else a new one. With `reuse` (the call's grants, when they allow reuse and
    /// the export may), an instance that ends its call cleanly goes back to the pool (see [`crate::reuse`]); any
    /// other is dropped as `leave` says ([`crate::warm::retire`]).
    fn enter_with_slot<T>(
        &self,
        grants: &WasmGrants,
        reuse: Option<&Arc<WasmGrants>>,
        taken: Option<crate::reuse::Taken>,
        leave: crate::warm::Leave,
        entry: Entry,
        body: impl FnOnce(&mut Store<PluginState>, &Instance) -> wasmtime::Result<T>,
    ) -> Result<T, ToolError> {
        let Entry {
            export,
            cancel,
            updates,
            session,
            reusable: _,
            inline,
        } = entry;
        let setup = |e: wasmtime::Error| self.fault("cannot set up the sandbox", &e);
        let (mut store, instance, calls) = match taken {
            Some((mut store, instance, calls)) => {
                self.rearm(&mut store, grants, cancel.clone(), updates, session)
                    .map_err(setup)?;
                if calls == 0 {
                    // A spare: what its instantiation printed belongs to this call, as a new instance's would.
                    store.data_mut().output_from = (0, 0);
                }
                (store, instance, calls)
            }
            None => {
                let mut store = self
                    .store(grants, cancel.clone(), updates, session)
                    .map_err(setup)?;
                let linked = self.linked().map_err(|e| {
                    ToolError::host(
                        HostFault::Unavailable,
                        format!("The plugin {} cannot be loaded: {e}", self.name),
                    )
                })?;
                let began = Instant::now();
                match linked.pre.instantiate(&mut store) {
                    Ok(instance) => {
                        self.turnover.instantiated(began.elapsed());
                        (store, instance, 0)
                    }
                    // A start function (or a constructor in another language's runtime) may loop or trap too.
                    Err(e)
                        if e.downcast_ref::<wasmtime::Trap>().is_some()
                            || e.downcast_ref::<super::state::Stopped>().is_some() =>
                    {
                        let error = with_stderr(self.describe_trap(&e, grants), &store);
                        crate::warm::retire(store, leave);
                        return Err(error);
                    }
                    Err(e) => return Err(self.fault("cannot instantiate", &e)),
                }
            }
        };
        store.data_mut().call.inline = inline;
        let outcome = body(&mut store, &instance);
        store.data().flush_output();
        let result = match outcome {
            Ok(value) => {
                // Only an instance that finished in time, uncancelled, with room left for its output, serves
                // again; one that trapped or was stopped never does (it is retired below, with its processes).
                if let Some(grants) = reuse
                    && !store.data().call.should_stop()
                    && store.data().output_has_room()
                {
                    store.data_mut().end_call();
                    match self.pool.put(grants, store, instance, calls + 1) {
                        Ok(()) => return Ok(value),
                        Err(back) => store = back,
                    }
                }
                Ok(value)
            }
            Err(_) if cancel.is_cancelled() => {
                Err(ToolError::host(HostFault::Cancelled, "Operation aborted"))
            }
            Err(trap) => {
                tracing::debug!(plugin = %self.name, export, "the call failed: {trap:#}");
                Err(with_stderr(self.describe_trap(&trap, grants), &store))
            }
        };
        crate::warm::retire(store, leave);
        result
    }
}

/// How much of what a trapped plugin last wrote to stderr its error carries.
const STDERR_TAIL_LINES: usize = 20;
const STDERR_TAIL_BYTES: usize = 4096;

/// A trap's error with the last lines the plugin wrote to stderr: for a Python or JavaScript plugin (whose
/// runtime prints the traceback or the exception there, then aborts), that is what went wrong.
fn with_stderr(error: ToolError, store: &Store<PluginState>) -> ToolError {
    if error.host_fault() != Some(HostFault::Trap) {
        return error;
    }
    let bytes = store.data().stderr_of_call();
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return error;
    }
    let mut tail = lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n");
    if tail.len() > STDERR_TAIL_BYTES {
        let mut cut = tail.len() - STDERR_TAIL_BYTES;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail = format!("…{}", &tail[cut..]);
    }
    ToolError::host(
        HostFault::Trap,
        format!(
            "{}\n\nThe plugin's last lines on stderr:\n{tail}",
            error.message()
        ),
    )
}

/// Run `f`, a synchronous call into a plugin, from wherever a synchronous hook is called (the pipeline's
/// `prepare_arguments`, a loadout hook, a tool's `mutated-path` before its first await): on a multi-threaded
/// tokio runtime the worker hands its other tasks off first, so a plugin that takes its time (up to its
/// deadline) does not stall them; elsewhere it simply runs here.
pub(crate) fn run_blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}
