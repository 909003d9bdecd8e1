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

impl Capability {
    /// The capability for the person deciding whether to grant it: `read files below ./docs`, `start git`,
    /// `connect to api.example.com:443` (what `toolwright plugins`, `check` and `plugins add` show). The value is
    /// the plugin's own text, as it gave it: escape it before a terminal shows it.
    ///
    /// ```
    /// use toolwright_sdk::Capability;
    /// let docs = Capability::Read("./docs".into());
    /// assert_eq!(docs.describe(), "read files below ./docs");
    /// assert_eq!(docs.to_string(), "read ./docs");
    /// ```
    pub fn describe(&self) -> String {
        let target = self.target();
        match self {
            Capability::Read(_) => format!("read files below {target}"),
            Capability::Write(_) => format!("write files below {target}"),
            Capability::Spawn(_) => format!("start {target}"),
            Capability::Env(_) => format!("see the environment variable {target}"),
            Capability::Network(_) => format!("connect to {target}"),
        }
    }

    /// Its kind as a policy file's key names it: `read`, `write`, `spawn`, `env`, `network`.
    pub fn kind(&self) -> &'static str {
        match self {
            Capability::Read(_) => "read",
            Capability::Write(_) => "write",
            Capability::Spawn(_) => "spawn",
            Capability::Env(_) => "env",
            Capability::Network(_) => "network",
        }
    }

    /// What it is for: the directory, program, variable or `HOST:PORT` pattern.
    pub fn target(&self) -> &str {
        match self {
            Capability::Read(t)
            | Capability::Write(t)
            | Capability::Spawn(t)
            | Capability::Env(t)
            | Capability::Network(t) => t,
        }
    }
}

/// The capability in the words of a policy file and a lockfile: its [`kind`](Capability::kind) and its
/// [`target`](Capability::target), `read ./docs`, `spawn git`, `env HOME`, `network host:443`.
impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind(), self.target())
    }
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
