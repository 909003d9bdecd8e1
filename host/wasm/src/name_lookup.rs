//! `wasi:sockets/ip-name-lookup` limited to the names a plugin was granted (shadowing wasmtime-wasi's).
//!
//! wasmtime-wasi resolves any name once lookups are allowed at all: a plugin granted one host could ask the
//! system's resolver for `<data>.attacker.example`, and the query carries the data to whoever serves that domain,
//! past every connection check. Here a name is resolved only when a network grant names it (or grants any host,
//! `*:PORT`); an IP address in text needs no resolver and passes. Any other name is refused with `access-denied`
//! before a query leaves the host, and the refusal is kept for the call (`PluginState::note_refused`), so a server
//! that asks for grants may ask the user about it.

use wasmtime::component::{HasData, Linker, Resource};
use wasmtime_wasi::p2::SocketError;
use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::{
    self, Host, HostResolveAddressStream, ResolveAddressStream,
};
use wasmtime_wasi::p2::bindings::sockets::network::{self, ErrorCode, IpAddress, Network};
use wasmtime_wasi::sockets::WasiSocketsCtxView;
use wasmtime_wasi_io::poll::DynPollable;

use crate::state::PluginState;

/// Which names a plugin may resolve: those its network grants name, or any when one grants any host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NameGate {
    /// Any name (a grant of `*:PORT`).
    pub(crate) any: bool,
    /// The granted host names, lower-case, without a trailing dot.
    pub(crate) names: Vec<String>,
}

impl NameGate {
    /// The gate of the granted `rules` (denied names are refused by the connection check that follows).
    pub(crate) fn of(rules: &[crate::NetRule]) -> NameGate {
        NameGate {
            any: rules.iter().any(|r| r.ips.is_none()),
            names: rules
                .iter()
                .filter_map(|r| r.name.as_deref().map(normal))
                .collect(),
        }
    }

    /// Whether `name` may be resolved.
    pub(crate) fn allows(&self, name: &str) -> bool {
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        self.any || bare.parse::<std::net::IpAddr>().is_ok() || self.names.contains(&normal(name))
    }
}

fn normal(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// A lookup on behalf of a store: wasmtime-wasi's, behind the store's gate.
pub struct GatedLookup<'a> {
    inner: WasiSocketsCtxView<'a>,
    gate: &'a NameGate,
    refused: &'a mut Vec<toolwright_core::ask::Refused>,
}

struct Gated;

impl HasData for Gated {
    type Data<'a> = GatedLookup<'a>;
}

impl Host for GatedLookup<'_> {
    fn resolve_addresses(
        &mut self,
        network: Resource<Network>,
        name: String,
    ) -> Result<Resource<ResolveAddressStream>, SocketError> {
        if !self.gate.allows(&name) {
            tracing::debug!(name, "a name lookup no grant allows was refused");
            let refused = toolwright_core::ask::Refused::Connect { address: name };
            if self.refused.len() < toolwright_core::ask::MAX_REFUSALS_PER_CALL
                && !self.refused.contains(&refused)
            {
                self.refused.push(refused);
            }
            return Err(ErrorCode::AccessDenied.into());
        }
        self.inner.resolve_addresses(network, name)
    }
}

// The network interface the lookup's errors go through: wasmtime-wasi's.
impl network::Host for GatedLookup<'_> {
    fn convert_error_code(&mut self, error: SocketError) -> wasmtime::Result<ErrorCode> {
        self.inner.convert_error_code(error)
    }

    fn network_error_code(&mut self, err: Resource<wasmtime::Error>) -> wasmtime::Result<Option<ErrorCode>> {
        self.inner.network_error_code(err)
    }
}

impl network::HostNetwork for GatedLookup<'_> {
    fn drop(&mut self, this: Resource<Network>) -> wasmtime::Result<()> {
        network::HostNetwork::drop(&mut self.inner, this)
    }
}

impl HostResolveAddressStream for GatedLookup<'_> {
    fn resolve_next_address(
        &mut self,
        resource: Resource<ResolveAddressStream>,
    ) -> Result<Option<IpAddress>, SocketError> {
        self.inner.resolve_next_address(resource)
    }

    fn subscribe(
        &mut self,
        resource: Resource<ResolveAddressStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        self.inner.subscribe(resource)
    }

    fn drop(&mut self, resource: Resource<ResolveAddressStream>) -> wasmtime::Result<()> {
        HostResolveAddressStream::drop(&mut self.inner, resource)
    }
}

/// Replace wasmtime-wasi's `wasi:sockets/ip-name-lookup` in `linker` (added before) with the gated one.
pub fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    ip_name_lookup::add_to_linker::<PluginState, Gated>(linker, |state| {
        // The sockets' view and the gate beside it, borrowed from distinct fields.
        let PluginState {
            wasi,
            table,
            names,
            refused,
            ..
        } = state;
        GatedLookup {
            inner: WasiSocketsCtxView {
                ctx: wasi.sockets(),
                table,
            },
            gate: names,
            refused,
        }
    })?;
    linker.allow_shadowing(false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: Option<&str>, ips: Option<Vec<std::net::IpAddr>>) -> crate::NetRule {
        crate::NetRule {
            ips,
            name: name.map(str::to_owned),
            port: Some(443),
        }
    }

    #[test]
    fn only_granted_names_and_addresses_in_text_are_resolved() {
        let local: std::net::IpAddr = "127.0.0.1"
            .parse()
            .unwrap_or(std::net::Ipv4Addr::LOCALHOST.into());
        let gate = NameGate::of(&[
            rule(Some("api.example.com"), Some(vec![local])),
            rule(None, Some(vec![local])),
        ]);
        assert!(gate.allows("api.example.com") && gate.allows("API.Example.com.") && gate.allows("10.1.2.3"));
        assert!(gate.allows("::1") && gate.allows("[::1]"));
        assert!(
            !gate.allows("localhost"),
            "a name for a granted address is not granted"
        );
        assert!(!gate.allows("data.api.example.com") && !gate.allows("attacker.example"));
        assert!(
            NameGate::of(&[rule(None, None)]).allows("anything.example"),
            "`*` grants any host"
        );
        assert!(!NameGate::default().allows("localhost"));
    }
}
