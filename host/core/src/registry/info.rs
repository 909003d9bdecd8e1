//! What the registry is built from and what it tells about its tools: [`RegistrySources`], [`ToolInfo`],
//! [`SourceInfo`], [`LoadoutError`].

use serde::Serialize;
use serde_json::Value;
use toolwright_sdk::{ExecutionMode, Exposure, LoadoutTool, ToolAnnotations, ToolNamespace};

use super::Entry;
use crate::definition::{ToolDefinition, ToolSource};

/// The tools a registry is built from, in pi's precedence: an extension tool replaces a built-in of the same
/// name, an SDK tool replaces either; the replacement keeps the replaced tool's position.
#[derive(Debug, Clone, Default)]
pub struct RegistrySources {
    /// The built-in tools (pi's base tools).
    pub builtins: Vec<ToolDefinition>,
    /// Extension tools: `tool_search` and the plugins' tools, in load order (the first of a name wins).
    pub extensions: Vec<ToolDefinition>,
    /// The embedding application's own tools (pi's SDK custom tools).
    pub embedder: Vec<ToolDefinition>,
}

/// The options of [`Registry::refresh`](super::Registry::refresh) (pi's `_refreshToolRegistry`).
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

/// pi's `sourceInfo` of a definition.
pub fn source_info(definition: &ToolDefinition) -> SourceInfo {
    match &definition.source {
        ToolSource::Builtin => SourceInfo {
            path: format!("builtin:{}", definition.name),
            source: "builtin",
        },
        ToolSource::Embedder => SourceInfo {
            path: format!("<sdk:{}>", definition.name),
            source: "sdk",
        },
        ToolSource::Plugin { path } => SourceInfo {
            path: path.display().to_string(),
            source: "plugin",
        },
        ToolSource::Mcp { server, .. } => SourceInfo {
            path: format!("mcp:{server}"),
            source: "mcp",
        },
    }
}

pub(super) fn loadout_info(entry: &Entry) -> LoadoutTool {
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
