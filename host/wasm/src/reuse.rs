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

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use wasmtime::Store;
use wasmtime::component::Instance;

use crate::WasmGrants;
use crate::state::PluginState;

/// How many instances may wait idle in the whole process (beyond [`crate::MAX_INSTANCES`] running ones: the
/// pooling allocator is sized for both).
pub const MAX_IDLE: u32 = 32;

/// How often expired idle instances are dropped (besides when a call looks for one).
const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// Idle instances in the process.
static IDLE: AtomicUsize = AtomicUsize::new(0);

/// The pools the sweeper looks at.
static POOLS: Mutex<Vec<Weak<Pool>>> = Mutex::new(Vec::new());

/// One plugin's idle instances.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<Vec<Idle>>,
    /// Whether the sweeper knows this pool.
    registered: AtomicBool,
}

/// A store whose instance finished a call cleanly, and what bounds its further life.
struct Idle {
    /// The grants its calls ran under: only calls under the same grants (the same `Arc`) may have it.
    grants: Arc<WasmGrants>,
    /// Taken when it serves a call.
    parts: Option<(Store<PluginState>, Instance)>,
    /// Calls it served.
    calls: u64,
    /// When it is dropped if no call took it.
    expires: Instant,
}

impl Drop for Idle {
    fn drop(&mut self) {
        IDLE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An instance taken from the pool: its store, the instance, and how many calls it served before.
pub(crate) type Taken = (Store<PluginState>, Instance, u64);

impl Pool {
    /// An idle instance that ran under `grants`, if one waits (the last one pooled: its pages are the warmest).
    pub fn take(&self, grants: &Arc<WasmGrants>) -> Option<Taken> {
        let now = Instant::now();
        let mut done = Vec::new();
        let mut found = None;
        {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            while let Some(at) = idle.iter().rposition(|i| Arc::ptr_eq(&i.grants, grants)) {
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
        found
    }

    /// Keep `store` for the next call under `grants`, unless it served its calls or the process has
    /// [`MAX_IDLE`] waiting already (then it is dropped).
    pub fn put(
        self: &Arc<Self>,
        grants: &Arc<WasmGrants>,
        store: Store<PluginState>,
        instance: Instance,
        calls: u64,
    ) {
        let Some(reuse) = grants.reuse else {
            return;
        };
        if calls >= reuse.max_calls || reuse.idle.is_zero() {
            return;
        }
        if IDLE.fetch_add(1, Ordering::Relaxed) >= MAX_IDLE as usize {
            IDLE.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let entry = Idle {
            grants: grants.clone(),
            parts: Some((store, instance)),
            calls,
            expires: Instant::now() + reuse.idle,
        };
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
        if !self.registered.swap(true, Ordering::Relaxed) {
            register(self);
        }
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

/// Drop every idle instance of the process (their memory goes back to the host's budget); whether there was any.
pub(crate) fn drop_idle() -> bool {
    if IDLE.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let pools: Vec<Arc<Pool>> = POOLS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    let mut dropped = false;
    for pool in pools {
        let idle = std::mem::take(&mut *pool.idle.lock().unwrap_or_else(PoisonError::into_inner));
        dropped |= !idle.is_empty();
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
