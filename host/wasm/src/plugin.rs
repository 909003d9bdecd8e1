//! A loaded plugin as the runtime holds it ([`PluginInner`]): its linked component, the host's instances and
//! budget it draws on, and everything it does with them: a store for one call (the WASI context from the
//! plugin's grants, their directories opened once and shared; limits, deadline, output capture), a reused store
//! made ready for its next call, its exports type-checked, and its description at load. The lifecycle
//! (`crate::instances`) knows it as a [`Maker`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use toolwright_core::tool::CallSink;
use wasmtime::component::Instance;
use wasmtime::{Store, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::filesystem::WasiFilesystemCtx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::budget::{self, MemoryBudget};
use crate::cache::Digest;
use crate::engine::MAX_MEMORY;
use crate::error::PluginError;
use crate::grants::{Preopen, WasmGrants, network_allows};
use crate::instances::resident::Image;
use crate::instances::{Call, Instances, Maker, Pool, Turnover, Unmade};
use crate::runtime::{Linked, Runtime, link};
use crate::state::{self, CallEnv, OUTPUT_CAPTURE, PluginState};

/// How many sets of grants one plugin keeps its directories opened for (a plugin runs under one or two: its
/// tools' and, for a handler, the same; more only in embedders that make many toolsets of one plugin).
pub(crate) const PREOPEN_SETS: usize = 8;

/// A loaded plugin, as its calls reach it.
pub(crate) struct PluginInner {
    pub(crate) name: String,
    pub(crate) engine: wasmtime::Engine,
    /// The linked component: at load when it was compiled or described then, else on first need.
    pub(crate) linked: OnceLock<Result<Linked, PluginError>>,
    /// Where it is linked from on first need: the runtime, its file, its bytes if they are the program's.
    pub(crate) source: (Arc<Runtime>, PathBuf, Option<&'static [u8]>),
    /// The host's instances: every instance of the plugin is leased from them.
    pub(crate) instances: Arc<Instances>,
    pub(crate) budget: Arc<MemoryBudget>,
    /// Compiled with fuel: every store gets the grant's budget (or unlimited fuel).
    pub(crate) metered: bool,
    /// The SHA-256 of the component it was loaded from.
    pub(crate) digest: Digest,
    /// The directories of each set of grants its calls ran under, opened once (see `store`).
    pub(crate) preopened: Mutex<Vec<(Vec<Preopen>, WasiFilesystemCtx)>>,
    /// Its idle instances: spares, and for grants that allow reuse, instances calls left.
    pub(crate) pool: Arc<Pool>,
    /// What making an instance and dropping one costs it, as measured: whether handing that to another
    /// thread pays ([`Turnover`]).
    pub(crate) turnover: Turnover,
    /// Its memory image as mapped from the cache, once linked (see [`Linked::image`]).
    pub(crate) image: OnceLock<Option<Image>>,
}

impl PluginInner {
    /// Its linked component, linked now if its load deferred that.
    pub(crate) fn linked(&self) -> Result<&Linked, &PluginError> {
        self.linked
            .get_or_init(|| {
                let (runtime, path, bytes) = &self.source;
                link(runtime, path, *bytes, &self.digest).map(|(linked, _)| linked)
            })
            .as_ref()
    }

    /// The tool exports of the store's instance: type-checked at its first call, then kept in the store.
    pub(crate) fn tool_exports(
        &self,
        store: &mut Store<PluginState>,
        instance: &Instance,
    ) -> wasmtime::Result<crate::v1::ToolGuest> {
        if let Some(guest) = &store.data().exports.tool {
            return Ok(guest.clone());
        }
        let indices = self
            .linked()
            .map_err(|e| wasmtime::format_err!("{e}"))?
            .tool
            .as_ref()
            .ok_or_else(|| wasmtime::format_err!("the plugin {} provides no tools", self.name))?;
        let guest = indices.load(&mut *store, instance)?;
        store.data_mut().exports.tool = Some(guest.clone());
        Ok(guest)
    }

    /// The handler exports of the store's instance: type-checked at its first call, then kept in the store.
    pub(crate) fn handler_exports(
        &self,
        store: &mut Store<PluginState>,
        instance: &Instance,
    ) -> wasmtime::Result<crate::handler::Exports> {
        if let Some(guest) = &store.data().exports.handler {
            return Ok(guest.clone());
        }
        let indices = self
            .linked()
            .map_err(|e| wasmtime::format_err!("{e}"))?
            .handler
            .as_ref()
            .ok_or_else(|| wasmtime::format_err!("{} is not a handler plugin", self.name))?;
        let guest = indices.load(&mut *store, instance)?;
        store.data_mut().exports.handler = Some(guest.clone());
        Ok(guest)
    }
}

impl Maker for PluginInner {
    fn name(&self) -> &str {
        &self.name
    }

    fn instances(&self) -> &Instances {
        &self.instances
    }

    fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    fn turnover(&self) -> &Turnover {
        &self.turnover
    }

    fn store(&self, grants: &WasmGrants, call: Call) -> wasmtime::Result<Store<PluginState>> {
        PluginInner::store(self, grants, call)
    }

    fn rearm(&self, store: &mut Store<PluginState>, grants: &WasmGrants, call: Call) -> wasmtime::Result<()> {
        PluginInner::rearm(self, store, grants, call)
    }

    fn instantiate(&self, store: &mut Store<PluginState>) -> Result<Instance, Unmade> {
        let linked = self.linked().map_err(|e| Unmade::Unlinked(e.to_string()))?;
        linked.pre.instantiate(store).map_err(|e| {
            // A start function (or a constructor in another language's runtime) may loop or trap too.
            if e.downcast_ref::<wasmtime::Trap>().is_some() || e.downcast_ref::<state::Stopped>().is_some() {
                Unmade::Start(e, Vec::new())
            } else {
                Unmade::Failed(e)
            }
        })
    }

    fn check_exports(&self, store: &mut Store<PluginState>, instance: &Instance) -> bool {
        let Ok(linked) = self.linked() else {
            return false;
        };
        match (&linked.tool, &linked.handler) {
            (Some(_), _) => self.tool_exports(store, instance).is_ok(),
            (None, Some(_)) => self.handler_exports(store, instance).is_ok(),
            (None, None) => false,
        }
    }

    /// Merge the runs of pages its calls wrote, so that wasmtime's reset keeps them all resident
    /// (`crate::instances::resident`).
    fn keep_written_resident(&self) {
        let Some(Ok(linked)) = self.linked.get() else {
            return;
        };
        if let Some(image) = self.image.get_or_init(|| linked.image.map(Image::new)) {
            image.keep_written_resident(self.instances.pages());
        }
    }
}

impl PluginInner {
    /// A fresh store for one call under `grants`.
    pub(crate) fn store(&self, grants: &WasmGrants, call: Call) -> wasmtime::Result<Store<PluginState>> {
        let Call {
            cancel,
            updates,
            session,
            client,
        } = call;
        // No variables here: the guest asks the call for them (`crate::environment`).
        let mut wasi = WasiCtxBuilder::new();
        // Where a connection's audit goes: the current call's sink (a reused instance serves several calls).
        let audit = Arc::new(Mutex::new(updates.clone()));
        // The connections refused, for a server that asks the user (kept for the current call, as the audit).
        let net_refused: Arc<Mutex<Vec<toolwright_core::ask::Refused>>> = Arc::default();
        if !grants.network.is_empty() || grants.network_asked {
            let (allow, deny, audit) = (grants.network.clone(), grants.network_deny.clone(), audit.clone());
            let refused = net_refused.clone();
            wasi.allow_tcp(true)
                .allow_udp(true)
                .allow_ip_name_lookup(true)
                .socket_addr_check(move |addr, used| {
                    use wasmtime_wasi::sockets::SocketAddrUse;
                    match used {
                        // Connections and datagrams out, to granted addresses only.
                        SocketAddrUse::TcpConnect | SocketAddrUse::UdpSend => {
                            let (allow, deny) = (allow.clone(), deny.clone());
                            let audit = audit.lock().unwrap_or_else(PoisonError::into_inner).clone();
                            let refused = refused.clone();
                            Box::pin(async move {
                                let allowed = network_allows(allow, deny, addr).await;
                                audit.connected(addr, allowed);
                                if !allowed {
                                    let mut kept = refused.lock().unwrap_or_else(PoisonError::into_inner);
                                    let connect = toolwright_core::ask::Refused::Connect {
                                        address: addr.to_string(),
                                    };
                                    if kept.len() < toolwright_core::ask::MAX_REFUSALS_PER_CALL
                                        && !kept.contains(&connect)
                                    {
                                        kept.push(connect);
                                    }
                                }
                                allowed
                            })
                        }
                        // The implicit bind of an outgoing socket (wildcard address, any port); never a listener.
                        SocketAddrUse::TcpBind | SocketAddrUse::UdpBind => {
                            Box::pin(std::future::ready(addr.ip().is_unspecified() && addr.port() == 0))
                        }
                        _ => Box::pin(std::future::ready(false)),
                    }
                });
        }
        let stdout = MemoryOutputPipe::new(OUTPUT_CAPTURE);
        let stderr = MemoryOutputPipe::new(OUTPUT_CAPTURE);
        wasi.stdout(stdout.clone()).stderr(stderr.clone());
        let mut wasi = wasi.build();
        // The granted directories, opened once for these grants and shared as capabilities.
        *wasi.filesystem() = self.preopened(grants)?;
        let limits = budget::Limiter::new(
            StoreLimitsBuilder::new()
                .memory_size(grants.memory.min(MAX_MEMORY))
                .trap_on_grow_failure(true)
                .build(),
            self.budget.clone(),
            self.instances.reclaim().clone(),
        );
        let state = PluginState {
            wasi,
            table: Default::default(),
            limits,
            carried: budget::Carried::new(grants.result_cap),
            call: self.call_env(grants, cancel, updates, session, client),
            stdout,
            stderr,
            output_from: (0, 0),
            audit,
            names: crate::name_lookup::NameGate::of(&grants.network),
            net_refused,
            child_refused: Vec::new(),
            asked_nobody: false,
            cancel_seen: None,
            processes: toolwright_native::CallScope::new(),
            started: None,
            refused: Vec::new(),
            exports: Default::default(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        // Checked at every epoch tick: a cancelled call stops even inside a busy loop.
        store.epoch_deadline_callback(move |mut ctx| {
            let state = ctx.data_mut();
            if state.call.cancel.is_cancelled() {
                // A cancelled call gets `CANCEL_GRACE` to wind down on its own (it sees `is-cancelled`); then
                // it is stopped.
                match state.cancel_seen {
                    Some(seen) if seen.elapsed() >= state::CANCEL_GRACE => {
                        return Err(state.call.interrupted());
                    }
                    Some(_) => {}
                    None => state.cancel_seen = Some(Instant::now()),
                }
            }
            if let Some((deadline, limit)) = state.call.deadline
                && Instant::now() >= deadline
            {
                return Err(wasmtime::Error::new(state::Stopped::Deadline(limit)));
            }
            Ok(UpdateDeadline::Continue(1))
        });
        self.arm(&mut store, grants)?;
        Ok(store)
    }

    /// What a call under `grants` may reach, and where its results go.
    fn call_env(
        &self,
        grants: &WasmGrants,
        cancel: tokio_util::sync::CancellationToken,
        updates: CallSink,
        session: Option<toolwright_core::definition::ToolContext>,
        client: Option<state::CallClient>,
    ) -> CallEnv {
        CallEnv {
            plugin: self.name.clone(),
            cwd: grants.cwd.clone(),
            home: grants.home.clone(),
            temp_dir: grants.temp_dir.clone(),
            roots: grants
                .preopens
                .iter()
                .map(|p| (p.guest.clone(), p.write))
                .collect(),
            cancel,
            updates,
            programs: grants.programs.clone(),
            env: grants.env.clone(),
            deadline: grants.timeout.map(|t| (Instant::now() + t, t)),
            session,
            client,
            short: false,
        }
    }

    /// The call's fuel and its first epoch deadline.
    fn arm(&self, store: &mut Store<PluginState>, grants: &WasmGrants) -> wasmtime::Result<()> {
        match (self.metered, grants.fuel) {
            (true, fuel) => store.set_fuel(fuel.unwrap_or(u64::MAX))?,
            (false, Some(_)) => {
                return Err(wasmtime::format_err!(
                    "a fuel budget needs the plugin loaded with metering (PluginHost::metered)"
                ));
            }
            (false, None) => {}
        }
        store.set_epoch_deadline(1);
        Ok(())
    }

    /// A reused store made ready for a new call under `grants`: the call's own cancellation, deadline, updates,
    /// session, fuel and result budget; its output is told apart from what earlier calls printed.
    pub(crate) fn rearm(
        &self,
        store: &mut Store<PluginState>,
        grants: &WasmGrants,
        call: Call,
    ) -> wasmtime::Result<()> {
        let Call {
            cancel,
            updates,
            session,
            client,
        } = call;
        let state = store.data_mut();
        *state.audit.lock().unwrap_or_else(PoisonError::into_inner) = updates.clone();
        state.call = self.call_env(grants, cancel, updates, session, client);
        state.carried = budget::Carried::new(grants.result_cap);
        state.cancel_seen = None;
        state.refused.clear();
        state.child_refused.clear();
        state.asked_nobody = false;
        state.output_from = (state.stdout.contents().len(), state.stderr.contents().len());
        self.arm(store, grants)
    }

    /// The directories of `grants` as capabilities: opened by path on the first call under them (a directory
    /// that cannot be opened fails that call, and is tried again on the next), then shared by every call (the
    /// descriptors are the host's; a guest closing its handle closes none of them).
    fn preopened(&self, grants: &WasmGrants) -> wasmtime::Result<WasiFilesystemCtx> {
        let mut opened = self.preopened.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, fs)) = opened.iter().find(|(p, _)| *p == grants.preopens) {
            return Ok(fs.clone());
        }
        let mut wasi = WasiCtxBuilder::new();
        // Calls already run on a blocking thread: file operations run right there instead of taking a round trip
        // through tokio's blocking pool each.
        wasi.allow_blocking_current_thread(true);
        for p in &grants.preopens {
            let perms = if p.write {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            wasi.preopened_dir(&p.host, &p.guest, perms)?;
        }
        let fs = wasi.build().filesystem().clone();
        if opened.len() >= PREOPEN_SETS {
            opened.remove(0);
        }
        opened.push((grants.preopens.clone(), fs.clone()));
        Ok(fs)
    }
}
