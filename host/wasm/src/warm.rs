//! Work a fresh instance needs that the call need not wait for, done on one background thread for a call that
//! runs alone (`toolwright_core::pipeline::may_block_here`: a pipeline that works in place, as `exec` and `mcp`
//! run theirs, with nothing beside the call; there a core is free, where beside others every core has calls to
//! run): after it answers, its finished store is dropped there (wasmtime resets its memory and tables for the
//! slot's next instance when it drops), then a *spare* is made there, an instance of the plugin under the call's
//! grants, ready for the next call under them. One job a call: a call wakes the thread once.
//!
//! A spare is still a fresh instance: no call ran in it (instantiation runs no export), it has its own store
//! built exactly as the call would build it, and the call makes it its own (`rearm`: cancellation, deadline,
//! fuel, updates, session) before it runs. It waits in the plugin's pool ([`crate::reuse`]) at most
//! [`crate::reuse::SPARE_IDLE`], counts among the [`crate::reuse::MAX_IDLE`] idle instances, and gives its
//! memory back to the host's budget as they do. One that cannot be made (a start function that traps, a pool
//! out of slots) is simply not there: the call instantiates as it always did, and reports what fails.
//!
//! What a call's end must do at once is done before its store is handed here ([`PluginState::retire`]): its
//! processes are killed, its nested calls cancelled, its resources (files, sockets) closed, its memory given
//! back to the host's budget; its slot (the bound on live instances) is released only once the store is gone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use toolwright_core::tool::UpdateSink;
use wasmtime::Store;

use crate::state::PluginState;
use crate::{LOAD_TIMEOUT, PluginInner, WasmGrants};

/// How many jobs may wait for the background thread: past it, a store is dropped by the call that finished with
/// it and no spare is made, so that one thread never becomes what a busy host waits for. (Only calls that run
/// alone hand it work; calls beside others, where every core has calls to run, drop their own stores.)
const MAX_PENDING: usize = 4;

/// Jobs sent and not yet done.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// How a call leaves its instance.
pub(crate) struct Leave {
    /// Its place under the bound on live instances, freed once the store is gone.
    pub slot: OwnedSemaphorePermit,
    /// It ran alone: its store is dropped on the background thread.
    pub alone: bool,
    /// The plugin and grants to make the next call's spare for, there, after the drop (a tool execution or a
    /// hook that ran alone).
    pub spare: Option<(Arc<PluginInner>, Arc<WasmGrants>)>,
}

/// What the background thread does: drop a finished store, free its slot, then make a spare for calls of the
/// plugin under the grants, if asked and none waits. One job a call, so a call wakes the thread once. (Its fields
/// drop in this order too: a slot is never free while its instance still holds wasmtime's pool slot.)
struct Job(
    Store<PluginState>,
    OwnedSemaphorePermit,
    Option<(Arc<PluginInner>, Arc<WasmGrants>)>,
);

/// The background thread's queue (none when it could not start: then the work is done in place, or skipped).
fn queue() -> Option<&'static Mutex<Sender<Job>>> {
    static QUEUE: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (send, receive) = channel::<Job>();
            let started = std::thread::Builder::new()
                .name("toolwright-warm".into())
                .spawn(move || {
                    for Job(store, slot, spare) in receive {
                        PENDING.fetch_sub(1, Ordering::AcqRel);
                        drop(store);
                        drop(slot);
                        if let Some((plugin, grants)) = spare {
                            plugin.make_spare(&grants);
                        }
                    }
                });
            match started {
                Ok(_) => Some(Mutex::new(send)),
                Err(e) => {
                    tracing::warn!("cannot start the thread that prepares instances: {e}");
                    None
                }
            }
        })
        .as_ref()
}

/// Hand `job` to the background thread; it comes back when there is none, or [`MAX_PENDING`] wait already.
fn send(job: Job) -> Result<(), Job> {
    let Some(queue) = queue() else {
        return Err(job);
    };
    if PENDING.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING {
        PENDING.fetch_sub(1, Ordering::AcqRel);
        return Err(job);
    }
    let sent = queue
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send(job)
        .map_err(|e| e.0);
    if sent.is_err() {
        PENDING.fetch_sub(1, Ordering::AcqRel);
    }
    sent
}

/// Let go of a finished call's store: what the call's end owes is done now ([`PluginState::retire`]); for a
/// call that ran alone, the store's drop (the instance's reset), the release of its slot and the next call's
/// spare happen on the background thread after the call, else the store is dropped here.
pub(crate) fn retire(mut store: Store<PluginState>, leave: Leave) {
    store.data_mut().retire();
    let Leave { slot, alone, spare } = leave;
    // Grants that allow reuse need no spare: their finished instances wait in the pool already.
    let spare = spare.filter(|(_, grants)| grants.reuse.is_none());
    let job = Job(store, slot, spare);
    let left = if alone { send(job) } else { Err(job) };
    // Dropped here: the store, then its slot (a job's fields drop in order: the slot outlives the instance).
    drop(left);
}

impl PluginInner {
    /// Make a spare under `grants` and keep it in the pool, unless one waits there already. A failure leaves
    /// none: the call that would have taken it instantiates itself, and reports what fails then.
    fn make_spare(&self, grants: &Arc<WasmGrants>) {
        if self.pool.has_spare(grants) {
            return;
        }
        let Ok(linked) = self.linked() else {
            return;
        };
        let Ok(mut store) = self.store(grants, CancellationToken::new(), UpdateSink::discard(), None) else {
            return;
        };
        // A start function that loops holds this thread no longer than a load's description may take, whatever
        // the grants' own limit (there may be none): the jobs behind it wait for it.
        let limit = grants.timeout.unwrap_or(LOAD_TIMEOUT).min(LOAD_TIMEOUT);
        store.data_mut().call.deadline = Some((std::time::Instant::now() + limit, limit));
        let Ok(instance) = linked.pre.instantiate(&mut store) else {
            return;
        };
        // The exports are type-checked here too, once, as a call would at its start.
        let checked = match (&linked.tool, &linked.handler) {
            (Some(_), _) => self.tool_exports(&mut store, &instance).is_ok(),
            (None, Some(_)) => self.handler_exports(&mut store, &instance).is_ok(),
            (None, None) => false,
        };
        if checked && let Err(store) = self.pool.put_spare(grants, store, instance) {
            drop(store);
        }
    }
}
