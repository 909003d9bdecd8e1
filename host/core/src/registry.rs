//! The registry (pi 1.6.0's `AgentSession` tool handling, spec §4–6): which tools are registered, active
//! (declared to the model, or hidden from the declarations by a loadout) and callable from other tools; allow and
//! deny lists; the refresh that computes the next active set; pending names restored from a transcript; loadout
//! hooks; tool search; the system prompt's tool sections and the provider declarations.
//!
//! ```
//! use toolwright_core::registry::{Registry, RegistrySources, Selection};
//! use toolwright_core::{ToolDefinition, ToolResult, Exposure};
//! use serde_json::json;
//!
//! let tool = |name: &str, exposure| {
//!     let mut d = ToolDefinition::new(name, "A tool", json!({"type": "object"}), |_run, _ctx| async {
//!         Ok(ToolResult::text("ok"))
//!     });
//!     d.exposure = exposure;
//!     d
//! };
//! let sources = RegistrySources {
//!     embedder: vec![tool("echo", Exposure::Direct), tool("assist", Exposure::Codemode)],
//!     ..Default::default()
//! };
//! let registry = Registry::new(sources, &Selection::default()).unwrap();
//! assert_eq!(registry.active_names(), ["echo"]);
//! assert_eq!(registry.callable_names(), ["echo", "assist"]);
//! ```

mod info;
mod loadout;
pub mod prompt;
pub mod search;
mod selection;
mod shared;
pub mod transcript;
mod view;

use std::collections::HashSet;

use toolwright_sdk::Exposure;

use crate::definition::{ContextFactory, ToolDefinition, ToolSource, wrap_tool_definition};
use crate::tool::AgentTool;
pub use info::{LoadoutError, RefreshOptions, RegistrySources, SourceInfo, ToolInfo, source_info};
pub(crate) use loadout::LoadoutPlan;
pub use selection::{
    DEFAULT_TOOL_NAMES, NoTools, Selection, SelectionError, ToolMatcher, apply_tool_modifiers,
    is_mcp_tool_name, is_tool_modifier, tool_list_error,
};
pub use shared::{SharedRegistry, WeakRegistry};

struct Entry {
    definition: ToolDefinition,
    tool: AgentTool,
    snippet: Option<String>,
    guidelines: Vec<String>,
}

/// A session's tools: registered, active and callable sets, with pi's rules for each (see the module docs).
pub struct Registry {
    sources: RegistrySources,
    allowed: Option<ToolMatcher>,
    excluded: Option<ToolMatcher>,
    allowlist_filters_mcp: bool,
    uses_default_tools: bool,
    modifiers: Vec<String>,
    ctx_factory: Option<ContextFactory>,
    entries: Vec<Entry>,
    active: Vec<AgentTool>,
    hidden: Vec<String>,
    pending: Vec<String>,
    restored: HashSet<String>,
    errors: Vec<LoadoutError>,
    revision: u64,
    /// Whether a [`SharedRegistry`] runs the loadout hooks (see [`loadout`]).
    deferred: bool,
    /// The plan whose hooks are still to run, when deferred.
    planned: Option<LoadoutPlan>,
    /// How many plans were made: a commit applies only to the latest.
    generation: u64,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("registered", &self.registered_names())
            .field("active", &self.active_names())
            .field("hidden", &self.hidden)
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

/// The name of pi's codemode tool, which pi registers before `tool_search` (the host's codemode crate names it too).
const CODEMODE_TOOL_NAME: &str = "codemode";

impl Registry {
    /// A registry of `sources` with the initial active set of pi's `createAgentSession`: the selection (or the
    /// default selection with `+`/`-` modifiers applied), minus denied names, then every extension and SDK tool
    /// that registration activates.
    pub fn new(sources: RegistrySources, selection: &Selection) -> Result<Self, SelectionError> {
        let (mut registry, initial) = Self::unrefreshed(sources, selection)?;
        registry.refresh(RefreshOptions {
            active_tool_names: Some(initial),
            include_all_extension_tools: true,
        });
        Ok(registry)
    }

    /// [`Registry::new`] with pi's `tool_search` registered as the first extension tool, shared so the tool can
    /// change the active set it belongs to.
    pub fn with_tool_search(
        mut sources: RegistrySources,
        selection: &Selection,
    ) -> Result<SharedRegistry, SelectionError> {
        // Validate first: the cyclic constructor cannot fail.
        selection.check()?;
        Ok(SharedRegistry::new_cyclic(|weak| {
            // pi registers its codemode extension before tool search: `codemode` comes first where both are.
            let at = usize::from(
                sources
                    .extensions
                    .first()
                    .is_some_and(|d| d.name == CODEMODE_TOOL_NAME),
            );
            sources
                .extensions
                .insert(at, search::tool_search_definition(weak));
            let (mut registry, initial) =
                Self::unrefreshed(sources, selection).unwrap_or_else(|_| unreachable!("validated above"));
            registry.refresh(RefreshOptions {
                active_tool_names: Some(initial),
                include_all_extension_tools: true,
            });
            registry
        }))
    }

    fn unrefreshed(
        sources: RegistrySources,
        selection: &Selection,
    ) -> Result<(Self, Vec<String>), SelectionError> {
        selection.check()?;
        for definition in sources
            .builtins
            .iter()
            .chain(&sources.extensions)
            .chain(&sources.embedder)
        {
            report_unenforceable(definition);
        }
        let default_names: Vec<String> = match (selection.no_tools, &selection.default_tools) {
            (Some(_), _) => Vec::new(),
            (None, Some(names)) => names.clone(),
            (None, None) => DEFAULT_TOOL_NAMES.iter().map(|s| s.to_string()).collect(),
        };
        let modifiers = selection
            .tools
            .as_ref()
            .filter(|t| t.iter().any(|e| is_tool_modifier(e)))
            .cloned();
        let selected = match (&modifiers, &selection.tools) {
            (Some(m), _) => Some(apply_tool_modifiers(&default_names, m)),
            (None, tools) => tools.clone(),
        };
        let allowed = match (&modifiers, &selection.tools) {
            (Some(_), _) if selection.no_tools == Some(NoTools::All) => selected.clone(),
            (Some(_), _) => None,
            (None, Some(tools)) => Some(tools.clone()),
            (None, None) if selection.no_tools == Some(NoTools::All) => Some(Vec::new()),
            (None, None) => None,
        };
        let excluded = selection.exclude_tools.as_deref().map(ToolMatcher::new);
        let initial = selected
            .unwrap_or(default_names)
            .into_iter()
            .filter(|n| !excluded.as_ref().is_some_and(|m| m.matches(n)))
            .collect();
        let registry = Registry {
            sources,
            allowlist_filters_mcp: allowed
                .as_ref()
                .is_some_and(|a| a.is_empty() || a.iter().any(|e| e.starts_with("mcp__"))),
            allowed: allowed.as_deref().map(ToolMatcher::new),
            excluded,
            uses_default_tools: (selection.tools.is_none() || modifiers.is_some())
                && selection.no_tools.is_none(),
            modifiers: modifiers.unwrap_or_default(),
            ctx_factory: None,
            entries: Vec::new(),
            active: Vec::new(),
            hidden: Vec::new(),
            pending: Vec::new(),
            restored: HashSet::new(),
            errors: Vec::new(),
            revision: 0,
            deferred: false,
            planned: None,
            generation: 0,
        };
        Ok((registry, initial))
    }

    /// Give every execution a context from `factory` (pi wraps session tools with the runner's context factory).
    /// The tools are wrapped again at once; the active set and its loadout stay as they are (no hook runs).
    pub fn set_context_factory(&mut self, factory: Option<ContextFactory>) {
        self.ctx_factory = factory;
        self.rebuild();
        self.active = self
            .active
            .iter()
            .filter_map(|tool| {
                let entry = self.entry(tool.name())?;
                Some(entry.tool.clone().with_description(tool.description().to_owned()))
            })
            .collect();
        if let Some(plan) = &mut self.planned {
            plan.rewrap(|name| {
                self.entries
                    .iter()
                    .find(|e| e.definition.name == name)
                    .map(|e| e.tool.clone())
            });
        }
    }

    /// Whether the session started from the default selection (so a transcript's loadout may be restored).
    pub fn uses_default_tools(&self) -> bool {
        self.uses_default_tools
    }

    /// pi's `_isAllowedTool`: deny wins; then no allowlist or a match; else only MCP tools the allowlist does not
    /// filter.
    pub fn is_allowed(&self, name: &str) -> bool {
        if self.excluded.as_ref().is_some_and(|m| m.matches(name)) {
            return false;
        }
        match &self.allowed {
            None => true,
            Some(m) if m.matches(name) => true,
            Some(_) => !self.allowlist_filters_mcp && is_mcp_tool_name(name),
        }
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.definition.name == name)
    }

    fn exposure(&self, name: &str) -> Exposure {
        self.entry(name)
            .map(|e| e.definition.exposure)
            .unwrap_or_default()
    }

    fn is_declarable(&self, name: &str) -> bool {
        matches!(self.exposure(name), Exposure::Direct | Exposure::ModelOnly)
    }

    fn is_activated_on_registration(&self, name: &str) -> bool {
        self.is_declarable(name)
            && self
                .entry(name)
                .is_some_and(|e| e.definition.default_active != Some(false))
    }

    fn is_activatable(&self, name: &str) -> bool {
        if self.allowed.as_ref().is_none_or(|m| m.matches(name)) || !is_mcp_tool_name(name) {
            return true;
        }
        self.exposure(name) != Exposure::Direct && self.entry(search::TOOL_SEARCH_TOOL_NAME).is_some()
    }

    /// Rebuild the registry from the sources, filtered by the allow and deny lists.
    fn rebuild(&mut self) {
        let mut merged: Vec<ToolDefinition> = Vec::new();
        let mut first_extension: HashSet<String> = HashSet::new();
        let builtins = self.sources.builtins.iter().map(|d| (d, 0));
        let extensions = self.sources.extensions.iter().map(|d| (d, 1));
        let sdk = self.sources.embedder.iter().map(|d| (d, 2));
        for (definition, layer) in builtins.chain(extensions).chain(sdk) {
            if !self.is_allowed(&definition.name) {
                continue;
            }
            // Between extensions the first to register a name wins.
            if layer == 1 && !first_extension.insert(definition.name.clone()) {
                continue;
            }
            match merged.iter_mut().find(|d| d.name == definition.name) {
                Some(slot) => *slot = definition.clone(),
                None => merged.push(definition.clone()),
            }
        }
        self.entries = merged
            .into_iter()
            .map(|definition| Entry {
                tool: wrap_tool_definition(&definition, self.ctx_factory.clone()),
                snippet: prompt::normalize_snippet(definition.prompt_snippet.as_deref()),
                guidelines: prompt::normalize_guidelines(&definition.prompt_guidelines),
                definition,
            })
            .collect();
    }

    /// pi's `_refreshToolRegistry`: rebuild, then compute the next active set from the given or current names,
    /// the allowlist, newly registered default-active tools and the pending names.
    pub fn refresh(&mut self, options: RefreshOptions) {
        let previously_activated: HashSet<String> = self
            .entries
            .iter()
            .map(|e| e.definition.name.clone())
            .filter(|n| self.is_activated_on_registration(n))
            .collect();
        let previous_active = self.active_names();
        self.rebuild();
        let given = options.active_tool_names.is_some();
        let mut next: Vec<String> = options
            .active_tool_names
            .unwrap_or(previous_active)
            .into_iter()
            .filter(|n| self.is_allowed(n))
            .collect();
        let names: Vec<String> = self.registered_names();
        if let Some(allowed) = &self.allowed {
            next.extend(
                names
                    .iter()
                    .filter(|n| allowed.matches(n) && self.is_declarable(n))
                    .cloned(),
            );
        } else if options.include_all_extension_tools {
            next.extend(
                self.entries
                    .iter()
                    .filter(|e| e.definition.source != ToolSource::Builtin)
                    .map(|e| e.definition.name.clone())
                    .filter(|n| self.is_activated_on_registration(n)),
            );
        } else if !given {
            next.extend(
                names
                    .iter()
                    .filter(|n| !previously_activated.contains(*n) && self.is_activated_on_registration(n))
                    .cloned(),
            );
        }
        next.extend(self.pending.iter().cloned());
        self.set_active(&next);
    }

    /// Register (or replace, keeping its position) a tool of the embedding application, then refresh.
    ///
    /// A tool whose parameter schema the host cannot enforce (see [`crate::schema::Validator::new`]) is
    /// registered, and logged at error level; each of its calls is an error result naming the problem, so the
    /// model is told and no unchecked arguments reach the tool. Check `Validator::new` first to refuse it instead.
    pub fn register(&mut self, definition: ToolDefinition) {
        report_unenforceable(&definition);
        match self
            .sources
            .embedder
            .iter_mut()
            .find(|d| d.name == definition.name)
        {
            Some(slot) => *slot = definition,
            None => self.sources.embedder.push(definition),
        }
        self.refresh(RefreshOptions::default());
    }

    /// Register (or replace, keeping its position) an extension tool, as a plugin registering a tool late does,
    /// then refresh.
    pub fn register_extension(&mut self, definition: ToolDefinition) {
        report_unenforceable(&definition);
        match self
            .sources
            .extensions
            .iter_mut()
            .find(|d| d.name == definition.name)
        {
            Some(slot) => *slot = definition,
            None => self.sources.extensions.push(definition),
        }
        self.refresh(RefreshOptions::default());
    }

    /// Replace the plugins' tools (a plugin directory changed), keeping the built-in extensions (`tool_search`),
    /// then refresh: new tools that registration activates become active, removed ones leave every set.
    pub fn set_plugin_tools(&mut self, tools: Vec<ToolDefinition>) {
        let mut extensions: Vec<ToolDefinition> = self
            .sources
            .extensions
            .iter()
            .filter(|d| d.source == ToolSource::Builtin)
            .cloned()
            .collect();
        extensions.extend(tools);
        self.set_extension_tools(extensions);
    }

    /// Put `tools` in the place of the extension tools of the same names (a plugin whose grants changed while
    /// serving, [`crate::ask`]), then refresh; tools of other names are ignored. Each keeps the exposure of the
    /// tool it replaces (the embedder's `expose`). Returns the tools replaced.
    pub fn replace_extension_tools(&mut self, tools: Vec<ToolDefinition>) -> Vec<ToolDefinition> {
        let mut extensions = self.sources.extensions.clone();
        let mut replaced = Vec::new();
        for tool in tools {
            if let Some(slot) = extensions.iter_mut().find(|d| d.name == tool.name) {
                replaced.push(replace_keeping_exposure(slot, tool));
            }
        }
        if !replaced.is_empty() {
            self.set_extension_tools(extensions);
        }
        replaced
    }

    /// Put `tools` in the place of the built-in tools of the same names (the built-ins' sandbox widened while
    /// serving, [`crate::ask`]), then refresh; tools of other names are ignored. Each keeps the exposure of the
    /// tool it replaces. Returns the tools replaced.
    pub fn replace_builtin_tools(&mut self, tools: Vec<ToolDefinition>) -> Vec<ToolDefinition> {
        let mut replaced = Vec::new();
        for tool in tools {
            if let Some(slot) = self.sources.builtins.iter_mut().find(|d| d.name == tool.name) {
                replaced.push(replace_keeping_exposure(slot, tool));
            }
        }
        if !replaced.is_empty() {
            self.refresh(RefreshOptions::default());
        }
        replaced
    }

    /// Replace the extension tools, then refresh.
    pub fn set_extension_tools(&mut self, extensions: Vec<ToolDefinition>) {
        extensions.iter().for_each(report_unenforceable);
        self.sources.extensions = extensions;
        self.refresh(RefreshOptions::default());
    }

    /// pi's `_setActiveTools`: apply the loadout, then drop the names it activated from the pending set.
    fn set_active(&mut self, names: &[String]) {
        self.apply_loadout(names);
        let active: HashSet<String> = self.active_names().into_iter().collect();
        self.pending.retain(|n| !active.contains(n));
    }

    /// pi's `setActiveToolsByName`: unknown and hidden names are ignored. Deactivating a tool of a restored
    /// loadout drops the pending names.
    pub fn set_active_tools(&mut self, names: &[String]) {
        let previous = self.active_names();
        self.set_active(names);
        let active: HashSet<String> = self.active_names().into_iter().collect();
        if previous
            .iter()
            .any(|n| !active.contains(n) && self.restored.contains(n))
        {
            self.pending.clear();
        }
    }

    /// pi's `_startRun`: names still pending when a run starts are forgotten.
    pub fn start_run(&mut self) {
        self.pending.clear();
    }
}

/// Put `tool` in `slot` with the slot's exposure (what the embedder chose for the tool stays chosen); the tool
/// that was there.
fn replace_keeping_exposure(slot: &mut ToolDefinition, mut tool: ToolDefinition) -> ToolDefinition {
    tool.exposure = slot.exposure;
    std::mem::replace(slot, tool)
}

/// Logs a tool whose parameter schema cannot be enforced: registration is infallible, so the log is where the
/// embedder hears of it at once; the calls themselves fail closed in the pipeline.
fn report_unenforceable(definition: &ToolDefinition) {
    if let Err(e) = crate::schema::Validator::new(definition.parameters.clone()) {
        tracing::error!(
            tool = %definition.name,
            "the tool's parameter schema cannot be enforced, so every call of it fails: {e}"
        );
    }
}

#[cfg(test)]
mod tests;
