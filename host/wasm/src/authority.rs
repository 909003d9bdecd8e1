//! Whose authority a plugin's call runs under ([`toolwright_core::authority`]), in the runtime's terms: the
//! plugin's own [`Authority`] (its tools grant and its [`Reach`]), made once per set of grants
//! ([`own_authority`]); and the grants a call runs with when another plugin's authority reaches it
//! ([`under`]): a plugin only if its grants lie within its caller's, a tool without authority of its own (the
//! wasm built-ins, codemode) within the intersection of both.

use std::sync::Arc;

use toolwright_core::Authority;
use toolwright_core::definition::ToolContext;
use toolwright_native::ProgramGrant;
use toolwright_native::grants::Grant;
use toolwright_native::reach::{self, Reach};

use crate::grants::{Calls, NetRule, Preopen, WasmGrants};

/// The network rules a plugin's [`Reach`] carries: its allowed and denied addresses.
type Network = (Arc<Vec<NetRule>>, Arc<Vec<NetRule>>);

/// The directories of `grants`, as grants.
fn files(grants: &WasmGrants) -> Vec<Grant> {
    grants
        .preopens
        .iter()
        .map(|p| Grant {
            path: p.host.clone(),
            write: p.write,
        })
        .collect()
}

/// The authority of the plugin `name` under `grants`: none for a plugin without authority of its own.
pub(crate) fn own_authority(name: &str, grants: &WasmGrants) -> Option<Arc<Authority>> {
    let Calls::Own(tools) = &grants.calls else {
        return None;
    };
    let network: Network = (grants.network.clone(), grants.network_deny.clone());
    let reach = Reach {
        files: files(grants),
        programs: grants.programs.clone(),
        env: grants.env.iter().map(|(k, _)| k.clone()).collect(),
        has_network: !grants.network.is_empty(),
        network: Arc::new(network),
    };
    Some(Arc::new(Authority::new(
        format!("the plugin {name}"),
        tools.clone(),
        Arc::new(reach),
    )))
}

/// The grants and context a call of the plugin `name`'s tool `tool` runs with when `ctx` carries an authority
/// (a plugin made the call): see the module docs. `own` is the plugin's [`own_authority`]. An error is the
/// refusal the caller gets.
pub(crate) fn under(
    name: &str,
    tool: &str,
    grants: &Arc<WasmGrants>,
    own: Option<&Arc<Authority>>,
    ctx: Option<ToolContext>,
) -> Result<(Arc<WasmGrants>, Option<ToolContext>), String> {
    let Some(mut ctx) = ctx else {
        return Ok((grants.clone(), None));
    };
    let caller = ctx.authority.clone();
    let reach = caller.as_deref().and_then(Reach::of);
    match (own, caller.as_deref(), reach) {
        // The model's call (or an embedder's): the plugin's own authority.
        (Some(own), None, _) => {
            ctx.authority = Some(own.clone());
            Ok((grants.clone(), Some(ctx)))
        }
        (Some(own), Some(caller), Some(reach)) => {
            if let Some(exceeds) = exceeds(grants, reach) {
                return Err(format!(
                    "Permission denied: {} may not call {tool} of the plugin {name}: the plugin {name} is \
                     granted {exceeds}, which {} is not.",
                    caller.principal(),
                    caller.principal()
                ));
            }
            let chained = Authority::called_by(Authority::clone(own), Some(caller));
            ctx.authority = Some(Arc::new(chained));
            Ok((grants.clone(), Some(ctx)))
        }
        // No authority of its own: within its caller's.
        (None, Some(_), Some(reach)) => Ok((Arc::new(narrowed(grants, reach)), Some(ctx))),
        // An authority another runtime made: nothing here can check it, so nothing is reached under it.
        (_, Some(caller), None) => Err(format!(
            "Permission denied: {} may not call {tool}: its grants cannot be checked here.",
            caller.principal()
        )),
        (None, None, _) => Ok((grants.clone(), Some(ctx))),
    }
}

/// What `grants` has that `reach` does not, in words; none when they lie within it.
fn exceeds(grants: &WasmGrants, reach: &Reach) -> Option<String> {
    if let Some(p) = grants
        .preopens
        .iter()
        .find(|p| !reach::within(&files_of(p), &reach.files))
    {
        let what = if p.write { "write" } else { "read" };
        return Some(format!("{what} {}", p.host.display()));
    }
    if let ProgramGrant::Only(mine) = &grants.programs {
        let theirs: &[toolwright_native::GrantedProgram] = match &reach.programs {
            ProgramGrant::Only(p) => &p.granted,
            ProgramGrant::Any(_) => &[],
            ProgramGrant::None => &[],
        };
        let any = matches!(reach.programs, ProgramGrant::Any(_));
        if let Some(g) = mine
            .granted
            .iter()
            .find(|g| !any && !theirs.iter().any(|t| t.rule == g.rule))
        {
            return Some(format!("spawn {}", g.rule.program));
        }
    } else if matches!(grants.programs, ProgramGrant::Any(_))
        && !matches!(reach.programs, ProgramGrant::Any(_))
    {
        return Some("spawn (any program)".into());
    }
    if let Some((k, _)) = grants.env.iter().find(|(k, _)| !reach.env.iter().any(|n| n == k)) {
        return Some(format!("env {k}"));
    }
    if !grants.network.is_empty() {
        let theirs = reach.network.downcast_ref::<Network>();
        let covered = theirs.is_some_and(|(allow, deny)| {
            grants.network.iter().all(|r| allow.contains(r))
                && deny.iter().all(|d| grants.network_deny.contains(d))
        });
        if !covered {
            return Some("network access".into());
        }
    }
    None
}

fn files_of(p: &Preopen) -> [Grant; 1] {
    [Grant {
        path: p.host.clone(),
        write: p.write,
    }]
}

/// `grants` (of a tool without authority of its own) within `reach`: the directories both grant, the programs
/// both may start, the variables both see, no network the caller lacks, and a fresh instance.
fn narrowed(grants: &WasmGrants, reach: &Reach) -> WasmGrants {
    let both = reach::intersect(&files(grants), &reach.files);
    let mut narrowed = grants.clone();
    narrowed.programs = reach::narrow_programs(&grants.programs, reach, &both);
    narrowed.preopens = both
        .iter()
        .map(|g| Preopen {
            guest: toolwright_sdk::paths::normalize(&g.path.to_string_lossy()),
            host: g.path.clone(),
            write: g.write,
        })
        .collect();
    narrowed.temp_dir = grants
        .temp_dir
        .clone()
        .filter(|t| narrowed.preopens.iter().any(|p| p.write && p.guest == *t));
    narrowed.env = Arc::new(
        grants
            .env
            .iter()
            .filter(|(k, _)| reach.env.iter().any(|n| n == k))
            .cloned()
            .collect(),
    );
    if !reach.has_network {
        narrowed.network = Arc::default();
    }
    // An instance kept for the wider grants must not serve a call under these.
    narrowed.reuse = None;
    // What a call another made is refused is not asked about as the built-ins' (nor as the tool's plugin's).
    narrowed.refusals = None;
    narrowed
}
