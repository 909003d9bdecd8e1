//! What a plugin says about itself: name, version, description, and the capabilities it requests with reasons.

use serde::{Deserialize, Serialize};

/// A capability a plugin asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "target", rename_all = "camelCase")]
pub enum Capability {
    /// Read files below this directory.
    Read(String),
    /// Read and write files below this directory.
    Write(String),
    /// Start this program.
    Spawn(String),
    /// See this environment variable.
    Env(String),
    /// Open outgoing connections to addresses matching this `HOST:PORT` pattern (HOST an IP address, IPv6 in
    /// brackets, a name or `*`; PORT a number or `*`).
    Network(String),
}

/// A requested capability and the reason given for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityRequest {
    /// What.
    pub capability: Capability,
    /// Why, in words for the person deciding.
    pub reason: String,
}

impl CapabilityRequest {
    /// A request for `capability`, because `reason`.
    pub fn new(capability: Capability, reason: impl Into<String>) -> Self {
        CapabilityRequest {
            capability,
            reason: reason.into(),
        }
    }
}

/// What a `.wasm` file says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginMetadata {
    /// The plugin's name (unique among loaded plugins).
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it is for.
    pub description: String,
    /// What it asks to be granted.
    pub capabilities: Vec<CapabilityRequest>,
}
