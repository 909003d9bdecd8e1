//! A store for one call: the WASI context from the plugin's grants (their directories opened once and shared),
//! limits, deadline, output capture; and a reused store made ready for its next call.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use toolwright_core::tool::CallSink;
use toolwright_sdk::{PluginMetadata, ToolSpec};
use wasmtime::{Store, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::filesystem::WasiFilesystemCtx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::grants::network_allows;
use crate::state::{self, PluginState};
use crate::{CallEnv, MAX_MEMORY, OUTPUT_CAPTURE, PluginInner, WasmGrants, budget, convert, gate};

/// How many sets of grants one plugin keeps its directories opened for (a plugin runs under one or two: its
/// tools' and, for a handler, the same; more only in embedders that make many toolsets of one plugin).
pub(crate) const PREOPEN_SETS: usize = 8;

impl PluginInner {
    /// A fresh store for one call under `grants`.
    pub(crate) fn store(
        &self,
        grants: &WasmGrants,
        cancel: CancellationToken,
        updates: CallSink,
        session: Option<toolwright_core::definition::ToolContext>,
    ) -> wasmtime::Result<Store<PluginState>> {
        // No variables here: the guest asks the call for them (`crate::environment`).
        let mut wasi = WasiCtxBuilder::new();
        // Where a connection's audit goes: the current call's sink (a reused instance serves several calls).
        let audit = Arc::new(Mutex::new(updates.clone()));
        if !grants.network.is_empty() {
            let (allow, deny, audit) = (grants.network.clone(), grants.network_deny.clone(), audit.clone());
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
                            Box::pin(async move {
                                let allowed = network_allows(allow, deny, addr).await;
                                audit.connected(addr, allowed);
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
        );
        let state = PluginState {
            wasi,
            table: Default::default(),
            limits,
            carried: budget::Carried::new(grants.result_cap),
            call: self.call_env(grants, cancel, updates, session),
            stdout,
            stderr,
            output_from: (0, 0),
            audit,
            cancel_seen: false,
            processes: toolwright_native::CallScope::new(),
            started: None,
            exports: Default::default(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limits);
        // Checked at every epoch tick: a cancelled call stops even inside a busy loop.
        store.epoch_deadline_callback(move |mut ctx| {
            let state = ctx.data_mut();
            if state.call.cancel.is_cancelled() {
                // A cancelled call gets one more tick to wind down on its own (it sees `is-cancelled`); then it
                // is stopped.
                if state.cancel_seen {
                    return Err(state.call.interrupted());
                }
                state.cancel_seen = true;
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
        cancel: CancellationToken,
        updates: CallSink,
        session: Option<toolwright_core::definition::ToolContext>,
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
            inline: false,
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
        cancel: CancellationToken,
        updates: CallSink,
        session: Option<toolwright_core::definition::ToolContext>,
    ) -> wasmtime::Result<()> {
        let state = store.data_mut();
        *state.audit.lock().unwrap_or_else(PoisonError::into_inner) = updates.clone();
        state.call = self.call_env(grants, cancel, updates, session);
        state.carried = budget::Carried::new(grants.result_cap);
        state.cancel_seen = false;
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

    /// Instantiate once, with no grants and within `timeout`, to read the metadata and the tool list.
    pub(crate) fn describe(
        &self,
        timeout: std::time::Duration,
    ) -> Result<(PluginMetadata, Vec<ToolSpec>), String> {
        let mut grants = WasmGrants::none(Path::new("/"));
        grants.timeout = Some(timeout);
        let described = self.enter(&grants, gate::Entry::bare("metadata"), |store, instance| {
            let named = |export: &str, e: wasmtime::Error| e.context(format!("`{export}` failed"));
            let linked = self.linked().map_err(|e| wasmtime::format_err!("{e}"))?;
            match (&linked.tool, &linked.handler) {
                (Some(tool), _) => {
                    let guest = tool.load(&mut *store, instance)?;
                    let metadata = guest
                        .call_metadata(&mut *store)
                        .map_err(|e| named("metadata", e))?;
                    let tools = guest
                        .call_list_tools(&mut *store)
                        .map_err(|e| named("list-tools", e))?;
                    Ok((metadata, Some(tools)))
                }
                (None, Some(handler)) => {
                    let guest = handler.load(&mut *store, instance)?;
                    let metadata = guest
                        .call_metadata(&mut *store)
                        .map_err(|e| named("metadata", e))?;
                    Ok((metadata, None))
                }
                (None, None) => Err(wasmtime::format_err!("no interface to describe")),
            }
        });
        let (metadata, tools) = described.map_err(|e| e.message().to_owned())?;
        let tools = tools
            .unwrap_or_default()
            .into_iter()
            .map(convert::spec_from_wit)
            .collect::<Result<Vec<_>, _>>()?;
        Ok((convert::metadata_from_wit(metadata), tools))
    }
}
