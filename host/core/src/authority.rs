//! Whose authority a call runs under, when it is narrower than the host's ([`Authority`]).
//!
//! A call the model makes runs under the host's authority: a built-in reaches what its grants allow. A call a
//! *plugin* makes (a nested call) must not reach more than that plugin was granted, whatever tool it goes
//! through: otherwise a plugin granted nothing could read any file through `read`, or run any command through
//! `bash`. So a plugin's calls carry its [`Authority`] in their [`ToolContext`](crate::ToolContext):
//!
//! - the nested-call runner lets it reach only the tools its grant names (`tools = ["read"]`; none by default),
//!   and refuses the others before preflight, on the audit trail ([`Authority::may_call`]);
//! - the callee runs within the caller's grants: a built-in with the intersection of its grants and the
//!   caller's, another plugin only if its own grants lie within the caller's. The grants themselves are the
//!   runtime's (`toolwright_native::Reach`), carried here opaquely ([`Authority::reach`]).
//!
//! A tool with no authority of its own (codemode, the built-ins) passes on the authority it runs under; a
//! plugin called under an authority passes on the intersection of both. The audit record of a call run under
//! an authority names it (`authority` in the record).

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// The authority a call runs under: who, which tools it may call, what it may touch (see the module docs).
#[derive(Clone)]
pub struct Authority {
    principal: String,
    tools: Vec<String>,
    reach: Arc<dyn Any + Send + Sync>,
}

impl fmt::Debug for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authority")
            .field("principal", &self.principal)
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl Authority {
    /// The authority of `principal` (as people read it: `the plugin NAME`), which may call `tools` and touch
    /// what `reach` (the runtime's grants) allows.
    pub fn new(principal: impl Into<String>, tools: Vec<String>, reach: Arc<dyn Any + Send + Sync>) -> Self {
        Authority {
            principal: principal.into(),
            tools,
            reach,
        }
    }

    /// Who: `the plugin NAME`, or a chain of them (`the plugin B, called by the plugin A`).
    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// The tools it may call.
    pub fn tools(&self) -> &[String] {
        &self.tools
    }

    /// Whether it may call the tool `name` (`*` in its grant: any tool).
    pub fn may_call(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t == name || t == "*")
    }

    /// The refusal a call of `name` it may not make gets.
    pub fn refusal(&self, name: &str) -> String {
        let who = &self.principal;
        let hint = match who.strip_prefix("the plugin ") {
            Some(plugin) if !plugin.contains(',') => format!(" ([plugins.{plugin}] tools = [\"{name}\"])"),
            _ => String::new(),
        };
        format!(
            "Permission denied: {who} may not call the tool {name}. A tools grant of {name} in the policy file \
             (toolwright.toml) would allow it{hint}."
        )
    }

    /// What it may touch, in the runtime's terms (`None` when the runtime that made it is not `T`'s).
    pub fn reach<T: Any>(&self) -> Option<&T> {
        self.reach.downcast_ref()
    }

    /// The authority `callee` runs under when this one calls it: `callee`'s grants (the caller checked they lie
    /// within its own), the tools both may call, both names.
    pub fn called_by(callee: Authority, caller: Option<&Authority>) -> Authority {
        match caller {
            None => callee,
            Some(caller) => Authority {
                principal: format!("{}, called by {}", callee.principal, caller.principal),
                tools: callee.tools.into_iter().filter(|t| caller.may_call(t)).collect(),
                reach: callee.reach,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_may_call_only_what_every_link_may() {
        let a = Authority::new("the plugin a", vec!["read".into(), "grep".into()], Arc::new(1u8));
        let b = Authority::new("the plugin b", vec!["read".into(), "bash".into()], Arc::new(2u8));
        let both = Authority::called_by(b, Some(&a));
        assert_eq!(both.principal(), "the plugin b, called by the plugin a");
        assert!(both.may_call("read"));
        assert!(!both.may_call("bash"));
        assert!(!both.may_call("grep"));
        assert_eq!(both.reach::<u8>(), Some(&2));
        assert_eq!(both.reach::<u16>(), None);
    }

    #[test]
    fn the_refusal_says_which_grant_would_allow_the_call() {
        let a = Authority::new("the plugin a", Vec::new(), Arc::new(()));
        assert_eq!(
            a.refusal("bash"),
            "Permission denied: the plugin a may not call the tool bash. A tools grant of bash in the policy \
             file (toolwright.toml) would allow it ([plugins.a] tools = [\"bash\"])."
        );
    }
}
