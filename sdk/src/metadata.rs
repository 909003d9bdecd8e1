//! Tool metadata shared by every kind of tool: execution mode, exposure, annotations, namespace.

use serde::{Deserialize, Serialize};

/// Whether a tool may run concurrently with the other calls of its batch (pi's `executionMode`).
///
/// A tool that says `Sequential` makes every batch it appears in run one call at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionMode {
    /// Calls of the batch run concurrently (pi's default).
    #[default]
    Parallel,
    /// Calls of the batch run one after the other.
    Sequential,
}

/// How the model can reach a tool (pi's `ToolExposure`); the default is [`Exposure::Direct`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Exposure {
    /// Declared to the model and callable from other tools.
    #[default]
    Direct,
    /// Declared to the model, never reachable through nested calls.
    ModelOnly,
    /// Not declared; reachable only from codemode scripts and nested calls.
    Codemode,
    /// Not declared until tool search activates it.
    Deferred,
    /// Registered but unreachable.
    Hidden,
}

/// Informational hints about a tool's effects (MCP semantics): from the tool's author and not verified.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// The tool does not modify its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may perform destructive updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling the tool twice with the same arguments has no additional effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool interacts with an open world of external entities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl ToolAnnotations {
    /// All four hints set: `read_only` (changes nothing), `destructive` (may overwrite or delete), `idempotent`
    /// (a repeat with the same arguments changes nothing more), `open_world` (reaches beyond the local machine's
    /// files, such as the network).
    pub const fn hints(read_only: bool, destructive: bool, idempotent: bool, open_world: bool) -> Self {
        ToolAnnotations {
            read_only_hint: Some(read_only),
            destructive_hint: Some(destructive),
            idempotent_hint: Some(idempotent),
            open_world_hint: Some(open_world),
        }
    }
}

/// A group of tools (pi's `ToolNamespace`), for listings and tool search; no effect on execution.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolNamespace {
    /// The namespace's name, for example `mcp__docs`.
    pub name: String,
    /// Other names that find the namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// Shown once with the group in listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Shown only on request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}
