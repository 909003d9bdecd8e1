//! The recycler: work a fresh instance needs that the call need not wait for, done on the host's one background
//! thread for a call that runs alone (`toolwright_core::pipeline::Placement::Here`: a pipeline that works
//! here, as `exec` and `mcp` run theirs, with nothing beside the call; there a core is free, where beside others
//! every core has calls to run): after it answers, its finished store is dropped there (wasmtime resets its memory
//! and tables for the slot's next instance when it drops), then a *spare* is made there, an instance of the plugin
//! under the call's grants, ready for the next call under them. One job a call: a call wakes the thread once. (It
//! also drops the spares evicted to make room for reused instances, [`Recycler::drop_later`], and sweeps the
//! host's pools of instances whose idle time ran out, every [`SWEEP_EVERY`].)
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
//! fuel, updates, session) before it runs. It waits in the plugin's pool ([`super::pool`]) at most
//! [`super::pool::SPARE_IDLE`], counts among the [`super::pool::MAX_IDLE`] idle instances, and gives its
//! memory back to the host's budget as they do. One that cannot be made (a start function that traps, a pool
//! out of slots) is simply not there: the call instantiates as it always did, and reports what fails.
//!
//! What a call's end must do at once is done before its store is handed here ([`PluginState::retire`]): its
//! processes are killed, its nested calls cancelled, its resources (files, sockets) closed, its memory given
//! back to the host's budget; its slot (the bound on live instances) is released only once the store is gone.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;

use super::Maker;
use super::pool::Pools;
use crate::grants::WasmGrants;
use crate::state::PluginState;

/// How many jobs may wait for the background thread: past it, a store is dropped by the call that finished with
/// it and no spare is made, so that one thread never becomes what a busy host waits for. (Only calls that run
/// alone hand it their stores; calls beside others, where every core has calls to run, drop their own. The one
/// other job is a spare evicted to make room for a reused instance, [`Recycler::drop_later`], rare and owed to no
/// call.)
pub(crate) const MAX_PENDING: usize = 4;

/// The least cost of making and dropping one of a plugin's instances at which a call that runs alone hands both
/// to the background thread even when calls come back to back.
pub(crate) const HAND_OFF_FROM: Duration = Duration::from_micros(50);

/// How long the host must have been without a call into a plugin for it to count as idle when one comes.
pub(crate) const IDLE_GAP: Duration = Duration::from_millis(1);

/// How often expired idle instances are dropped (besides when a call looks for one).
const SWEEP_EVERY: Duration = Duration::from_millis(250);

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

/// `took` in nanoseconds (saturating).
fn nanos(took: Duration) -> u64 {
    u64::try_from(took.as_nanos()).unwrap_or(u64::MAX)
}

/// Whether a finished store goes to the background thread: only for a call that ran alone, and then as
/// `forced` says if it says, else when the call came after the host had been idle, or the plugin's instances
/// are dear enough to make and drop (`pays`; a store not followed by a spare is always handed over: its drop is
/// all there is to it).
fn hands_off(alone: bool, after_idle: bool, pays: Option<bool>, forced: Option<bool>) -> bool {
    alone && forced.unwrap_or(after_idle || pays.unwrap_or(true))
}

/// `TOOLWRIGHT_HAND_OFF=always` or `never`: the choice made for every call that runs alone, whatever was
/// measured (for benchmarks that compare the two, and tests that must take one path); unset: measured.
fn forced() -> Option<bool> {
    match std::env::var("TOOLWRIGHT_HAND_OFF").as_deref() {
        Ok("always") => Some(true),
        Ok("never") => Some(false),
        Ok(other) => {
            tracing::warn!("TOOLWRIGHT_HAND_OFF={other} is neither `always` nor `never`: ignored");
            None
        }
        Err(_) => None,
    }
}

/// The plugin and grants to make the next call's spare for, after a finished store's drop.
pub(crate) type Spare = (Arc<dyn Maker>, Arc<WasmGrants>);

/// What the background thread does.
enum Job {
    /// Drop a finished store, free its slot, then make a spare for calls of the plugin under the grants, if asked
    /// and none waits. One job a call, so a call wakes the thread once. (Its fields drop in this order too: a slot
    /// is never free while its instance still holds wasmtime's pool slot.)
    Retire(Store<PluginState>, OwnedSemaphorePermit, Option<Spare>),
    /// Drop something whose drop is dear but owed to nobody (a spare evicted to make room: [`Recycler::drop_later`]).
    Drop(Box<dyn Send>),
}

/// The host's background thread, started on first need, and what it is handed. It ends when the recycler is
/// dropped (with the plugin host that owns it): its queue closes.
pub(crate) struct Recycler {
    /// The thread's queue (none when it could not start: then the work is done in place, or skipped).
    queue: OnceLock<Option<Mutex<Sender<Job>>>>,
    /// Jobs sent and not yet done.
    pending: Arc<AtomicUsize>,
    /// The host's pools, which the thread sweeps.
    pools: Arc<Pools>,
    /// `TOOLWRIGHT_HAND_OFF`, read when the host was made.
    forced: Option<bool>,
    /// When the latest call through the gate's asynchronous side ended, in nanoseconds since `made` (0: none
    /// yet).
    last_end: AtomicU64,
    /// The time `last_end` counts from.
    made: Instant,
}

impl Recycler {
    /// A recycler for the host whose pools are `pools` (its thread starts on first need).
    pub fn new(pools: Arc<Pools>) -> Self {
        Recycler {
            queue: OnceLock::new(),
            pending: Arc::default(),
            pools,
            forced: forced(),
            last_end: AtomicU64::new(0),
            made: Instant::now(),
        }
    }

    /// Nanoseconds since the recycler was made, at least 1.
    fn now(&self) -> u64 {
        nanos(self.made.elapsed()).max(1)
    }

    /// A call ended (every call through the gate's asynchronous side says so, alone or not).
    pub fn call_ended(&self) {
        self.last_end.store(self.now(), Ordering::Relaxed);
    }

    /// Whether the calls' latest end ([`Recycler::call_ended`]) was at least [`IDLE_GAP`] ago, or there was none:
    /// asked by a call that runs alone, at its start, to guess whether the call after it will come at once too.
    pub fn host_was_idle(&self) -> bool {
        let last = self.last_end.load(Ordering::Relaxed);
        last == 0 || self.now().saturating_sub(last) >= nanos(IDLE_GAP)
    }

    /// Make sure the thread runs (it sweeps the pools).
    pub fn start(&self) {
        self.queue();
    }

    /// The background thread's queue, the thread started on first need.
    fn queue(&self) -> Option<&Mutex<Sender<Job>>> {
        self.queue
            .get_or_init(|| {
                let (send, receive) = channel::<Job>();
                let (pending, pools) = (self.pending.clone(), self.pools.clone());
                let started = std::thread::Builder::new()
                    .name("toolwright-recycler".into())
                    .spawn(move || work(&receive, &pending, &pools));
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
    fn send(&self, job: Job) -> Result<(), Job> {
        let Some(queue) = self.queue() else {
            return Err(job);
        };
        if self.pending.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            return Err(job);
        }
        let sent = queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(job)
            .map_err(|e| e.0);
        if sent.is_err() {
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
        sent
    }

    /// Let go of a finished call's store: for a call that ran `alone`, when it pays (see the module), what the
    /// call's end owes is done now ([`PluginState::retire`]) and the store's drop (the instance's reset), the
    /// release of its slot and the next call's `spare` happen on the background thread after the call; else the
    /// store is dropped here, which does all of it at once.
    pub fn retire(
        &self,
        mut store: Store<PluginState>,
        slot: OwnedSemaphorePermit,
        alone: bool,
        after_idle: bool,
        spare: Option<Spare>,
    ) {
        // Grants that allow reuse need no spare: their finished instances wait in the pool already.
        let spare = spare.filter(|(_, grants)| grants.reuse.is_none());
        let pays = spare
            .as_ref()
            .map(|(plugin, _)| plugin.turnover().pays_to_hand_off());
        if hands_off(alone, after_idle, pays, self.forced) {
            store.data_mut().retire();
            // Dropped here if it comes back: the store, then its slot (a job's fields drop in order: the slot
            // outlives the instance).
            drop(self.send(Job::Retire(store, slot, spare)));
            return;
        }
        drop_store(store, spare.as_ref());
        drop(slot);
    }

    /// Drop `value` on the background thread if it is there and not busy, else here: for what is dear to drop
    /// and owed to no call (a spare evicted by a call that needs its room: its drop is wasmtime's reset of its
    /// slot).
    pub fn drop_later(&self, value: impl Send + 'static) {
        drop(self.send(Job::Drop(Box::new(value))));
    }
}

/// The background thread: the jobs as they come, and a sweep of the pools every [`SWEEP_EVERY`]; until the
/// queue closes.
fn work(receive: &Receiver<Job>, pending: &AtomicUsize, pools: &Pools) {
    let mut swept = Instant::now();
    loop {
        let job = match receive.recv_timeout(SWEEP_EVERY.saturating_sub(swept.elapsed())) {
            Ok(job) => Some(job),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if let Some(job) = job {
            pending.fetch_sub(1, Ordering::AcqRel);
            match job {
                Job::Retire(store, slot, spare) => {
                    if let Some((plugin, _)) = &spare {
                        plugin.keep_written_resident();
                    }
                    drop_store(store, spare.as_ref());
                    drop(slot);
                    if let Some((plugin, grants)) = spare {
                        super::make_spare(&*plugin, &grants);
                    }
                }
                Job::Drop(value) => drop(value),
            }
        }
        // Without the sweep, expired instances are still dropped when a call looks for one.
        if swept.elapsed() >= SWEEP_EVERY {
            pools.sweep();
            swept = Instant::now();
        }
    }
}

/// Drop a finished `store`; when a spare of the plugin follows it, timing the drop (wasmtime's reset), which is
/// half of what decides whether handing the work over pays ([`Turnover`]).
fn drop_store(store: Store<PluginState>, spare: Option<&Spare>) {
    match spare {
        Some((plugin, _)) => {
            let began = Instant::now();
            drop(store);
            plugin.turnover().reset(began.elapsed());
        }
        None => drop(store),
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
        let recycler = Recycler::new(Arc::default());
        assert!(recycler.host_was_idle(), "no call yet");
        recycler.call_ended();
        assert!(!recycler.host_was_idle(), "a call just ended");
        std::thread::sleep(IDLE_GAP * 3);
        assert!(recycler.host_was_idle());
    }
}
