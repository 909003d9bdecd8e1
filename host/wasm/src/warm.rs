//! Work a fresh instance needs that the call need not wait for, done on one background thread for a call that
//! is placed here (`toolwright_core::pipeline::Placement::Here`: a pipeline that works here, as `exec` and `mcp`
//! run theirs, with nothing beside the call; there a core is free, where beside others every core has calls to
//! run): after it answers, its finished store is dropped there (wasmtime resets its memory and tables for the
//! slot's next instance when it drops), then a *spare* is made there, an instance of the plugin under the call's
//! grants, ready for the next call under them. One job a call: a call wakes the thread once. (It also drops the
//! spares evicted to make room for reused instances: [`drop_later`].)
//!
//! Handing the work over is not free: the thread must be woken, and while it works on the other core beside the
//! next call, the two share an address space whose mappings it changes. For a plugin whose instances are cheap
//! to make and drop (a small Rust tool: some 15 µs) called back to back, that costs the next call more than it
//! saves; so the work is handed over only when the plugin's measured [`Turnover`] is at least
//! [`HAND_OFF_FROM`], or when the call came after the host had been idle ([`IDLE_GAP`]: the next call, too, is
//! likely to find the work done, and caches gone cold make the work dearer than measured). Else the call drops
//! its store itself and the next one instantiates, as calls beside others do.
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

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use toolwright_core::tool::CallSink;
use wasmtime::Store;

use crate::state::PluginState;
use crate::{LOAD_TIMEOUT, Linked, PluginInner, WasmGrants};

/// How many jobs may wait for the background thread: past it, a store is dropped by the call that finished with
/// it and no spare is made, so that one thread never becomes what a busy host waits for. (Only calls that run
/// alone hand it their stores; calls beside others, where every core has calls to run, drop their own. The one
/// other job is a spare evicted to make room for a reused instance, [`drop_later`], rare and owed to no call.)
pub(crate) const MAX_PENDING: usize = 4;

/// Jobs sent and not yet done.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// The least cost of making and dropping one of a plugin's instances at which a call that runs alone hands both
/// to the background thread even when calls come back to back.
pub(crate) const HAND_OFF_FROM: Duration = Duration::from_micros(50);

/// How long the host must have been without a call into a plugin for it to count as idle when one comes.
pub(crate) const IDLE_GAP: Duration = Duration::from_millis(1);

/// What a plugin's instances cost to make (instantiation) and to drop (wasmtime's reset of the slot), as
/// measured: a running mean that weighs the latest measurement a quarter, in nanoseconds (0: not measured yet).
#[derive(Default)]
pub(crate) struct Turnover {
    instantiate: AtomicU64,
    reset: AtomicU64,
}

impl Turnover {
    /// An instantiation took `took`.
    pub fn instantiated(&self, took: Duration) {
        Self::record(&self.instantiate, took);
    }

    /// A drop took `took`.
    pub fn reset(&self, took: Duration) {
        Self::record(&self.reset, took);
    }

    fn record(mean: &AtomicU64, took: Duration) {
        let took = nanos(took);
        // Two calls recording at once may lose one measurement: a mean needs no more.
        let old = mean.load(Ordering::Relaxed);
        let new = if old == 0 { took } else { old / 4 * 3 + took / 4 };
        mean.store(new.max(1), Ordering::Relaxed);
    }

    /// Whether making and dropping an instance costs enough that a call that comes at once gains from having
    /// them done on the background thread: at least [`HAND_OFF_FROM`] (unmeasured: no).
    pub fn pays_to_hand_off(&self) -> bool {
        let cost = self.instantiate.load(Ordering::Relaxed) + self.reset.load(Ordering::Relaxed);
        cost >= nanos(HAND_OFF_FROM)
    }
}

/// When the latest call through the gate's asynchronous side ended, in nanoseconds since [`epoch`] (0: none
/// yet).
static LAST_END: AtomicU64 = AtomicU64::new(0);

/// The time [`LAST_END`] counts from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds since [`epoch`], at least 1.
fn now() -> u64 {
    nanos(epoch().elapsed()).max(1)
}

/// `took` in nanoseconds (saturating).
fn nanos(took: Duration) -> u64 {
    u64::try_from(took.as_nanos()).unwrap_or(u64::MAX)
}

/// A call ended (every call through the gate's asynchronous side says so, alone or not).
pub(crate) fn call_ended() {
    LAST_END.store(now(), Ordering::Relaxed);
}

/// Whether the calls' latest end ([`call_ended`]) was at least [`IDLE_GAP`] ago, or there was none: asked by a
/// call that runs alone, at its start, to guess whether the call after it will come at once too.
pub(crate) fn host_was_idle() -> bool {
    let last = LAST_END.load(Ordering::Relaxed);
    last == 0 || now().saturating_sub(last) >= nanos(IDLE_GAP)
}

/// Whether a finished store goes to the background thread: only for a call that ran alone, and then as
/// `forced` says if it says, else when the call came after the host had been idle, or the plugin's instances
/// are dear enough to make and drop (`pays`; a store not followed by a spare is always handed over: its drop is
/// all there is to it).
fn hands_off(alone: bool, after_idle: bool, pays: Option<bool>, forced: Option<bool>) -> bool {
    alone && forced.unwrap_or(after_idle || pays.unwrap_or(true))
}

/// `TOOLWRIGHT_HAND_OFF=always` or `never`, read once: the choice made for every call that runs alone, whatever
/// was measured (for benchmarks that compare the two, and tests that must take one path); unset: measured.
fn forced() -> Option<bool> {
    static FORCED: OnceLock<Option<bool>> = OnceLock::new();
    *FORCED.get_or_init(|| match std::env::var("TOOLWRIGHT_HAND_OFF").as_deref() {
        Ok("always") => Some(true),
        Ok("never") => Some(false),
        Ok(other) => {
            tracing::warn!("TOOLWRIGHT_HAND_OFF={other} is neither `always` nor `never`: ignored");
            None
        }
        Err(_) => None,
    })
}

/// How a call leaves its instance.
pub(crate) struct Leave {
    /// Its place under the bound on live instances, freed once the store is gone.
    pub slot: OwnedSemaphorePermit,
    /// It ran alone: its store is dropped on the background thread.
    pub alone: bool,
    /// The plugin and grants to make the next call's spare for, there, after the drop (a tool execution or a
    /// hook that ran alone).
    pub spare: Option<(Arc<PluginInner>, Arc<WasmGrants>)>,
    /// It came after the host had been idle ([`host_was_idle`]).
    pub after_idle: bool,
}

/// What the background thread does.
enum Job {
    /// Drop a finished store, free its slot, then make a spare for calls of the plugin under the grants, if asked
    /// and none waits. One job a call, so a call wakes the thread once. (Its fields drop in this order too: a slot
    /// is never free while its instance still holds wasmtime's pool slot.)
    Retire(
        Store<PluginState>,
        OwnedSemaphorePermit,
        Option<(Arc<PluginInner>, Arc<WasmGrants>)>,
    ),
    /// Drop something whose drop is dear but owed to nobody (a spare evicted to make room: [`drop_later`]).
    Drop(Box<dyn Send>),
}

/// The background thread's queue (none when it could not start: then the work is done in place, or skipped).
fn queue() -> Option<&'static Mutex<Sender<Job>>> {
    static QUEUE: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (send, receive) = channel::<Job>();
            let started = std::thread::Builder::new()
                .name("toolwright-warm".into())
                .spawn(move || {
                    for job in receive {
                        PENDING.fetch_sub(1, Ordering::AcqRel);
                        let (store, slot, spare) = match job {
                            Job::Retire(store, slot, spare) => (store, slot, spare),
                            Job::Drop(value) => {
                                drop(value);
                                continue;
                            }
                        };
                        if let Some((plugin, _)) = &spare {
                            plugin.keep_written_resident();
                        }
                        drop_store(store, spare.as_ref());
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
/// call that ran alone, when it pays (see the module), the store's drop (the instance's reset), the release of
/// its slot and the next call's spare happen on the background thread after the call, else the store is dropped
/// here.
pub(crate) fn retire(mut store: Store<PluginState>, leave: Leave) {
    store.data_mut().retire();
    let Leave {
        slot,
        alone,
        spare,
        after_idle,
    } = leave;
    // Grants that allow reuse need no spare: their finished instances wait in the pool already.
    let spare = spare.filter(|(_, grants)| grants.reuse.is_none());
    let pays = spare
        .as_ref()
        .map(|(plugin, _)| plugin.turnover.pays_to_hand_off());
    if hands_off(alone, after_idle, pays, forced()) {
        // Dropped here if it comes back: the store, then its slot (a job's fields drop in order: the slot
        // outlives the instance).
        drop(send(Job::Retire(store, slot, spare)));
        return;
    }
    drop_store(store, spare.as_ref());
    drop(slot);
}

/// Drop a finished `store`; when a spare of the plugin follows it, timing the drop (wasmtime's reset), which is
/// half of what decides whether handing the work over pays ([`Turnover`]).
fn drop_store(store: Store<PluginState>, spare: Option<&(Arc<PluginInner>, Arc<WasmGrants>)>) {
    match spare {
        Some((plugin, _)) => plugin.drop_timed(store),
        None => drop(store),
    }
}

/// Drop `value` on the background thread if it is there and not busy, else here: for what is dear to drop and
/// owed to no call (a spare evicted by a call that needs its room: its drop is wasmtime's reset of its slot).
pub(crate) fn drop_later(value: impl Send + 'static) {
    drop(send(Job::Drop(Box::new(value))));
}

impl PluginInner {
    /// Before a finished store of this plugin is dropped: merge the runs of pages its calls wrote, so that
    /// wasmtime's reset keeps them all resident (`crate::resident`).
    fn keep_written_resident(&self) {
        if let Some(Ok(Linked {
            image: Some(image), ..
        })) = self.linked.get()
        {
            image.keep_written_resident();
        }
    }

    /// Drop `store`, measuring the reset.
    fn drop_timed(&self, store: Store<PluginState>) {
        let began = Instant::now();
        drop(store);
        self.turnover.reset(began.elapsed());
    }

    /// Make a spare under `grants` and keep it in the pool, unless one waits there already. A failure leaves
    /// none: the call that would have taken it instantiates itself, and reports what fails then.
    pub(crate) fn make_spare(&self, grants: &Arc<WasmGrants>) {
        if self.pool.has_spare(grants) {
            return;
        }
        let Ok(linked) = self.linked() else {
            return;
        };
        let Ok(mut store) = self.store(grants, CancellationToken::new(), CallSink::discard(), None) else {
            return;
        };
        // A start function that loops holds this thread no longer than a load's description may take, whatever
        // the grants' own limit (there may be none): the jobs behind it wait for it.
        let limit = grants.timeout.unwrap_or(LOAD_TIMEOUT).min(LOAD_TIMEOUT);
        store.data_mut().call.deadline = Some((Instant::now() + limit, limit));
        let began = Instant::now();
        let Ok(instance) = linked.pre.instantiate(&mut store) else {
            return;
        };
        self.turnover.instantiated(began.elapsed());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_is_handed_over_after_an_idle_host_or_for_a_plugin_whose_instances_are_dear() {
        let cheap = Turnover::default();
        assert!(!cheap.pays_to_hand_off(), "unmeasured: not dear");
        cheap.instantiated(Duration::from_micros(10));
        cheap.reset(Duration::from_micros(5));
        assert!(!cheap.pays_to_hand_off());
        let dear = Turnover::default();
        dear.instantiated(Duration::from_micros(400));
        dear.reset(Duration::from_micros(300));
        assert!(dear.pays_to_hand_off());
        // A running mean: one cheap measurement does not undo it; many do.
        dear.instantiated(Duration::from_micros(10));
        assert!(dear.pays_to_hand_off());
        for _ in 0..40 {
            dear.instantiated(Duration::from_micros(10));
            dear.reset(Duration::from_micros(5));
        }
        assert!(!dear.pays_to_hand_off());

        // Beside others: never. Alone: after an idle host, for a dear plugin, or with no spare to make.
        assert!(!hands_off(false, true, Some(true), None));
        assert!(hands_off(true, true, Some(false), None));
        assert!(hands_off(true, false, Some(true), None));
        assert!(!hands_off(true, false, Some(false), None));
        assert!(hands_off(true, false, None, None));
        // Forced, alone only.
        assert!(hands_off(true, false, Some(false), Some(true)));
        assert!(!hands_off(true, true, Some(true), Some(false)));
        assert!(!hands_off(false, true, Some(true), Some(true)));
    }

    #[test]
    fn the_host_is_idle_until_a_call_ends_and_again_once_the_gap_has_passed() {
        // Other tests' calls may end meanwhile, which only shortens the gap: the second check cannot be wrong.
        call_ended();
        assert!(!host_was_idle(), "a call just ended");
        std::thread::sleep(IDLE_GAP * 3);
        let last = LAST_END.load(Ordering::Relaxed);
        if now().saturating_sub(last) >= nanos(IDLE_GAP) {
            assert!(host_was_idle());
        }
    }
}
