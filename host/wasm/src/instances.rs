//! The instance lifecycle, under one owner: [`Instances`], a field of the plugin host. Every instance of every
//! plugin of the host is leased through it and given back to it: [`Instances::acquire`] (an idle instance of the
//! plugin's pool, or a new one) and [`Instances::release`] (back to the pool, or dropped: at once, or off the
//! call's path). Beneath it:
//!
//! - [`pool`]: a plugin's idle instances (opt-in reuse, and the spares made ahead of a call), bounded per host;
//! - [`recycler`]: what a fresh instance needs off the call's path (finished stores dropped, spares made ahead),
//!   and the sweep of idle instances whose time ran out;
//! - [`resident`]: the pages a plugin's calls write, kept resident across wasmtime's reset of its memory slot.
//!
//! It owns its counts (a host's idle instances and spares, its bound on live instances, its pending jobs, when
//! its latest call ended): two plugin hosts share none of them. It gives the host's memory budget the one way
//! to get memory back from instances that are not running ([`Instances::reclaim`]), so the budget knows no pool.
//!
//! Threads: one, the recycler's (`toolwright-recycler`), started on the host's first call that runs alone or
//! first idle instance, and ending when the `Instances` is dropped (its queue closes). The engine's epoch thread
//! is the engine's (`crate::engine`).
//!
//! It knows a plugin only as a [`Maker`], what builds the plugin's stores and instances (`PluginInner`); so does
//! the gate.

pub(crate) mod pool;
pub(crate) mod recycler;
pub(crate) mod resident;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};
use tokio_util::sync::CancellationToken;
use toolwright_core::definition::ToolContext;
use toolwright_core::tool::CallSink;
use wasmtime::Store;
use wasmtime::component::Instance;

use crate::budget::Reclaim;
use crate::grants::{LOAD_TIMEOUT, WasmGrants};
use crate::state::PluginState;
pub(crate) use pool::{MAX_IDLE, Pool, Pools, Put};
pub(crate) use recycler::{MAX_PENDING, Turnover};

/// How many instances the host's engines must have room for beyond the running ones: the idle ones the pools
/// keep (spares among them), the one spare being made (`recycler`), which holds no slot while it is
/// instantiated, and the evicted spares that may wait for the recycler to drop them (within its queue).
pub(crate) const BEYOND_RUNNING: u32 = MAX_IDLE + 1 + MAX_PENDING as u32;

/// How often a caller waiting for an instance slot on a plain thread looks again (and at its deadline).
const SLOT_POLL: Duration = Duration::from_millis(1);

/// What the lifecycle asks of the plugin whose instances it makes, keeps and drops (`PluginInner`).
pub(crate) trait Maker: Send + Sync {
    /// The plugin's name, for errors and logs.
    fn name(&self) -> &str;
    /// The host's instances, which the plugin's are leased from.
    fn instances(&self) -> &Instances;
    /// The plugin's idle instances.
    fn pool(&self) -> &Arc<Pool>;
    /// What its instances cost to make and drop.
    fn turnover(&self) -> &Turnover;
    /// A fresh store for `call` under `grants`.
    fn store(&self, grants: &WasmGrants, call: Call) -> wasmtime::Result<Store<PluginState>>;
    /// A store from the pool made ready for `call` under `grants`.
    fn rearm(&self, store: &mut Store<PluginState>, grants: &WasmGrants, call: Call) -> wasmtime::Result<()>;
    /// A new instance in `store`.
    fn instantiate(&self, store: &mut Store<PluginState>) -> Result<Instance, Unmade>;
    /// Whether the instance's exports type-check (done once per instance, as a call does at its start).
    fn check_exports(&self, store: &mut Store<PluginState>, instance: &Instance) -> bool;
    /// Before a finished store of the plugin drops: keep the pages its calls wrote resident ([`resident`]).
    fn keep_written_resident(&self);
}

/// The plugin and grants to make the next call's spare for.
pub(crate) use recycler::Spare;

/// What belongs to one call, given to the store it runs in.
pub(crate) struct Call {
    /// The call's cancellation.
    pub cancel: CancellationToken,
    /// Where partial results go.
    pub updates: CallSink,
    /// The session context (nested calls), for tool executions only.
    pub session: Option<ToolContext>,
    /// How the call asks its client, for tool executions only.
    pub client: Option<crate::state::CallClient>,
}

impl Call {
    /// No one's call: a spare's, or a description's.
    pub fn none() -> Self {
        Call {
            cancel: CancellationToken::new(),
            updates: CallSink::discard(),
            session: None,
            client: None,
        }
    }
}

/// What an instance is leased for.
pub(crate) enum Purpose {
    /// A description, a rendering, a synchronous hook: a new instance, dropped at its end.
    Once,
    /// A tool execution or a handler hook under `grants` (the set its tools share): an idle instance may serve
    /// it (a spare, or with reuse one an earlier call left), and with reuse it may leave its instance for the next
    /// call. `alone`: it runs alone, and the plugin's next spare is made after it (`recycler`).
    Call {
        grants: Arc<WasmGrants>,
        alone: Option<Arc<dyn Maker>>,
    },
}

/// How a call ended.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Its export returned: its instance may serve again, if the grants allow reuse and it was not stopped.
    Returned,
    /// It trapped, was stopped or failed: its instance is dropped.
    Failed,
}

/// Why no instance could be leased.
pub(crate) enum Unmade {
    /// The store could not be set up (a granted directory that cannot be opened, say).
    Setup(wasmtime::Error),
    /// The component could not be linked.
    Unlinked(String),
    /// Its start function (or another language's runtime starting) trapped or was stopped: the error, and what
    /// it wrote to stderr.
    Start(wasmtime::Error, Vec<u8>),
    /// Instantiation failed otherwise.
    Failed(wasmtime::Error),
}

/// Why no instance slot was had.
pub(crate) enum NoSlot {
    /// The host is shutting down.
    Closed,
    /// The call was cancelled while it waited.
    Cancelled,
    /// Its deadline passed while it waited.
    Deadline,
}

/// An instance leased for one call: its store and the instance, and what its release needs.
pub(crate) struct Lease {
    pub store: Store<PluginState>,
    pub instance: Instance,
    /// Calls it served before this one.
    calls: u64,
    /// Its place under the bound on live instances, freed once the store is gone.
    slot: OwnedSemaphorePermit,
    purpose: Purpose,
    /// The call came after the host had been idle ([`recycler::IDLE_GAP`]).
    after_idle: bool,
}

/// The instances of one plugin host: the bound on live ones, the pools of idle ones, the recycler.
pub(crate) struct Instances {
    slots: Arc<Semaphore>,
    pools: Arc<Pools>,
    recycler: recycler::Recycler,
    reclaim: Reclaim,
    pages: resident::PageMap,
}

impl Instances {
    /// At most `live` instances at once.
    pub fn new(live: u32) -> Self {
        let pools = Arc::new(Pools::default());
        let idle = pools.clone();
        Instances {
            slots: Arc::new(Semaphore::new(live as usize)),
            recycler: recycler::Recycler::new(pools.clone()),
            reclaim: Arc::new(move |spares_only| idle.drop_idle(spares_only)),
            pools,
            pages: resident::PageMap::open(),
        }
    }

    /// This process's page map, as the host opened it.
    pub(crate) fn pages(&self) -> &resident::PageMap {
        &self.pages
    }

    /// An empty pool for one of the host's plugins.
    pub fn pool(&self) -> Arc<Pool> {
        Arc::new(Pool::new(self.pools.clone()))
    }

    /// How the host's memory budget gets memory back: drop idle instances (only spares, when asked), saying
    /// whether there were any.
    pub fn reclaim(&self) -> &Reclaim {
        &self.reclaim
    }

    /// The host's pools.
    #[cfg(test)]
    pub(crate) fn pools(&self) -> &Pools {
        &self.pools
    }

    /// A slot under the bound on live instances, awaited until `cancel`.
    pub async fn slot(&self, cancel: &CancellationToken) -> Result<OwnedSemaphorePermit, NoSlot> {
        tokio::select! {
            slot = self.slots.clone().acquire_owned() => slot.map_err(|_| NoSlot::Closed),
            () = cancel.cancelled() => Err(NoSlot::Cancelled),
        }
    }

    /// A slot under the bound on live instances, waited for on this (blocking-capable) thread until `cancel` or
    /// `deadline`.
    pub fn slot_blocking(
        &self,
        cancel: &CancellationToken,
        deadline: Option<Instant>,
    ) -> Result<OwnedSemaphorePermit, NoSlot> {
        loop {
            match self.slots.clone().try_acquire_owned() {
                Ok(slot) => return Ok(slot),
                Err(TryAcquireError::Closed) => return Err(NoSlot::Closed),
                Err(TryAcquireError::NoPermits) => {}
            }
            if cancel.is_cancelled() {
                return Err(NoSlot::Cancelled);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(NoSlot::Deadline);
            }
            std::thread::sleep(SLOT_POLL);
        }
    }

    /// Whether the host had been idle when a call comes (see `recycler`).
    pub fn host_was_idle(&self) -> bool {
        self.recycler.host_was_idle()
    }

    /// A call through the gate's asynchronous side ended.
    pub fn call_ended(&self) {
        self.recycler.call_ended();
    }

    /// An instance of `plugin` for `call` under `grants`, holding `slot`: an idle one of its pool if the purpose
    /// allows and one waits (made ready for the call), else a new one. On failure the slot is given back, and a
    /// store whose start trapped is let go as a finished call's is.
    pub fn acquire(
        &self,
        plugin: &dyn Maker,
        grants: &WasmGrants,
        slot: OwnedSemaphorePermit,
        purpose: Purpose,
        call: Call,
    ) -> Result<Lease, Unmade> {
        let after_idle = matches!(&purpose, Purpose::Call { alone: Some(_), .. }) && self.host_was_idle();
        let taken = match &purpose {
            Purpose::Call { grants, .. } => plugin.pool().take(grants),
            Purpose::Once => None,
        };
        if let Some((mut store, instance, calls)) = taken {
            plugin.rearm(&mut store, grants, call).map_err(Unmade::Setup)?;
            if calls == 0 {
                // A spare: what its instantiation printed belongs to this call, as a new instance's would.
                store.data_mut().output_from = (0, 0);
            }
            return Ok(Lease {
                store,
                instance,
                calls,
                slot,
                purpose,
                after_idle,
            });
        }
        let mut store = plugin.store(grants, call).map_err(Unmade::Setup)?;
        let began = Instant::now();
        match plugin.instantiate(&mut store) {
            Ok(instance) => {
                plugin.turnover().instantiated(began.elapsed());
                Ok(Lease {
                    store,
                    instance,
                    calls: 0,
                    slot,
                    purpose,
                    after_idle,
                })
            }
            Err(Unmade::Start(error, _)) => {
                let stderr = store.data().stderr_of_call();
                let (alone, spare) = purpose.alone();
                self.recycler.retire(store, slot, alone, after_idle, spare);
                Err(Unmade::Start(error, stderr))
            }
            Err(other) => {
                // The store before its slot: a slot is never free while its instance holds wasmtime's.
                drop(store);
                drop(slot);
                Err(other)
            }
        }
    }

    /// Give back a leased instance: one whose call `Returned` in time, uncancelled, with room left for its output,
    /// under grants that allow reuse, waits in `plugin`'s pool for the next call; any other is let go (its
    /// processes killed, its memory given back, then dropped here or off the call's path, see `recycler`).
    pub fn release(&self, plugin: &dyn Maker, lease: Lease, ending: Ending) {
        let Lease {
            mut store,
            instance,
            calls,
            slot,
            purpose,
            after_idle,
        } = lease;
        if let Purpose::Call { grants, .. } = &purpose
            && ending == Ending::Returned
            && grants.reuse.is_some()
            && !store.data().call.should_stop()
            && store.data().output_has_room()
        {
            store.data_mut().end_call();
            match plugin.pool().put(grants, store, instance, calls + 1) {
                Put::Kept(evicted) => {
                    // The evicted spare's drop (wasmtime's reset of its slot) is owed to no call.
                    if let Some(evicted) = evicted {
                        self.recycler.drop_later(evicted);
                    }
                    // The recycler sweeps what waits past its time.
                    self.recycler.start();
                    return;
                }
                Put::Refused(back) => store = back,
            }
        }
        let (alone, spare) = purpose.alone();
        self.recycler.retire(store, slot, alone, after_idle, spare);
    }
}

impl Purpose {
    /// Whether the call runs alone, and the spare to make after it.
    fn alone(self) -> (bool, Option<Spare>) {
        match self {
            Purpose::Call {
                grants,
                alone: Some(plugin),
            } => (true, Some((plugin, grants))),
            _ => (false, None),
        }
    }
}

/// Make a spare of `plugin` under `grants` and keep it in its pool, unless one waits there already. A failure
/// leaves none: the call that would have taken it instantiates itself, and reports what fails then.
pub(crate) fn make_spare(plugin: &dyn Maker, grants: &Arc<WasmGrants>) {
    if plugin.pool().has_spare(grants) {
        return;
    }
    let Ok(mut store) = plugin.store(grants, Call::none()) else {
        return;
    };
    // A start function that loops holds the recycler no longer than a load's description may take, whatever
    // the grants' own limit (there may be none): the jobs behind it wait for it.
    let limit = grants.timeout.unwrap_or(LOAD_TIMEOUT).min(LOAD_TIMEOUT);
    store.data_mut().call.deadline = Some((Instant::now() + limit, limit));
    let began = Instant::now();
    let Ok(instance) = plugin.instantiate(&mut store) else {
        return;
    };
    plugin.turnover().instantiated(began.elapsed());
    // The exports are type-checked here too, once, as a call would at its start.
    if plugin.check_exports(&mut store, &instance)
        && let Err(store) = plugin.pool().put_spare(grants, store, instance)
    {
        drop(store);
    }
}
