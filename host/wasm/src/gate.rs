//! The one door into a plugin's code. Every call into a component — `metadata` and `list-tools` at load,
//! `execute`, `prepare-arguments`, `mutated-path`, `prepare-loadout`, both handler exports, the `offers`
//! exports (`crate::offers`) — passes through
//! [`enter`] (on a blocking-capable thread) or [`enter_async`], and both through one body ([`run`]): it takes an
//! instance slot, leases an instance under the call's grants from the host's [`Instances`] (deadline, memory
//! limit, cancellation, fuel), runs the export, sends the plugin's output to the log, gives the instance back,
//! and turns every failure into an error that names the plugin and the limit or fault. A second path into a
//! component would be where the sandbox leaks, so there is none: the one other place that instantiates a
//! component, a spare made ahead of the next call (`crate::instances::recycler`), builds its store with the
//! same `PluginInner::store` (the call's grants, memory limit and budget, a deadline), runs no export, and is
//! leased through this gate, which re-arms it for its call.

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use toolwright_sdk::{HostFault, ToolError};
use wasmtime::Store;
use wasmtime::component::Instance;

use crate::grants::WasmGrants;
use crate::instances::{Call, Ending, Maker, NoSlot, Purpose, Unmade};
use crate::state::PluginState;
use tokio::sync::OwnedSemaphorePermit;
use toolwright_core::definition::ToolContext;
use toolwright_core::pipeline::{Placement, Work};
use toolwright_core::tool::CallSink;

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
    /// A built-in's short call, wherever it is placed (see [`WasmGrants::work`]).
    pub short: bool,
    /// How the call asks the client that made it, for tool executions only.
    pub client: Option<crate::state::CallClient>,
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
            short: false,
            client: None,
        }
    }
}

/// Run `body` in a fresh instance of `plugin` under `grants`, on this (blocking-capable) thread: the gate's
/// synchronous side. Waiting for a slot ends at the call's cancellation or deadline.
pub(crate) fn enter<T>(
    plugin: &dyn Maker,
    grants: &WasmGrants,
    entry: Entry,
    body: impl FnOnce(&mut Store<PluginState>, &Instance) -> wasmtime::Result<T>,
) -> Result<T, ToolError> {
    let deadline = grants.timeout.map(|t| Instant::now() + t);
    let slot = plugin
        .instances()
        .slot_blocking(&entry.cancel, deadline)
        .map_err(|no| no_slot(plugin.name(), grants, no))?;
    run(plugin, grants, slot, Purpose::Once, entry, body)
}

/// The gate's asynchronous side: the slot is awaited (ending with the call's cancellation, so a nested call
/// queued behind its own ancestors is released by them), then the call runs where its
/// [`Placement`](toolwright_core::pipeline::Placement) says: right here when it runs alone (no thread hop),
/// else on a short-work thread for a built-in ([`WasmGrants::work`]) or on a blocking thread.
pub(crate) async fn enter_async<T: Send + 'static, P: Maker + 'static>(
    plugin: &Arc<P>,
    grants: Arc<WasmGrants>,
    entry: Entry,
    body: impl FnOnce(&mut Store<PluginState>, &Instance) -> wasmtime::Result<T> + Send + 'static,
) -> Result<T, ToolError> {
    let instances = plugin.instances();
    let slot = instances
        .slot(&entry.cancel)
        .await
        .map_err(|no| no_slot(plugin.name(), &grants, no))?;
    let export = entry.export;
    let cancel = entry.cancel.clone();
    // A call that runs alone is placed here: what it sends and the nested calls it waits for, it serves itself
    // (`toolwright_core::pipeline::runs_here`), so it may stream and nest. Beside others, a built-in's call
    // goes to a short-work thread, as its native twin does: a thousand at once do not each wake (or start) a
    // thread of tokio's blocking pool. (A third party's may wait for its nested calls: it takes a thread of
    // its own.)
    let placement = Placement::of(grants.work);
    let here = placement == Placement::Here;
    let mut entry = entry;
    if grants.work == Work::Short {
        entry.short = true;
        entry.session = None;
    }
    // A tool execution or a hook takes an idle instance of the plugin's pool when one waits: a spare (made
    // ahead, no call ran in it) or, where the grants allow reuse, one an earlier call left. One that runs
    // alone has its store dropped and the next call's spare made after it, on another thread
    // (`crate::instances::recycler`); beside others, where every core has calls to run, it drops its store itself.
    let purpose = match entry.reusable {
        true => Purpose::Call {
            grants: grants.clone(),
            alone: here.then(|| plugin.clone() as Arc<dyn Maker>),
        },
        false => Purpose::Once,
    };
    let inner = plugin.clone();
    let work = move || run(&*inner, &grants, slot, purpose, entry, body);
    let ran = placement.run(&cancel, work).await;
    instances.call_ended();
    let failed = |why: &str| {
        Err(ToolError::host(
            HostFault::Trap,
            format!(
                "The plugin {} failed: its `{export}` call did not finish: {why}",
                plugin.name()
            ),
        ))
    };
    match ran {
        Ok(outcome) => outcome,
        Err(toolwright_core::pipeline::Blocked::Panicked(_)) => failed("the host panicked"),
        // Cancelled while it waited for a short-work thread: it never started.
        Err(toolwright_core::pipeline::Blocked::Aborted) if cancel.is_cancelled() => Err(cancelled()),
        Err(toolwright_core::pipeline::Blocked::Aborted) => failed("the runtime shut down"),
    }
}

/// The one body of every call: lease an instance holding `slot` for `purpose`, run `body` (the export) in it,
/// give it back, and name what failed.
fn run<T>(
    plugin: &dyn Maker,
    grants: &WasmGrants,
    slot: OwnedSemaphorePermit,
    purpose: Purpose,
    entry: Entry,
    body: impl FnOnce(&mut Store<PluginState>, &Instance) -> wasmtime::Result<T>,
) -> Result<T, ToolError> {
    let Entry {
        export,
        cancel,
        updates,
        session,
        reusable: _,
        short,
        client,
    } = entry;
    let call = Call {
        cancel: cancel.clone(),
        updates,
        session,
        client,
    };
    let name = plugin.name();
    let mut lease = plugin
        .instances()
        .acquire(plugin, grants, slot, purpose, call)
        .map_err(|unmade| match unmade {
            Unmade::Setup(e) => fault(name, "cannot set up the sandbox", &e),
            Unmade::Unlinked(e) => ToolError::host(
                HostFault::Unavailable,
                format!("The plugin {name} cannot be loaded: {e}"),
            ),
            Unmade::Start(e, stderr) => with_stderr(describe_trap(name, &e, grants), &stderr),
            Unmade::Failed(e) => fault(name, "cannot instantiate", &e),
        })?;
    lease.store.data_mut().call.short = short;
    let outcome = body(&mut lease.store, &lease.instance);
    lease.store.data().flush_output();
    let (result, ending) = match outcome {
        Ok(value) => (Ok(value), Ending::Returned),
        Err(_) if cancel.is_cancelled() => (Err(cancelled()), Ending::Failed),
        Err(trap) => {
            tracing::debug!(plugin = %name, export, "the call failed: {trap:#}");
            let stderr = lease.store.data().stderr_of_call();
            (
                Err(with_stderr(describe_trap(name, &trap, grants), &stderr)),
                Ending::Failed,
            )
        }
    };
    plugin.instances().release(plugin, lease, ending);
    result
}

/// Why a call had no slot, in words.
fn no_slot(plugin: &str, grants: &WasmGrants, no: NoSlot) -> ToolError {
    match no {
        NoSlot::Closed => ToolError::host(HostFault::Unavailable, "the plugin runtime is shutting down"),
        NoSlot::Cancelled => cancelled(),
        NoSlot::Deadline => stopped_message(plugin, grants, None),
    }
}

/// A call cancelled, as pi says it.
fn cancelled() -> ToolError {
    ToolError::host(HostFault::Cancelled, "Operation aborted")
}

pub(crate) fn fault(plugin: &str, what: &str, error: &wasmtime::Error) -> ToolError {
    ToolError::host(
        HostFault::Trap,
        format!("The plugin {} failed: {what}: {error:#}", plugin),
    )
}

/// A trap in words: a limit hit names the limit; anything else is a fault of the plugin.
pub(crate) fn describe_trap(plugin: &str, trap: &wasmtime::Error, grants: &WasmGrants) -> ToolError {
    if trap.downcast_ref::<crate::state::Stopped>().is_some() {
        return stopped_message(plugin, grants, None);
    }
    if let Some(asked) = trap.downcast_ref::<crate::state::AskedClient>() {
        return ToolError::host(
            HostFault::Cancelled,
            format!("The plugin {plugin} stopped: {asked}"),
        );
    }
    if let Some(over) = trap.downcast_ref::<crate::budget::OverCap>() {
        return ToolError::host(
            HostFault::Limit,
            format!("The plugin {} was stopped: {over}", plugin),
        );
    }
    if let Some(e) = trap.downcast_ref::<std::str::Utf8Error>() {
        return ToolError::host(
            HostFault::Malformed,
            format!(
                "The plugin {} returned a malformed value: a string that is not valid UTF-8 ({e})",
                plugin
            ),
        );
    }
    let text = format!("{trap:#}");
    if text.contains("forcing a memory growth failure") || text.contains("memory") && text.contains("grow") {
        return ToolError::host(
            HostFault::Limit,
            format!(
                "The plugin {} was stopped: it tried to use more than its memory limit of {} MiB",
                plugin,
                grants.memory.min(crate::MAX_MEMORY) >> 20
            ),
        );
    }
    // The model gets the trap in one line; the wasm backtrace goes to the log.
    tracing::warn!(plugin, "trap: {trap:?}");
    match trap.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::OutOfFuel) => ToolError::host(
            HostFault::Limit,
            format!(
                "The plugin {} was stopped: it used up its fuel of {} units",
                plugin,
                grants.fuel.unwrap_or(u64::MAX)
            ),
        ),
        Some(wasmtime::Trap::StackOverflow) => ToolError::host(
            HostFault::Trap,
            format!(
                "The plugin {} failed: it trapped: its call stack overflowed",
                plugin
            ),
        ),
        Some(wasmtime::Trap::UnreachableCodeReached) => ToolError::host(
            HostFault::Trap,
            format!(
                "The plugin {} failed: it trapped: it reached unreachable code (a panic, an abort or an uncaught exception)",
                plugin
            ),
        ),
        Some(other) => ToolError::host(
            HostFault::Trap,
            format!("The plugin {} failed: it trapped: {other}", plugin),
        ),
        None => fault(plugin, "it trapped", trap),
    }
}

pub(crate) fn stopped_message(plugin: &str, grants: &WasmGrants, said: Option<String>) -> ToolError {
    let limit = grants.timeout.map_or(0, |t| t.as_millis());
    let mut text = format!(
        "The plugin {} was stopped: it ran past its time limit of {limit} ms",
        plugin
    );
    if let Some(said) = said.filter(|s| !s.is_empty()) {
        text.push_str(&format!("\n\n{said}"));
    }
    ToolError::host(HostFault::Timeout, text)
}

/// How much of what a trapped plugin last wrote to stderr its error carries.
const STDERR_TAIL_LINES: usize = 20;
const STDERR_TAIL_BYTES: usize = 4096;

/// The line Rust's panic handler adds after the message: no use to the model, whose plugin cannot be rerun so.
const RUST_BACKTRACE_NOTE: &str = "note: run with `RUST_BACKTRACE=1`";

/// A Rust panic's line `thread '…' panicked at /build/dir/src/lib.rs:38:9:` with the file's name alone
/// (`lib.rs:38:9:`): where the plugin was built says nothing to the model, and may name its author's machine.
fn without_build_path(line: &str) -> String {
    const AT: &str = " panicked at ";
    let Some(at) = line.find(AT).map(|i| i + AT.len()) else {
        return line.to_owned();
    };
    let location = &line[at..];
    match location.rfind('/') {
        Some(slash) => format!("{}{}", &line[..at], &location[slash + 1..]),
        None => line.to_owned(),
    }
}

/// A trap's error with the last lines the plugin wrote to stderr: for a Python or JavaScript plugin (whose
/// runtime prints the traceback or the exception there, then aborts), that is what went wrong.
fn with_stderr(error: ToolError, stderr: &[u8]) -> ToolError {
    if error.host_fault() != Some(HostFault::Trap) {
        return error;
    }
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with(RUST_BACKTRACE_NOTE))
        .map(without_build_path)
        .collect();
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
pub(crate) fn run_here<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trap_s_stderr_names_no_build_path_and_no_backtrace_note() {
        let stderr =
            b"thread '<unnamed>' panicked at /home/ana/guard/src/lib.rs:38:9:\nguard asked to trap\n\
                       note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        let error = with_stderr(
            ToolError::host(HostFault::Trap, "The plugin g failed: it trapped"),
            stderr,
        );
        assert_eq!(
            error.message(),
            "The plugin g failed: it trapped\n\nThe plugin's last lines on stderr:\n\
             thread '<unnamed>' panicked at lib.rs:38:9:\nguard asked to trap"
        );
        // Other lines (a Python traceback's) are kept as they are.
        assert_eq!(
            without_build_path("  File \"/app/x.py\", line 3"),
            "  File \"/app/x.py\", line 3"
        );
    }
}
