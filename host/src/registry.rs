//! The registry (pi 1.6.0's `AgentSession` tool handling, spec §4–6): which tools are registered, active
//! (declared to the model, or hidden from the declarations by a loadout) and callable from other tools; allow and
//! deny lists; the refresh that computes the next active set; pending names restored from a transcript; loadout
//! hooks; tool search; the system prompt's tool sections and the provider declarations.
//!
//! ```
//! use toolwright::registry::{Registry, RegistrySources, Selection};
//! use toolwright::{ToolDefinition, AgentToolResult, Exposure};
//! use serde_json::json;
//!
//! let tool = |name: &str, exposure| {
//!     let mut d = ToolDefinition::new(name, "A tool", json!({"type": "object"}), |_run, _ctx| async {
//!         Ok(AgentToolResult::text("ok"))
//!     });
//!     d.exposure = exposure;
//!     d
//! };
//! let sources = RegistrySources {
//!     sdk: vec![tool("echo", Exposure::Direct), tool("assist", Exposure::Codemode)],
//!     ..Default::default()
//! };
//! let registry = Registry::new(sources, &Selection::default()).unwrap();
//! assert_eq!(registry.active_names(), ["echo"]);
//! assert_eq!(registry.callable_names(), ["echo", "assist"]);
//! ```

pub mod prompt;
pub mod search;
pub mod transcript;

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use regex::Regex;
use serde::Serialize;
use serde_json::Value;
use toolwright_sdk::{ExecutionMode, Exposure, LoadoutTool, ToolAnnotations, ToolNamespace};

use crate::definition::{ContextFactory, ToolDefinition, ToolLoadout, ToolSource, wrap_tool_definition};
use crate::tool::AgentTool;
use prompt::PromptSections;
use transcript::{ToolChanges, ToolDeclaration};

/// pi's default selection when neither the caller nor a setting names one (`DEFAULT_TOOL_NAMES`).
pub const DEFAULT_TOOL_NAMES: [&str; 4] = ["read", "bash", "edit", "write"];

/// A list of exact tool names and `*` patterns (pi's `createToolNameMatcher`): `*` matches any run of characters,
/// everything else is literal; names without `*` match exactly (case-sensitive).
#[derive(Debug, Clone)]
pub struct ToolMatcher {
    names: HashSet<String>,
    patterns: Vec<Regex>,
}

impl ToolMatcher {
    /// A matcher for `entries`.
    pub fn new(entries: &[String]) -> Self {
        let names = entries.iter().filter(|e| !e.contains('*')).cloned().collect();
        let patterns = entries
            .iter()
            .filter(|e| e.contains('*'))
            .filter_map(|e| {
                let body: Vec<String> = e.split('*').map(regex::escape).collect();
                Regex::new(&format!("^{}$", body.join(".*"))).ok()
            })
            .collect();
        ToolMatcher { names, patterns }
    }

    /// Whether `name` matches an entry.
    pub fn matches(&self, name: &str) -> bool {
        self.names.contains(name) || self.patterns.iter().any(|p| p.is_match(name))
    }
}

/// Whether a tool comes from MCP (pi's `isMcpToolName`): `mcp__…` or one of the three resource tools.
pub fn is_mcp_tool_name(name: &str) -> bool {
    name.starts_with("mcp__")
        || matches!(
            name,
            "list_mcp_resources" | "list_mcp_resource_templates" | "read_mcp_resource"
        )
}

/// Whether a selection entry is a `+name` or `-name` modifier.
pub fn is_tool_modifier(entry: &str) -> bool {
    entry.starts_with('+') || entry.starts_with('-')
}

/// pi's `getToolListError`: a list is plain names and patterns, or only exact `+name`/`-name` modifiers.
pub fn tool_list_error(entries: &[String]) -> Option<String> {
    let modifiers: Vec<&String> = entries.iter().filter(|e| is_tool_modifier(e)).collect();
    if modifiers.is_empty() {
        return None;
    }
    if modifiers.len() < entries.len() {
        return Some("tool names cannot be mixed with +name or -name entries".into());
    }
    modifiers
        .iter()
        .find(|e| e.contains('*'))
        .map(|p| format!("+name and -name entries take exact tool names, not patterns: {p}"))
}

/// pi's `applyToolModifiers`: `+name` appends a name that is absent, `-name` removes it, in order.
pub fn apply_tool_modifiers(base: &[String], entries: &[String]) -> Vec<String> {
    let mut tools = base.to_vec();
    for entry in entries.iter().filter(|e| is_tool_modifier(e)) {
        let name = &entry[1..];
        let index = tools.iter().position(|t| t == name);
        if entry.starts_with('+') && index.is_none() && !name.is_empty() {
            tools.push(name.to_owned());
        } else if let (true, Some(i)) = (entry.starts_with('-'), index) {
            tools.remove(i);
        }
    }
    tools
}

/// Which tools `--no-tools` / `--no-builtin-tools` take out of the default selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoTools {
    /// No tools: an empty default selection and, without `tools`, an empty allowlist (`--no-tools`).
    All,
    /// An empty default selection only (`--no-builtin-tools`).
    Builtin,
}

/// How the session chooses its tools (pi's `tools`, `excludeTools`, `noTools` options and `defaultTools` setting).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// An allowlist of names and `*` patterns (naming a tool also activates it), or a list of only `+name` /
    /// `-name` entries that changes the default selection.
    pub tools: Option<Vec<String>>,
    /// A denylist of names and patterns; deny wins over allow.
    pub exclude_tools: Option<Vec<String>>,
    /// Empty the default selection.
    pub no_tools: Option<NoTools>,
    /// The default selection (pi's `defaultTools` setting); `None` is [`DEFAULT_TOOL_NAMES`].
    pub default_tools: Option<Vec<String>>,
}

impl Selection {
    /// Whether the selection can be used: `tools` is plain names and patterns, or only exact `+name`/`-name`
    /// entries.
    pub fn check(&self) -> Result<(), SelectionError> {
        match self.tools.as_deref().and_then(tool_list_error) {
            Some(error) => Err(SelectionError(error)),
            None => Ok(()),
        }
    }
}

/// A [`Selection`] that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid tools option: {0}")]
pub struct SelectionError(pub String);

/// The tools a registry is built from, in pi's precedence: an extension tool replaces a built-in of the same
/// name, an SDK tool replaces either; the replacement keeps the replaced tool's position.
#[derive(Debug, Clone, Default)]
pub struct RegistrySources {
    /// The built-in tools (pi's base tools).
    pub builtins: Vec<ToolDefinition>,
    /// Extension tools: `tool_search` and the plugins' tools, in load order (the first of a name wins).
    pub extensions: Vec<ToolDefinition>,
    /// The embedding application's own tools (pi's SDK custom tools).
    pub sdk: Vec<ToolDefinition>,
}

/// The options of [`Registry::refresh`] (pi's `_refreshToolRegistry`).
#[derive(Debug, Clone, Default)]
pub struct RefreshOptions {
    /// Start from these names instead of the current active set.
    pub active_tool_names: Option<Vec<String>>,
    /// Activate every extension and SDK tool that registration activates.
    pub include_all_extension_tools: bool,
}

/// A loadout hook that failed (pi reports `{extensionPath, event: "prepare_loadout", error}`); its changes were
/// ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadoutError {
    /// Where the tool came from: `builtin:NAME`, `<sdk:NAME>` or the plugin file.
    pub extension_path: String,
    /// The tool whose hook failed.
    pub tool: String,
    /// Always `prepare_loadout`.
    pub event: &'static str,
    /// The error's message.
    pub error: String,
}

/// Where a registered tool came from, as pi's `sourceInfo` names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceInfo {
    /// `builtin:NAME`, `<sdk:NAME>` or the plugin file's path.
    pub path: String,
    /// `builtin`, `sdk` or `plugin`.
    pub source: &'static str,
}

/// One registered tool and its state (pi's `ToolInfo`, plus the sets it is in).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    /// The name.
    pub name: String,
    /// The UI label.
    pub label: String,
    /// The registered description (not loadout overrides).
    pub description: String,
    /// The parameters' JSON Schema.
    pub parameters: Value,
    /// The raw prompt guidelines.
    pub prompt_guidelines: Vec<String>,
    /// The exposure.
    pub exposure: Exposure,
    /// The namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<ToolNamespace>,
    /// The annotations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// The execution mode, when the tool sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_mode: Option<ExecutionMode>,
    /// Whether registration activates it.
    pub default_active: bool,
    /// Where it came from.
    pub source_info: SourceInfo,
    /// In the active set.
    pub active: bool,
    /// Active and not hidden from the declarations by a loadout.
    pub declared: bool,
    /// Reachable through nested calls.
    pub callable: bool,
}

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
    ) -> Result<Arc<Mutex<Self>>, SelectionError> {
        // Validate first: the cyclic constructor cannot fail.
        selection.check()?;
        Ok(Arc::new_cyclic(|weak| {
            sources
                .extensions
                .insert(0, search::tool_search_definition(weak.clone()));
            let (mut registry, initial) =
                Self::unrefreshed(sources, selection).unwrap_or_else(|_| unreachable!("validated above"));
            registry.refresh(RefreshOptions {
                active_tool_names: Some(initial),
                include_all_extension_tools: true,
            });
            Mutex::new(registry)
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
            .chain(&sources.sdk)
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
        };
        Ok((registry, initial))
    }

    /// Give every execution a context from `factory` (pi wraps session tools with the runner's context factory).
    /// Takes effect at the next refresh.
    pub fn set_context_factory(&mut self, factory: Option<ContextFactory>) {
        self.ctx_factory = factory;
        self.refresh(RefreshOptions::default());
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
        let sdk = self.sources.sdk.iter().map(|d| (d, 2));
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
        match self.sources.sdk.iter_mut().find(|d| d.name == definition.name) {
            Some(slot) => *slot = definition,
            None => self.sources.sdk.push(definition),
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

    /// pi's `_restoreToolsFromTranscript`: the loadout the transcript's system messages declare, plus extension
    /// tools it never mentioned that registration activates, with the selection's `+`/`-` modifiers. Names not
    /// registered yet stay pending and activate when they register.
    pub fn restore_from_transcript(&mut self, system_messages: &[ToolChanges]) {
        self.pending.clear();
        self.restored.clear();
        if system_messages.is_empty() {
            return;
        }
        let mentioned: HashSet<&str> = system_messages
            .iter()
            .flat_map(|m| {
                m.tools_added
                    .iter()
                    .map(|t| t.name.as_str())
                    .chain(m.tools_removed.iter().map(|t| t.name.as_str()))
            })
            .collect();
        let base: HashSet<&str> = self.sources.builtins.iter().map(|d| d.name.as_str()).collect();
        let declared: Vec<String> = transcript::current_tools(system_messages)
            .into_iter()
            .map(|t| t.name)
            .collect();
        let new_tools: Vec<String> = self
            .registered_names()
            .into_iter()
            .filter(|n| !mentioned.contains(n.as_str()) && !base.contains(n.as_str()))
            .filter(|n| self.is_activated_on_registration(n))
            .collect();
        let names = apply_tool_modifiers(&[declared.clone(), new_tools].concat(), &self.modifiers);
        let mut pending: Vec<String> = Vec::new();
        for name in names.iter().filter(|n| self.is_allowed(n)) {
            if !pending.contains(name) {
                pending.push(name.clone());
            }
        }
        self.pending = pending;
        self.restored = apply_tool_modifiers(&declared, &self.modifiers)
            .into_iter()
            .collect();
        self.set_active(&names);
    }

    /// pi's `_applyToolLoadout`: order the requested names (active ones keep their order, new ones follow), keep
    /// the registered, non-hidden, activatable ones, and run every active tool's loadout hook.
    fn apply_loadout(&mut self, names: &[String]) {
        let requested: Vec<&String> = {
            let mut seen = HashSet::new();
            names.iter().filter(|n| seen.insert(n.as_str())).collect()
        };
        let kept = self.active_names().into_iter().filter(|n| requested.contains(&n));
        let mut order: Vec<String> = Vec::new();
        for name in kept.chain(requested.iter().map(|n| (*n).clone())) {
            if !order.contains(&name) {
                order.push(name);
            }
        }
        let tools: Vec<&Entry> = order
            .iter()
            .filter_map(|n| self.entry(n))
            .filter(|e| e.definition.exposure != Exposure::Hidden && self.is_activatable(&e.definition.name))
            .collect();
        let hooks: Vec<&Entry> = tools
            .iter()
            .copied()
            .filter(|e| e.definition.prepare_loadout.is_some())
            .collect();
        let mut hidden: Vec<String> = Vec::new();
        let mut descriptions = std::collections::BTreeMap::<String, String>::new();
        let mut errors = Vec::new();
        if !hooks.is_empty() {
            let active: HashSet<&str> = tools.iter().map(|e| e.definition.name.as_str()).collect();
            let loadout = ToolLoadout {
                declared: tools.iter().map(|e| e.tool.clone()).collect(),
                callable: self
                    .callable_for(&active)
                    .iter()
                    .map(|e| e.tool.clone())
                    .collect(),
                registered: self.entries.iter().map(|e| e.tool.clone()).collect(),
                info: self
                    .entries
                    .iter()
                    .map(|e| (e.definition.name.clone(), loadout_info(e)))
                    .collect(),
            };
            for entry in hooks {
                let Some(hook) = &entry.definition.prepare_loadout else {
                    continue;
                };
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| hook(&loadout)))
                    .unwrap_or_else(|_| Err(crate::tool::ToolError::new("prepareLoadout panicked")));
                match outcome {
                    Ok(Some(changes)) => {
                        descriptions.extend(changes.descriptions);
                        for name in changes.hidden_declarations {
                            if !hidden.contains(&name) {
                                hidden.push(name);
                            }
                        }
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(tool = %entry.definition.name, "prepare_loadout failed: {}", error.message());
                        errors.push(LoadoutError {
                            extension_path: source_info(&entry.definition).path,
                            tool: entry.definition.name.clone(),
                            event: "prepare_loadout",
                            error: error.message().to_owned(),
                        });
                    }
                }
            }
        }
        let active: Vec<AgentTool> = tools
            .iter()
            .map(|e| match descriptions.get(&e.definition.name) {
                Some(description) => e.tool.clone().with_description(description.clone()),
                None => e.tool.clone(),
            })
            .collect();
        self.active = active;
        self.hidden = hidden;
        self.errors.extend(errors);
        self.revision += 1;
    }

    fn callable_for(&self, active: &HashSet<&str>) -> Vec<&Entry> {
        self.entries
            .iter()
            .filter(|e| match e.definition.exposure {
                Exposure::Codemode | Exposure::Deferred => true,
                Exposure::Direct => active.contains(e.definition.name.as_str()),
                Exposure::ModelOnly | Exposure::Hidden => false,
            })
            .collect()
    }

    /// A number that changes every time the active set and its loadout are applied: when it is unchanged, so
    /// are the active tools, the declarations and the prompt sections.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The registered names, in registry order.
    pub fn registered_names(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.definition.name.clone()).collect()
    }

    /// The registered definitions, in registry order.
    pub fn definitions(&self) -> impl Iterator<Item = &ToolDefinition> {
        self.entries.iter().map(|e| &e.definition)
    }

    /// The registered tool named `name`.
    pub fn definition(&self, name: &str) -> Option<&ToolDefinition> {
        self.entry(name).map(|e| &e.definition)
    }

    /// pi's `getActiveToolNames`: the active set in active order (hidden declarations included).
    pub fn active_names(&self) -> Vec<String> {
        self.active.iter().map(|t| t.name().to_owned()).collect()
    }

    /// The active tools as the pipeline runs them (pi's `agent.state.tools`): descriptions after the loadout,
    /// hidden declarations included (the model may still call them by name).
    pub fn active_tools(&self) -> Vec<AgentTool> {
        self.active.clone()
    }

    /// The names a loadout hid from the declarations.
    pub fn hidden_declarations(&self) -> &[String] {
        &self.hidden
    }

    /// The active names minus the hidden declarations.
    pub fn declared_names(&self) -> Vec<String> {
        self.active_names()
            .into_iter()
            .filter(|n| !self.hidden.contains(n))
            .collect()
    }

    /// pi's `getCallableToolNames`: active `direct` tools and every `codemode` or `deferred` tool, in registry order.
    pub fn callable_names(&self) -> Vec<String> {
        self.callable_tools()
            .iter()
            .map(|t| t.name().to_owned())
            .collect()
    }

    /// The tools other tools can call (pi's `_getCallableTools`), in registry order.
    pub fn callable_tools(&self) -> Vec<AgentTool> {
        self.callable_now().map(|e| e.tool.clone()).collect()
    }

    /// The callable entries for the current active set.
    fn callable_now(&self) -> impl Iterator<Item = &Entry> {
        let active: HashSet<&str> = self.active.iter().map(AgentTool::name).collect();
        self.callable_for(&active).into_iter()
    }

    /// What nested callers see of the callable tools (pi's `ctx.tools`): name, description, exposure,
    /// namespace, guidelines, parameters and output schema, in registry order.
    pub fn callable_infos(&self) -> Vec<LoadoutTool> {
        self.callable_now().map(loadout_info).collect()
    }

    /// Names activated but not registered yet (restored from a transcript).
    pub fn pending_names(&self) -> &[String] {
        &self.pending
    }

    /// The loadout hooks that failed since the last call, oldest first.
    pub fn take_loadout_errors(&mut self) -> Vec<LoadoutError> {
        std::mem::take(&mut self.errors)
    }

    /// pi's `getAllTools`, with each tool's sets.
    pub fn tool_infos(&self) -> Vec<ToolInfo> {
        let active = self.active_names();
        let callable = self.callable_names();
        self.entries
            .iter()
            .map(|e| {
                let d = &e.definition;
                ToolInfo {
                    name: d.name.clone(),
                    label: d.label.clone(),
                    description: d.description.clone(),
                    parameters: d.parameters.clone(),
                    prompt_guidelines: d.prompt_guidelines.clone(),
                    exposure: d.exposure,
                    namespace: d.namespace.clone(),
                    annotations: d.annotations.clone(),
                    execution_mode: d.execution_mode,
                    default_active: self.is_activated_on_registration(&d.name),
                    source_info: source_info(d),
                    active: active.contains(&d.name),
                    declared: active.contains(&d.name) && !self.hidden.contains(&d.name),
                    callable: callable.contains(&d.name),
                }
            })
            .collect()
    }

    /// What a provider request declares (pi's `toToolDeclaration` over the active tools, hidden declarations
    /// left out), in active order.
    pub fn declarations(&self) -> Vec<ToolDeclaration> {
        self.active
            .iter()
            .filter(|t| !self.hidden.iter().any(|h| h == t.name()))
            .map(ToolDeclaration::of)
            .collect()
    }

    /// pi's `declareToolChanges`: the system message that brings a transcript whose system messages are
    /// `transcript` to the current active set (hidden declarations included: the transcript declares them, and
    /// requests leave them out), or `None` when nothing changed.
    pub fn tool_changes(&self, transcript: &[ToolChanges]) -> Option<ToolChanges> {
        let current: Vec<ToolDeclaration> = self.active.iter().map(ToolDeclaration::of).collect();
        let changes = transcript::tool_state_changes(&transcript::current_tools(transcript), &current);
        (!changes.is_empty()).then_some(changes)
    }

    /// The system prompt's `tools` and `rules` sections for the active set (pi's `buildSystemPromptSections`).
    pub fn prompt_sections(&self) -> PromptSections {
        let selected = self.active_names();
        PromptSections::build(&selected, &self.hidden, |name| match self.entry(name) {
            Some(e) => (e.snippet.as_deref(), e.guidelines.as_slice()),
            None => (None, &[]),
        })
    }

    /// pi's `searchAndLoad`: rank the `codemode` and `deferred` tools that are not active, activate the matches,
    /// and return their names and registered descriptions in rank order.
    pub fn search_and_load(&mut self, query: &str, limit: usize) -> Vec<(String, String)> {
        let active = self.active_names();
        let candidates: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| search::is_searchable(e.definition.exposure) && !active.contains(&e.definition.name))
            .collect();
        let documents: Vec<search::SearchDocument> = candidates
            .iter()
            .map(|e| {
                let d = &e.definition;
                search::SearchDocument::new(&d.name, &d.description, &d.parameters, d.namespace.as_ref())
            })
            .collect();
        let matches = search::rank(query, &documents, limit);
        let found: Vec<(String, String)> = matches
            .iter()
            .map(|m| {
                let description = candidates
                    .iter()
                    .find(|e| e.definition.name == m.name)
                    .map(|e| e.definition.description.clone())
                    .unwrap_or_default();
                (m.name.clone(), description)
            })
            .collect();
        if !found.is_empty() {
            let mut names = active;
            names.extend(found.iter().map(|(n, _)| n.clone()));
            self.set_active_tools(&names);
        }
        found
    }
}

fn loadout_info(entry: &Entry) -> LoadoutTool {
    let d = &entry.definition;
    LoadoutTool {
        name: d.name.clone(),
        description: d.description.clone(),
        exposure: d.exposure,
        namespace: d.namespace.clone(),
        prompt_guidelines: entry.guidelines.clone(),
        parameters: Some(d.parameters.clone()),
        output_schema: d.output_schema.clone(),
    }
}

/// pi's `sourceInfo` of a definition.
pub fn source_info(definition: &ToolDefinition) -> SourceInfo {
    match &definition.source {
        ToolSource::Builtin => SourceInfo {
            path: format!("builtin:{}", definition.name),
            source: "builtin",
        },
        ToolSource::Sdk => SourceInfo {
            path: format!("<sdk:{}>", definition.name),
            source: "sdk",
        },
        ToolSource::Plugin { path } => SourceInfo {
            path: path.display().to_string(),
            source: "plugin",
        },
    }
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
mod tests {
    use super::*;
    use crate::types::AgentToolResult;
    use serde_json::json;

    fn tool(name: &str, exposure: Exposure) -> ToolDefinition {
        let mut d = ToolDefinition::new(
            name,
            format!("The {name} tool"),
            json!({"type": "object"}),
            |_run, _ctx| async { Ok(AgentToolResult::text("ok")) },
        );
        d.exposure = exposure;
        d
    }

    fn builtins() -> Vec<ToolDefinition> {
        crate::builtins::NAMES
            .iter()
            .map(|n| {
                let mut d = tool(n, Exposure::Direct);
                d.source = ToolSource::Builtin;
                d
            })
            .collect()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_spec_allowlist_example_filters_built_ins_too() {
        let sources = RegistrySources {
            builtins: builtins(),
            extensions: vec![
                tool("ask_question", Exposure::Direct),
                tool("dynamic_tool", Exposure::Direct),
            ],
            sdk: Vec::new(),
        };
        let selection = Selection {
            tools: Some(names(&["*_tool", "ask_*", "re*"])),
            exclude_tools: Some(names(&["ask*"])),
            ..Default::default()
        };
        let registry = Registry::new(sources, &selection).unwrap();
        assert_eq!(registry.registered_names(), ["read", "dynamic_tool"]);
        assert_eq!(registry.active_names(), ["read", "dynamic_tool"]);
    }

    #[test]
    fn mcp_tools_survive_an_allowlist_without_mcp_entries_but_only_tool_search_can_activate_them() {
        let sources = RegistrySources {
            builtins: builtins(),
            extensions: vec![
                tool("mcp__docs__search", Exposure::Direct),
                tool("mcp__docs__fetch", Exposure::Deferred),
            ],
            sdk: Vec::new(),
        };
        let selection = Selection {
            tools: Some(names(&["read"])),
            ..Default::default()
        };
        let mut registry = Registry::new(sources.clone(), &selection).unwrap();
        assert_eq!(
            registry.registered_names(),
            ["read", "mcp__docs__search", "mcp__docs__fetch"]
        );
        registry.set_active_tools(&names(&["read", "mcp__docs__search", "mcp__docs__fetch"]));
        // No tool_search: neither MCP tool is activatable.
        assert_eq!(registry.active_names(), ["read"]);

        // tool_search must itself be allowed to be registered.
        let with_search = Selection {
            tools: Some(names(&["read", "tool_search"])),
            ..Default::default()
        };
        let shared = Registry::with_tool_search(sources.clone(), &with_search).unwrap();
        let mut registry = shared.lock().unwrap();
        registry.set_active_tools(&names(&["read", "mcp__docs__search", "mcp__docs__fetch"]));
        assert_eq!(
            registry.active_names(),
            ["read", "mcp__docs__fetch"],
            "a direct MCP tool stays inactive"
        );

        let filtering = Selection {
            tools: Some(names(&["read", "mcp__other__*"])),
            ..Default::default()
        };
        let registry = Registry::new(sources, &filtering).unwrap();
        assert_eq!(registry.registered_names(), ["read"]);
    }

    #[test]
    fn a_refresh_activates_new_tools_but_not_ones_the_user_deactivated() {
        let mut registry = Registry::new(
            RegistrySources {
                builtins: builtins(),
                ..Default::default()
            },
            &Selection::default(),
        )
        .unwrap();
        assert_eq!(registry.active_names(), ["read", "bash", "edit", "write"]);
        registry.set_active_tools(&names(&["read", "edit"]));
        registry.register(tool("fresh", Exposure::Direct));
        assert_eq!(registry.active_names(), ["read", "edit", "fresh"]);
        // Re-registering keeps the position and does not re-activate what was deactivated.
        registry.set_active_tools(&names(&["read"]));
        registry.register(tool("fresh", Exposure::Direct));
        assert_eq!(registry.active_names(), ["read"]);
        assert_eq!(
            registry.registered_names().last().map(String::as_str),
            Some("fresh")
        );
        // A tool whose exposure changes from hidden to direct counts as new.
        registry.register(tool("ghost", Exposure::Hidden));
        assert_eq!(registry.active_names(), ["read"]);
        registry.register(tool("ghost", Exposure::Direct));
        assert_eq!(registry.active_names(), ["read", "ghost"]);
    }

    #[test]
    fn pending_names_are_forgotten_when_a_run_starts() {
        let mut registry = Registry::new(
            RegistrySources {
                builtins: builtins(),
                ..Default::default()
            },
            &Selection::default(),
        )
        .unwrap();
        let declared = |n: &str| ToolDeclaration {
            name: n.into(),
            description: String::new(),
            parameters: json!({}),
            constrained_sampling: None,
        };
        registry.restore_from_transcript(&[ToolChanges {
            tools_added: vec![declared("read"), declared("late")],
            ..Default::default()
        }]);
        assert_eq!(registry.active_names(), ["read"]);
        assert_eq!(registry.pending_names(), ["late"]);
        registry.start_run();
        registry.register(tool("late", Exposure::Direct));
        // Registration still activates it as a new tool, but not because it was pending.
        assert_eq!(registry.pending_names(), [] as [String; 0]);
        assert_eq!(registry.active_names(), ["read", "late"]);
    }

    #[test]
    fn a_panicking_loadout_hook_is_reported_and_the_others_apply() {
        let mut panics = tool("panics", Exposure::Direct);
        panics.prepare_loadout = Some(Arc::new(|_: &ToolLoadout| panic!("boom")));
        let mut renames = tool("renames", Exposure::Direct);
        renames.prepare_loadout = Some(Arc::new(|loadout: &ToolLoadout| {
            assert_eq!(loadout.exposure("panics"), Exposure::Direct);
            let mut changes = crate::definition::ToolLoadoutChanges::default();
            changes.descriptions.insert("panics".into(), "Renamed".into());
            changes.descriptions.insert("not_active".into(), "ignored".into());
            Ok(Some(changes))
        }));
        let mut registry = Registry::new(
            RegistrySources {
                sdk: vec![panics, renames],
                ..Default::default()
            },
            &Selection::default(),
        )
        .unwrap();
        let errors = registry.take_loadout_errors();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].extension_path, "<sdk:panics>");
        assert_eq!(errors[0].error, "prepareLoadout panicked");
        assert_eq!(registry.declarations()[0].description, "Renamed");
        assert_eq!(
            registry.tool_infos()[0].description,
            "The panics tool",
            "ToolInfo keeps the registered text"
        );
    }

    #[test]
    fn selections_are_validated_with_pi_texts() {
        let bad = |tools: &[&str]| {
            Registry::new(
                RegistrySources::default(),
                &Selection {
                    tools: Some(names(tools)),
                    ..Default::default()
                },
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            bad(&["read", "+grep"]),
            "Invalid tools option: tool names cannot be mixed with +name or -name entries"
        );
        assert_eq!(
            bad(&["+gr*"]),
            "Invalid tools option: +name and -name entries take exact tool names, not patterns: +gr*"
        );
        assert_eq!(
            apply_tool_modifiers(
                &names(&["read", "bash"]),
                &names(&["+grep", "-read", "+bash", "-nope", "+"])
            ),
            ["bash", "grep"]
        );
        assert!(ToolMatcher::new(&names(&["a.b*"])).matches("a.bc"));
        assert!(
            !ToolMatcher::new(&names(&["a.b*"])).matches("axbc"),
            "only * is special"
        );
    }
}
