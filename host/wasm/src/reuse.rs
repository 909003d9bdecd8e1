//! Opt-in instance reuse (policy `instance = "reuse"`): an instance that finished a tool call or a hook cleanly
//! waits, idle, for the plugin's next call under the same grants, and serves it without a new instantiation.
//!
//! The trade is isolation between calls of one plugin for speed: what a call leaves in the plugin's memory, the
//! next call sees. What never carries over: an instance that trapped, was stopped (deadline, cancellation, fuel,
//! memory), went past its cap, or filled its output capture is dropped, not pooled; each call gets its own
//! cancellation, deadline, fuel, result budget, update sink and session; the processes a call started are killed
//! when it ends, reused or not. Instances of different plugins never meet: every plugin has its own pool, keyed
//! by the grants its calls run under. An instance serves at most `instance-max-calls` calls and waits at most
//! `instance-idle-ms`; at most [`MAX_IDLE`] wait in the whole process, and they give their memory back to the
//! host's budget before a running call would be refused a growth for want of it.
//!
//! The same pool holds a plugin's *spares* (made by the crate's `warm` module): instances made ahead of a call
//! under a grant that does not allow reuse, which no call has run in yet. A call with a fresh instance takes only
//! a spare; one that allows reuse takes either. A spare waits at most [`SPARE_IDLE`], and spares never crowd out
//! what users chose to reuse: at most [`MAX_SPARES`] of the idle instances are spares, a reused instance that
//! finds no room takes a spare's, and memory the host's budget needs back comes from the spares first.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use wasmtime::Store;
use wasmtime::component::Instance;

use crate::WasmGrants;
use crate::state::PluginState;

/// How many instances may wait idle in the whole process (beyond [`crate::MAX_INSTANCES`] running ones: the
/// pooling allocator is sized for both).
pub const MAX_IDLE: u32 = 32;

/// How many of the [`MAX_IDLE`] idle instances may be spares (the rest are kept for reuse).
pub const MAX_SPARES: u32 = MAX_IDLE / 2;

/// How long a spare waits for a call before it is dropped.
pub const SPARE_IDLE: Duration = Duration::from_secs(10);

/// How often expired idle instances are dropped (besides when a call looks for one).
const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// Idle instances in the process.
static IDLE: AtomicUsize = AtomicUsize::new(0);

/// Of them, spares.
static SPARES: AtomicUsize = AtomicUsize::new(0);

/// The pools the sweeper looks at.
static POOLS: Mutex<Vec<Weak<Pool>>> = Mutex::new(Vec::new());

/// One plugin's idle instances.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<Vec<Idle>>,
    /// Whether the sweeper knows this pool.
    registered: AtomicBool,
    /// How many calls a spare served.
    spares_served: AtomicU64,
}

/// A store whose instance finished a call cleanly, and what bounds its further life.
struct Idle {
    /// The grants its calls ran under: only calls under the same grants (the same `Arc`) may have it.
    grants: Arc<WasmGrants>,
    /// Taken when it serves a call.
    parts: Option<(Store<PluginState>, Instance)>,
    /// Calls it served.
    calls: u64,
    /// No call ran in it: a spare (made by the crate's `warm` module).
    spare: bool,
    /// When it is dropped if no call took it.
    expires: Instant,
}

impl Drop for Idle {
    fn drop(&mut self) {
        IDLE.fetch_sub(1, Ordering::Relaxed);
        if self.spare {
            SPARES.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// An instance taken from the pool: its store, the instance, and how many calls it served before.
pub(crate) type Taken = (Store<PluginState>, Instance, u64);

impl Pool {
    /// An idle instance for a call under `grants`, if one waits (the last one pooled: its pages are the
    /// warmest): any, when the grants allow reuse; else only a spare, in which no call ran.
    pub fn take(&self, grants: &Arc<WasmGrants>) -> Option<Taken> {
        let spares_only = grants.reuse.is_none();
        let now = Instant::now();
        let mut done = Vec::new();
        let mut found = None;
        {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            while let Some(at) = idle
                .iter()
                .rposition(|i| Arc::ptr_eq(&i.grants, grants) && (i.spare || !spares_only))
            {
                let mut entry = idle.remove(at);
                if now < entry.expires {
                    found = entry
                        .parts
                        .take()
                        .map(|(store, instance)| (store, instance, entry.calls));
                }
                done.push(entry);
                if found.is_some() {
                    break;
                }
            }
        }
        // Dropping a store returns its memory to the pool: outside the lock.
        drop(done);
        if let Some((_, _, 0)) = found {
            let served = self.spares_served.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::trace!(served, "a call takes a spare");
        }
        found
    }

    /// How many calls a spare served, and how many spares wait now.
    #[cfg(test)]
    pub(crate) fn spares(&self) -> (u64, usize) {
        let waiting = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        (
            self.spares_served.load(Ordering::Relaxed),
            waiting.iter().filter(|i| i.spare).count(),
        )
    }

    /// Keep `store` for the next call under `grants`, unless it served its calls or the process has
    /// [`MAX_IDLE`] waiting already: then it is handed back.
    pub fn put(
        self: &Arc<Self>,
        grants: &Arc<WasmGrants>,
        store: Store<PluginState>,
        instance: Instance,
        calls: u64,
    ) -> Result<(), Store<PluginState>> {
        let Some(reuse) = grants.reuse else {
            return Err(store);
        };
        if calls >= reuse.max_calls || reuse.idle.is_zero() {
            return Err(store);
        }
        self.keep(grants, store, instance, calls, false, reuse.idle)
    }

    /// Keep `store`, whose instance no call ran in yet, for the next call under `grants` (see
    /// the crate's `warm` module); handed back when the process has [`MAX_IDLE`] waiting already.
    pub fn put_spare(
        self: &Arc<Self>,
        grants: &Arc<WasmGrants>,
        store: Store<PluginState>,
        instance: Instance,
    ) -> Result<(), Store<PluginState>> {
        self.keep(grants, store, instance, 0, true, SPARE_IDLE)
    }

    /// Whether a spare for calls under `grants` waits.
    pub fn has_spare(&self, grants: &Arc<WasmGrants>) -> bool {
        let now = Instant::now();
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|i| i.spare && now < i.expires && Arc::ptr_eq(&i.grants, grants))
    }

    fn keep(
        self: &Arc<Self>,
        grants: &Arc<WasmGrants>,
        store: Store<PluginState>,
        instance: Instance,
        calls: u64,
        spare: bool,
        idle: Duration,
    ) -> Result<(), Store<PluginState>> {
        if spare && !take_room(&SPARES, MAX_SPARES) {
            return Err(store);
        }
        // A reused instance that finds no room takes a spare's: a spare is a guess, reuse the user's choice.
        let room = take_room(&IDLE, MAX_IDLE) || !spare && evict_spare() && take_room(&IDLE, MAX_IDLE);
        if !room {
            if spare {
                SPARES.fetch_sub(1, Ordering::Relaxed);
            }
            return Err(store);
        }
        let entry = Idle {
            grants: grants.clone(),
            parts: Some((store, instance)),
            calls,
            spare,
            expires: Instant::now() + idle,
        };
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
        if !self.registered.swap(true, Ordering::Relaxed) {
            register(self);
        }
        Ok(())
    }

    /// Drop the instances whose idle time ran out.
    fn sweep(&self, now: Instant) {
        let expired: Vec<Idle> = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let (gone, kept) = std::mem::take(&mut *idle)
                .into_iter()
                .partition(|i| now >= i.expires);
            *idle = kept;
            gone
        };
        drop(expired);
    }
}

/// Count one more in `counter` if it is below `max`; whether it was.
fn take_room(counter: &AtomicUsize, max: u32) -> bool {
    if counter.fetch_add(1, Ordering::Relaxed) < max as usize {
        return true;
    }
    counter.fetch_sub(1, Ordering::Relaxed);
    false
}

/// The pools that may hold idle instances.
fn pools() -> Vec<Arc<Pool>> {
    POOLS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect()
}

/// Evict the spare that has waited longest in the first pool that has one (dropped on the background thread,
/// `crate::warm::drop_later`); whether there was one.
fn evict_spare() -> bool {
    if SPARES.load(Ordering::Relaxed) == 0 {
        return false;
    }
    for pool in pools() {
        let evicted = {
            let mut idle = pool.idle.lock().unwrap_or_else(PoisonError::into_inner);
            idle.iter().position(|i| i.spare).map(|at| idle.remove(at))
        };
        if let Some(mut evicted) = evicted {
            // Its room is free at once (the counts drop with the entry), and its memory goes back to the host's
            // budget now (`retire`); its store, whose drop resets its slot, is dropped on the background thread
            // if it is free (the pool has room for the instances waiting there), not on the path of the call
            // that needs the room.
            if let Some((mut store, instance)) = evicted.parts.take() {
                store.data_mut().retire();
                crate::warm::drop_later((store, instance));
            }
            return true;
        }
    }
    false
}

/// Drop the idle instances of the process, only the spares if `spares_only` (their memory goes back to the
/// host's budget); whether there was any.
pub(crate) fn drop_idle(spares_only: bool) -> bool {
    let counter = if spares_only { &SPARES } else { &IDLE };
    if counter.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let mut dropped = false;
    for pool in pools() {
        let gone: Vec<Idle> = {
            let mut idle = pool.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let (gone, kept) = std::mem::take(&mut *idle)
                .into_iter()
                .partition(|i| i.spare || !spares_only);
            *idle = kept;
            gone
        };
        dropped |= !gone.is_empty();
    }
    dropped
}

/// Let the sweeper see `pool` (and start it on first need).
fn register(pool: &Arc<Pool>) {
    static SWEEPER: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    POOLS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Arc::downgrade(pool));
    SWEEPER.get_or_init(|| {
        let started = std::thread::Builder::new()
            .name("toolwright-idle".into())
            .spawn(|| {
                loop {
                    std::thread::sleep(SWEEP_EVERY);
                    let pools: Vec<Arc<Pool>> = {
                        let mut pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
                        pools.retain(|p| p.strong_count() > 0);
                        pools.iter().filter_map(Weak::upgrade).collect()
                    };
                    let now = Instant::now();
                    for pool in pools {
                        pool.sweep(now);
                    }
                }
            });
        // Without the sweeper, expired instances are still dropped when a call looks for one.
        if let Err(e) = started {
            tracing::warn!("cannot start the idle-instance sweeper: {e}");
        }
    });
}
