//! The pool: a plugin's idle instances, kept for its next call, within the counts of the host they belong to.
//!
//! Opt-in instance reuse (policy `instance = "reuse"`): an instance that finished a tool call or a hook cleanly
//! waits, idle, for the plugin's next call under the same grants, and serves it without a new instantiation.
//!
//! The trade is isolation between calls of one plugin for speed: what a call leaves in the plugin's memory, the
//! next call sees. What never carries over: an instance that trapped, was stopped (deadline, cancellation, fuel,
//! memory), went past its cap, or filled its output capture is dropped, not pooled; each call gets its own
//! cancellation, deadline, fuel, result budget, update sink and session; the processes a call started are killed
//! when it ends, reused or not. Instances of different plugins never meet: every plugin has its own pool, keyed
//! by the grants its calls run under. An instance serves at most `instance-max-calls` calls and waits at most
//! `instance-idle-ms`; at most [`MAX_IDLE`] wait in one plugin host ([`Pools`]), and they give their memory back
//! to the host's budget before a running call would be refused a growth for want of it.
//!
//! The same pool holds a plugin's *spares* (made by the recycler, `super::recycler`): instances made ahead of a
//! call under a grant that does not allow reuse, which no call has run in yet. A call with a fresh instance takes
//! only a spare; one that allows reuse takes either. A spare waits at most [`SPARE_IDLE`], and spares never crowd
//! out what users chose to reuse: at most [`MAX_SPARES`] of the idle instances are spares, a reused instance that
//! finds no room takes a spare's, and memory the host's budget needs back comes from the spares first.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use wasmtime::Store;
use wasmtime::component::Instance;

use crate::grants::WasmGrants;
use crate::state::PluginState;

/// How many instances may wait idle in one plugin host (beyond [`crate::MAX_INSTANCES`] running ones: the
/// pooling allocator is sized for both).
pub const MAX_IDLE: u32 = 32;

/// How many of the [`MAX_IDLE`] idle instances may be spares (the rest are kept for reuse).
pub const MAX_SPARES: u32 = MAX_IDLE / 2;

/// How long a spare waits for a call before it is dropped.
pub const SPARE_IDLE: Duration = Duration::from_secs(10);

/// A store and its instance, out of the pool.
pub(crate) type Parts = (Store<PluginState>, Instance);

/// An instance taken from the pool: its store, the instance, and how many calls it served before.
pub(crate) type Taken = (Store<PluginState>, Instance, u64);

/// The pools of one plugin host: how many instances wait idle in them, of which spares, and which pools there
/// are (for the sweep and for memory wanted back).
#[derive(Default)]
pub(crate) struct Pools {
    /// Idle instances in the host's pools.
    idle: AtomicUsize,
    /// Of them, spares.
    spares: AtomicUsize,
    /// The pools that hold or held idle instances.
    list: Mutex<Vec<Weak<Pool>>>,
}

impl Pools {
    /// The pools that may hold idle instances.
    fn pools(&self) -> Vec<Arc<Pool>> {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|p| p.strong_count() > 0);
        list.iter().filter_map(Weak::upgrade).collect()
    }

    /// Drop the instances whose idle time ran out.
    pub fn sweep(&self) {
        let now = Instant::now();
        for pool in self.pools() {
            pool.sweep(now);
        }
    }

    /// Drop the idle instances of the host, only the spares if `spares_only` (their memory goes back to the
    /// host's budget); whether there was any.
    pub fn drop_idle(&self, spares_only: bool) -> bool {
        let counter = if spares_only { &self.spares } else { &self.idle };
        if counter.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut dropped = false;
        for pool in self.pools() {
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

    /// Take out the spare that has waited longest in the first pool that has one; its room is free at once (the
    /// counts drop with the entry), and its memory goes back to the host's budget now (`retire`), while its store
    /// is the caller's to drop.
    fn evict_spare(&self) -> Option<Parts> {
        if self.spares.load(Ordering::Relaxed) == 0 {
            return None;
        }
        for pool in self.pools() {
            let evicted = {
                let mut idle = pool.idle.lock().unwrap_or_else(PoisonError::into_inner);
                idle.iter().position(|i| i.spare).map(|at| idle.remove(at))
            };
            if let Some(mut evicted) = evicted {
                let parts = evicted.parts.take();
                if let Some((mut store, instance)) = parts {
                    store.data_mut().retire();
                    return Some((store, instance));
                }
            }
        }
        None
    }

    /// Count one more in `counter` if it is below `max`; whether it was.
    fn take_room(counter: &AtomicUsize, max: u32) -> bool {
        if counter.fetch_add(1, Ordering::Relaxed) < max as usize {
            return true;
        }
        counter.fetch_sub(1, Ordering::Relaxed);
        false
    }
}

/// One plugin's idle instances.
pub(crate) struct Pool {
    /// The host's pools, whose counts this pool's instances count in.
    host: Arc<Pools>,
    idle: Mutex<Vec<Idle>>,
    /// Whether the host's list holds this pool.
    registered: AtomicBool,
    /// How many calls a spare served.
    spares_served: AtomicU64,
}

/// A store whose instance finished a call cleanly, and what bounds its further life.
struct Idle {
    /// The grants its calls ran under: only calls under the same grants (the same `Arc`) may have it.
    grants: Arc<WasmGrants>,
    /// Taken when it serves a call.
    parts: Option<Parts>,
    /// Calls it served.
    calls: u64,
    /// No call ran in it: a spare.
    spare: bool,
    /// When it is dropped if no call took it.
    expires: Instant,
    /// The host's counts, given back when it goes.
    host: Arc<Pools>,
}

impl Drop for Idle {
    fn drop(&mut self) {
        self.host.idle.fetch_sub(1, Ordering::Relaxed);
        if self.spare {
            self.host.spares.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// What became of an instance offered to the pool.
pub(crate) enum Put {
    /// Kept; when it took an evicted spare's room, that spare, for the caller to drop off its path.
    Kept(Option<Parts>),
    /// Not kept: handed back.
    Refused(Store<PluginState>),
}

impl Pool {
    /// An empty pool counting in `host`.
    pub fn new(host: Arc<Pools>) -> Self {
        Pool {
            host,
            idle: Mutex::default(),
            registered: AtomicBool::new(false),
            spares_served: AtomicU64::new(0),
        }
    }

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

    /// Keep `store` for the next call under `grants`, unless it served its calls or the host has [`MAX_IDLE`]
    /// waiting already: then it is handed back.
    pub fn put(
        self: &Arc<Self>,
        grants: &Arc<WasmGrants>,
        store: Store<PluginState>,
        instance: Instance,
        calls: u64,
    ) -> Put {
        let Some(reuse) = grants.reuse else {
            return Put::Refused(store);
        };
        if calls >= reuse.max_calls || reuse.idle.is_zero() {
            return Put::Refused(store);
        }
        self.keep(grants, (store, instance), calls, false, reuse.idle)
    }

    /// Keep `store`, whose instance no call ran in yet, for the next call under `grants`; handed back when the
    /// host has [`MAX_SPARES`] spares or [`MAX_IDLE`] idle instances waiting already.
    pub fn put_spare(
        self: &Arc<Self>,
        grants: &Arc<WasmGrants>,
        store: Store<PluginState>,
        instance: Instance,
    ) -> Result<(), Store<PluginState>> {
        match self.keep(grants, (store, instance), 0, true, SPARE_IDLE) {
            Put::Kept(_) => Ok(()),
            Put::Refused(store) => Err(store),
        }
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
        parts: Parts,
        calls: u64,
        spare: bool,
        idle: Duration,
    ) -> Put {
        let host = &self.host;
        if spare && !Pools::take_room(&host.spares, MAX_SPARES) {
            return Put::Refused(parts.0);
        }
        // A reused instance that finds no room takes a spare's: a spare is a guess, reuse the user's choice.
        let mut evicted = None;
        let mut room = Pools::take_room(&host.idle, MAX_IDLE);
        if !room && !spare {
            evicted = host.evict_spare();
            room = evicted.is_some() && Pools::take_room(&host.idle, MAX_IDLE);
        }
        if !room {
            if spare {
                host.spares.fetch_sub(1, Ordering::Relaxed);
            }
            // An evicted spare that left no room after all (another call took it): dropped here.
            drop(evicted);
            return Put::Refused(parts.0);
        }
        let entry = Idle {
            grants: grants.clone(),
            parts: Some(parts),
            calls,
            spare,
            expires: Instant::now() + idle,
            host: host.clone(),
        };
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
        if !self.registered.swap(true, Ordering::Relaxed) {
            host.list
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Arc::downgrade(self));
        }
        Put::Kept(evicted)
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
