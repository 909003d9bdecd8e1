//! A fresh store for one call: the WASI context from the plugin's grants, limits, deadline, output capture.

use std::path::Path;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use toolwright_core::tool::UpdateSink;
use toolwright_sdk::{PluginMetadata, ToolSpec};
use wasmtime::{Store, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::grants::network_allows;
use crate::state::{self, PluginState};
use crate::{CallEnv, MAX_MEMORY, OUTPUT_CAPTURE, PluginInner, WasmGrants, budget, convert, gate};

impl PluginInner {
    /// A fresh store for one call under `grants`.
    pub(crate) fn store(
        &self,
        grants: &WasmGrants,
        cancel: CancellationToken,
        updates: UpdateSink,
        session: Option<toolwright_core::definition::ToolContext>,
    ) -> wasmtime::Result<Store<PluginState>> {
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
        for (k, v) in grants.env.iter() {
            wasi.env(k, v);
        }
        if !grants.network.is_empty() {
            let (allow, deny) = (grants.network.clone(), grants.network_deny.clone());
            let audit = updates.clone();
            wasi.allow_tcp(true)
                .allow_udp(true)
                .allow_ip_name_lookup(true)
                .socket_addr_check(move |addr, used| {
                    use wasmtime_wasi::sockets::SocketAddrUse;
                    match used {
                        // Connections and datagrams out, to granted addresses only.
                        SocketAddrUse::TcpConnect | SocketAddrUse::UdpSend => {
                            let (allow, deny, audit) = (allow.clone(), deny.clone(), audit.clone());
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
        let call = CallEnv {
            plugin: self.name.clone(),
            cwd: grants.cwd.clone(),
            home: grants.home.clone(),
            temp_dir: grants.temp_dir.clone(),
            roots: grants
                .preopens
                .iter()
                .map(|p| (p.guest.clone(), p.write))
                .collect(),
            cancel: cancel.clone(),
            updates,
            programs: grants.programs.clone(),
            env: grants.env.clone(),
            deadline: grants.timeout.map(|t| (Instant::now() + t, t)),
            session,
        };
        let limits = budget::Limiter::new(
            StoreLimitsBuilder::new()
                .memory_size(grants.memory.min(MAX_MEMORY))
                .trap_on_grow_failure(true)
                .build(),
            self.budget.clone(),
        );
        let state = PluginState {
            wasi: wasi.build(),
            table: Default::default(),
            limits,
            carried: budget::Carried::new(grants.result_cap),
            call,
            stdout,
            stderr,
            processes: toolwright_native::CallScope::new(),
            started: None,
        };
        let mut store = Store::new(self.pre.engine(), state);
        store.limiter(|s| &mut s.limits);
        match (self.metered, grants.fuel) {
            (true, fuel) => store.set_fuel(fuel.unwrap_or(u64::MAX))?,
            (false, Some(_)) => {
                return Err(wasmtime::format_err!(
                    "a fuel budget needs the plugin loaded with metering (PluginHost::metered)"
                ));
            }
            (false, None) => {}
        }
        // Checked at every epoch tick: a cancelled call stops even inside a busy loop.
        store.set_epoch_deadline(1);
        // A cancelled call gets one more tick to wind down on its own (it sees `is-cancelled`); then it is stopped.
        let mut cancel_seen = false;
        store.epoch_deadline_callback(move |ctx| {
            let state = ctx.data();
            if cancel.is_cancelled() {
                if cancel_seen {
                    return Err(state.call.interrupted());
                }
                cancel_seen = true;
            }
            if let Some((deadline, limit)) = state.call.deadline
                && Instant::now() >= deadline
            {
                return Err(wasmtime::Error::new(state::Stopped::Deadline(limit)));
            }
            Ok(UpdateDeadline::Continue(1))
        });
        Ok(store)
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
            match (&self.tool, &self.handler) {
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
