//! Grants asked for while a session serves ([`crate::ask`]): a plugin's grants decided again with the asked
//! grant added to the user's policy, so what it gets is still the intersection with what it declared it needs,
//! under every denial and pin of the policy; the built-ins' hosts added to the user's `[builtins] network`, under
//! its denials.

use std::sync::Arc;

use super::{BuiltinMode, Toolset, ToolsetOptions, mib_bytes, runtime_grants};
use crate::ask::{Grant, Question, Refused, Subject};
use crate::definition::ToolDefinition;
use crate::native::{FileMutationQueue, HostEnv};
use crate::policy::{Effective, NetPattern, Policy};
use crate::trust::identity::{self, PluginIdentity, PluginLocation};
use crate::wasm::Plugin;

/// What deciding a plugin's grants again needs, kept from a loaded toolset ([`Toolset::regrants`]): its options,
/// its policy, and its third-party plugins from trusted locations (a project's plugins get only what the
/// project's policy grants: nothing is asked for them).
#[derive(Clone)]
pub struct Regrants {
    options: ToolsetOptions,
    policy: Policy,
    plugins: Vec<(Plugin, PluginIdentity)>,
    /// The built-ins that run as wasm.
    builtins: Vec<(Plugin, PluginIdentity)>,
    mutations: Arc<FileMutationQueue>,
}

impl Toolset {
    /// What [`Regrants`] needs of this toolset, loaded with `options`.
    pub fn regrants(&self, options: &ToolsetOptions) -> Regrants {
        let at = |wanted: &[PluginLocation]| {
            self.plugins
                .iter()
                .filter_map(|plugin| {
                    let identity = self.identity(plugin)?;
                    let asked = wanted.contains(&identity.location);
                    asked.then(|| (plugin.clone(), identity.clone()))
                })
                .collect()
        };
        Regrants {
            options: options.clone(),
            policy: self.policy.clone(),
            plugins: at(&[PluginLocation::User, PluginLocation::Cli]),
            builtins: at(&[PluginLocation::Builtin]),
            mutations: self.mutations.clone(),
        }
    }
}

impl Regrants {
    /// The SHA-256 of `plugin`'s file, lower-case hex (what an `always` grant pins).
    pub fn sha256(&self, plugin: &str) -> Option<String> {
        self.plugins
            .iter()
            .find(|(p, _)| p.metadata.name == plugin)
            .map(|(_, identity)| identity.sha256.clone())
    }

    /// Whether the policy asks for grants (`[ask] grants = true` in the user's files).
    pub fn asks(&self) -> bool {
        self.policy.ask.grants()
    }

    /// The question about the first of `refused` (what the host refused a call of `subject`) that a grant would
    /// allow and that a plugin declared it needs (the built-ins: a host their proxy refused that the policy does
    /// not deny); none when there is no such refusal (then nothing is asked).
    pub fn question(&self, subject: &Subject, refused: &[Refused]) -> Option<Question> {
        if !self.asks() {
            return None;
        }
        let plugin = match subject {
            Subject::Plugin(plugin) => plugin.as_str(),
            Subject::Builtins => return self.builtins_question(refused),
        };
        let (found, identity) = self.plugins.iter().find(|(p, _)| p.metadata.name == plugin)?;
        let home = HostEnv::current().home;
        let before = self.effective(found, identity, &[]);
        refused.iter().find_map(|r| {
            let mut grants: Vec<Grant> = r.grant(home.as_deref()).into_iter().collect();
            // A connection may be granted by the host name the plugin requested rather than the address.
            grants.extend(requested_hosts(found, r));
            grants.into_iter().find_map(|grant| {
                let after = self.effective(found, identity, std::slice::from_ref(&grant));
                // Only what the new grant adds: a refusal the plugin's grants already cover was refused for
                // another reason (arguments a spawn rule does not allow), and asking would widen the rule.
                if allows(&before, &grant) || !allows(&after, &grant) {
                    return None;
                }
                Some(Question {
                    subject: subject.clone(),
                    refused: r.clone(),
                    reason: reason(found, &before, &after),
                    grant,
                })
            })
        })
    }

    /// The tools of `plugin` under its grants decided with `extra` added to the user's policy (none when the
    /// plugin is not one grants are asked for, or its grants are refused whole).
    pub fn tools_with(&self, plugin: &str, extra: &[Grant]) -> Option<Vec<ToolDefinition>> {
        let (found, identity) = self.plugins.iter().find(|(p, _)| p.metadata.name == plugin)?;
        let host = HostEnv::current();
        let policy = widened(&self.policy, plugin, extra);
        let effective = self.effective(found, identity, extra);
        let mut grants = match runtime_grants(&self.options, &host, &policy, found, &effective) {
            Ok(grants) => grants,
            Err(error) => {
                tracing::warn!("the grants asked for {plugin} are refused: {error}");
                return None;
            }
        };
        if let Some(mib) = policy.limits.result_mib {
            grants.result_cap = mib_bytes(mib);
        }
        grants.mutations = self.mutations.clone();
        let words = effective
            .decisions
            .iter()
            .flat_map(|d| d.granted.iter().map(ToString::to_string))
            .collect();
        let sha256 = identity.sha256.clone();
        Some(super::wasm_definitions(found, &grants, words, sha256, false))
    }

    /// The tools of `subject` with `extra` granted to it: [`Regrants::tools_with`] for a plugin,
    /// [`Regrants::builtins_with`] for the built-ins.
    pub fn subject_tools_with(&self, subject: &Subject, extra: &[Grant]) -> Option<Vec<ToolDefinition>> {
        match subject {
            Subject::Plugin(plugin) => self.tools_with(plugin, extra),
            Subject::Builtins => self.builtins_with(extra),
        }
    }

    /// The question about the first host of `refused` that the built-ins' proxy refused, the policy's
    /// `[builtins]` does not deny, and that adding it to `[builtins] network` would allow.
    fn builtins_question(&self, refused: &[Refused]) -> Option<Question> {
        let home = HostEnv::current().home;
        let before = self.builtin_hosts(&[]);
        refused.iter().find_map(|r| {
            let grant = r
                .grant(home.as_deref())
                .filter(|g| matches!(g, Grant::Network(_)))?;
            let after = self.builtin_hosts(std::slice::from_ref(&grant));
            let reaches = |hosts: &crate::native::sandbox::Hosts| {
                let Grant::Network(address) = &grant else {
                    return false;
                };
                NetPattern::parse(address)
                    .and_then(|p| Some((p.port?, p.host)))
                    .is_some_and(|(port, host)| hosts.allows(&host, port))
            };
            (!reaches(&before) && reaches(&after)).then(|| Question {
                subject: Subject::Builtins,
                refused: r.clone(),
                grant,
                reason: None,
            })
        })
    }

    /// The hosts the built-ins' programs reach under the policy with `extra` added to `[builtins] network`.
    fn builtin_hosts(&self, extra: &[Grant]) -> crate::native::sandbox::Hosts {
        let policy = widened_builtins(&self.policy, extra);
        super::builtins::builtin_sandbox(&self.options, &policy, None, &HostEnv::current()).network
    }

    /// The built-in tools (native, and those that run as wasm) with `extra` hosts added to the user's
    /// `[builtins] network` (its denials kept); none when they cannot be made.
    pub fn builtins_with(&self, extra: &[Grant]) -> Option<Vec<ToolDefinition>> {
        let host = HostEnv::current();
        let policy = widened_builtins(&self.policy, extra);
        let section = policy
            .builtins
            .as_ref()
            .filter(|section| section.replaces_builtin_defaults())
            .map(|section| super::BuiltinGrants::open(section, &self.options.cwd, &host));
        let mut tools = match self.options.builtins {
            BuiltinMode::Native => {
                match super::native_builtins_granted(
                    &self.options,
                    &policy,
                    section.as_ref(),
                    &host,
                    &self.mutations,
                ) {
                    Ok(tools) => tools,
                    Err(error) => {
                        tracing::warn!("the built-ins cannot be given the hosts asked for: {error}");
                        return None;
                    }
                }
            }
            BuiltinMode::Wasm => Vec::new(),
        };
        for (plugin, identity) in &self.builtins {
            let (mut grants, words) =
                super::wasm_builtin(&self.options, &policy, &host, section.as_ref(), plugin);
            grants.mutations = self.mutations.clone();
            let sha256 = identity.sha256.clone();
            for definition in super::wasm_definitions(plugin, &grants, words, sha256, true) {
                match tools.iter_mut().find(|d| d.name == definition.name) {
                    Some(native) => *native = definition,
                    None => tools.push(definition),
                }
            }
        }
        Some(tools)
    }

    fn effective(&self, plugin: &Plugin, identity: &PluginIdentity, extra: &[Grant]) -> Effective {
        let cwd = toolwright_sdk::paths::normalize(&self.options.cwd.to_string_lossy());
        let policy = widened(&self.policy, &plugin.metadata.name, extra);
        identity::grants_for(
            &plugin.metadata.name,
            &plugin.metadata.capabilities,
            &policy,
            identity,
            &cwd,
            HostEnv::current().home.as_deref(),
        )
    }
}

/// `policy` with the hosts of `extra` added to the user's `[builtins] network` (its denials kept).
fn widened_builtins(policy: &Policy, extra: &[Grant]) -> Policy {
    let mut policy = policy.clone();
    for grant in extra {
        if let Grant::Network(address) = grant {
            let section = policy.builtins.get_or_insert_with(Default::default);
            if !section.network.contains(address) {
                section.network.push(address.clone());
            }
        }
    }
    policy
}

/// `policy` with `extra` granted to `plugin` in the user's `[plugins.NAME]` (pins and denials kept).
fn widened(policy: &Policy, plugin: &str, extra: &[Grant]) -> Policy {
    let mut policy = policy.clone();
    if extra.is_empty() {
        return policy;
    }
    let entry = policy.plugins.entry(plugin.to_owned()).or_default();
    for grant in extra {
        match grant {
            Grant::Read(dir) => entry.read.push(dir.clone()),
            Grant::Write(dir) => entry.write.push(dir.clone()),
            Grant::Spawn(program) => entry.spawn.push(program.as_str().into()),
            Grant::Network(address) => entry.network.push(address.clone()),
        }
    }
    policy
}

/// Whether `effective` allows what `grant` names.
fn allows(effective: &Effective, grant: &Grant) -> bool {
    let below = |dir: &str, root: &std::path::Path| std::path::Path::new(dir).starts_with(root);
    match grant {
        Grant::Read(dir) => effective.dirs.iter().any(|d| below(dir, &d.path)),
        Grant::Write(dir) => effective.dirs.iter().any(|d| d.write && below(dir, &d.path)),
        Grant::Spawn(program) => effective.programs.iter().any(|p| p == program),
        Grant::Network(address) => NetPattern::parse(address)
            .is_some_and(|wanted| effective.network.iter().any(|n| wanted.within(n))),
    }
}

/// The grants by host name that would allow the refused connection `refused`: each network pattern the plugin
/// requested by name that names it (a refused lookup of that name), or whose name resolves to its address, for
/// that port (or, for a lookup, the ports requested).
fn requested_hosts(plugin: &Plugin, refused: &Refused) -> Vec<Grant> {
    let Refused::Connect { address } = refused else {
        return Vec::new();
    };
    let socket: Option<std::net::SocketAddr> = address.parse().ok();
    let mut grants = Vec::new();
    for request in &plugin.metadata.capabilities {
        let toolwright_sdk::Capability::Network(pattern) = &request.capability else {
            continue;
        };
        let Some(wanted) = NetPattern::parse(pattern) else {
            continue;
        };
        if wanted.host == "*" || wanted.host.parse::<std::net::IpAddr>().is_ok() {
            continue;
        }
        let named = match socket {
            // A lookup refused: the name itself.
            None => wanted.host.eq_ignore_ascii_case(address.trim_end_matches('.')),
            // A connection refused: a name the plugin requested that resolves to its address, on its port.
            // (Never a name whose address is this machine's or link-local unless it says so: a grant of the name
            // would not reach it, `crate::policy::is_local_address`, and asking would go round in circles.)
            Some(socket) => {
                use std::net::ToSocketAddrs;
                let reachable = crate::policy::names_this_machine(&wanted.host)
                    || !crate::policy::is_local_address(socket.ip());
                reachable
                    && wanted.port.is_none_or(|p| p == socket.port())
                    && (wanted.host.as_str(), socket.port())
                        .to_socket_addrs()
                        .is_ok_and(|mut found| found.any(|a| a.ip() == socket.ip()))
            }
        };
        if named {
            let port = socket.map(|s| s.port()).or(wanted.port);
            let grant = NetPattern {
                host: wanted.host.clone(),
                port,
            };
            grants.push(Grant::Network(grant.to_string()));
        }
    }
    grants
}

/// The reason the plugin gave for the capability the grant falls under: the request whose decision changed.
fn reason(plugin: &Plugin, before: &Effective, after: &Effective) -> Option<String> {
    let changed = after.decisions.iter().find(|d| !before.decisions.contains(d))?;
    plugin
        .metadata
        .capabilities
        .iter()
        .find(|r| r.capability == changed.requested)
        .map(|r| r.reason.clone())
}
