//! Which tools a session starts with: pi's selection options (`--tools`, `--no-tools`, `--exclude-tools`),
//! name matchers with `*`, and `+`/`-` modifiers.

use std::collections::HashSet;

use regex::Regex;

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
