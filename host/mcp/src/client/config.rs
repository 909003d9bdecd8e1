//! MCP servers to connect to: the `mcpServers` files Claude Desktop, Cursor, Claude Code and pi share, read
//! with pi 1.6.0's rules and texts (pi-mcp's `validateMcpServerConfig`, pi's `extensions/mcp/config.js`).
//!
//! - A file is `{"mcpServers": {NAME: ENTRY, …}}`; a file that does not parse, or has another shape, is one error
//!   and contributes nothing.
//! - An entry is a stdio server (`command`, `args`, `env`, `cwd`) or a streamable HTTP one (`url`, `headers`),
//!   with `enabled`, `description`, `timeout` (seconds), `exposure` and `toolExposure`. An invalid entry is one
//!   error (`PATH: server "NAME": …`, the first problem found, in pi's order) and is skipped; the others stand.
//! - Later files replace earlier entries of the same name. A project file's entry without `command`, `url` or
//!   `type` only overrides `enabled`, `exposure` and `toolExposure` of an earlier server.
//! - Two names that differ only in `-` and `_` would share a namespace: the second is refused.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// How a server's tools are offered to the model (pi's exposures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Reached from codemode scripts (the default).
    Codemode,
    /// Found and loaded with `tool_search`.
    Deferred,
    /// Declared to the model.
    Direct,
    /// Not offered.
    Hidden,
}

impl Exposure {
    /// The exposure named `name` (`codemode-deferred` is `codemode`'s older name).
    pub fn parse(name: &str) -> Option<Exposure> {
        match name {
            "codemode" | "codemode-deferred" => Some(Exposure::Codemode),
            "deferred" => Some(Exposure::Deferred),
            "direct" => Some(Exposure::Direct),
            "hidden" => Some(Exposure::Hidden),
            _ => None,
        }
    }
}

/// How the client reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A program started with its standard input and output as the connection.
    Stdio {
        /// The program (`~` is the home directory; not `${}`-expanded, as in pi).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set on top of what the server may see, values still unexpanded (`${VAR}`).
        env: Vec<(String, String)>,
        /// Where it runs (relative to the workspace).
        cwd: Option<String>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Values still unexpanded (`${TOKEN}`).
        headers: Vec<(String, String)>,
    },
}

/// Where an entry was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's own files.
    User,
    /// A trusted project's files.
    Project,
}

/// One configured server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Its name (letters, digits, `_` and `-`).
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// Off: configured, not connected.
    pub enabled: bool,
    /// What the prompt's `mcp_servers` section says of it.
    pub description: Option<String>,
    /// Per-request timeout in seconds (pi's default: 60).
    pub timeout: Option<f64>,
    /// How its tools are offered unless `tool_exposure` says otherwise.
    pub exposure: Exposure,
    /// `toolExposure`, in file order: exact names beat patterns, the first matching pattern wins.
    pub tool_exposure: Vec<(String, Exposure)>,
    /// The file that defined it (a project's override keeps the defining file's).
    pub source: PathBuf,
    /// Whose file it was.
    pub scope: Scope,
    /// The raw entry (fields pi does not know are kept, as pi keeps them).
    pub raw: Map<String, Value>,
}

impl ServerConfig {
    /// The exposure of the server's tool named `tool` (the server's own name for it).
    pub fn tool_exposure(&self, tool: &str) -> Exposure {
        if let Some((_, exposure)) = self.tool_exposure.iter().find(|(name, _)| name == tool) {
            return *exposure;
        }
        self.tool_exposure
            .iter()
            .find(|(pattern, _)| pattern.contains('*') && matches_pattern(pattern, tool))
            .map_or(self.exposure, |(_, exposure)| *exposure)
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of characters (pi's `toolPatternRegExp`).
pub fn matches_pattern(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = parts.split_first().expect("split yields one part at least");
    let Some(mut left) = name.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return left.is_empty();
    };
    for part in middle {
        match left.find(part) {
            Some(at) => left = &left[at + part.len()..],
            None => return false,
        }
    }
    left.len() >= last.len() && left.ends_with(last)
}

/// The servers of a set of files, and what was wrong with them.
#[derive(Debug, Clone, Default)]
pub struct McpConfig {
    /// The valid servers, in the order first defined.
    pub servers: Vec<ServerConfig>,
    /// pi's `autoEnableCodemode` (the last file that sets it wins).
    pub auto_enable_codemode: Option<bool>,
    /// One line per problem: `PATH: …`.
    pub errors: Vec<String>,
}

const OVERRIDE_KEYS: [&str; 3] = ["enabled", "exposure", "toolExposure"];
const EXPOSURES: &str = r#""codemode", "deferred", "direct", "hidden""#;

impl McpConfig {
    /// Read `path` (if it exists) as a file of `scope`, on top of what is read already.
    pub fn read_file(&mut self, path: &Path, scope: Scope) {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                self.errors.push(format!("{}: {e}", path.display()));
                return;
            }
        };
        self.read_text(path, &text, scope);
    }

    /// [`McpConfig::read_file`] of a file's text.
    pub fn read_text(&mut self, path: &Path, text: &str, scope: Scope) {
        let shown = path.display();
        let parsed: Value = match serde_json::from_str(text.trim_start_matches('\u{feff}')) {
            Ok(value) => value,
            Err(e) => {
                self.errors.push(format!("{shown}: {e}"));
                return;
            }
        };
        let servers = match parsed.get("mcpServers") {
            _ if !parsed.is_object() => None,
            None => Some(Map::new()),
            Some(Value::Object(servers)) => Some(servers.clone()),
            Some(_) => None,
        };
        let Some(servers) = servers else {
            self.errors.push(format!(
                r#"{shown}: expected an object with an "mcpServers" object"#
            ));
            return;
        };
        match parsed.get("autoEnableCodemode") {
            None => {}
            Some(Value::Bool(on)) => self.auto_enable_codemode = Some(*on),
            Some(_) => self
                .errors
                .push(format!("{shown}: autoEnableCodemode must be a boolean")),
        }
        for (name, value) in servers {
            let is_override = value.as_object().is_some_and(|entry| {
                !entry.contains_key("command") && !entry.contains_key("url") && !entry.contains_key("type")
            });
            if scope == Scope::Project && is_override {
                let entry = value.as_object().expect("checked");
                let base = self.servers.iter().position(|s| s.name == name);
                let extra = entry.keys().any(|k| !OVERRIDE_KEYS.contains(&k.as_str()));
                match base {
                    None => self.errors.push(format!(
                        r#"{shown}: server "{name}" needs "command" or "url", or a global server to override"#
                    )),
                    Some(_) if extra => self.errors.push(format!(
                        r#"{shown}: server "{name}": an override can only set {}"#,
                        OVERRIDE_KEYS.join(", ")
                    )),
                    Some(at) => {
                        let mut merged = self.servers[at].raw.clone();
                        merged.extend(entry.clone());
                        match validate(&name, &Value::Object(merged), path, scope) {
                            Ok(mut config) => {
                                config.source = self.servers[at].source.clone();
                                config.scope = self.servers[at].scope;
                                self.servers[at] = config;
                            }
                            Err(e) => self.errors.push(format!("{shown}: {e}")),
                        }
                    }
                }
                continue;
            }
            let config = match validate(&name, &value, path, scope) {
                Ok(config) => config,
                Err(e) => {
                    self.errors.push(format!("{shown}: {e}"));
                    continue;
                }
            };
            let namespace = super::naming::namespace(&name);
            if let Some(clash) = self
                .servers
                .iter()
                .find(|s| s.name != name && super::naming::namespace(&s.name) == namespace)
            {
                self.errors.push(format!(
                    r#"{shown}: server "{name}" conflicts with "{}""#,
                    clash.name
                ));
                continue;
            }
            match self.servers.iter().position(|s| s.name == name) {
                Some(at) => self.servers[at] = config,
                None => self.servers.push(config),
            }
        }
    }
}

/// One entry, checked as pi checks it (the first problem, in pi's order).
fn validate(name: &str, raw: &Value, path: &Path, scope: Scope) -> Result<ServerConfig, String> {
    let valid_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid_name {
        return Err(format!(
            r#"invalid server name "{name}" (use letters, digits, "_" and "-")"#
        ));
    }
    let Some(entry) = raw.as_object() else {
        return Err(format!(r#"server "{name}" must be an object"#));
    };
    let fail = |why: &str| Err(format!(r#"server "{name}": {why}"#));
    let enabled = match entry.get("enabled") {
        None => true,
        Some(Value::Bool(on)) => *on,
        Some(_) => return fail("enabled must be a boolean"),
    };
    let description = match entry.get("description") {
        None => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => return fail("description must be a string"),
    };
    let timeout = match entry.get("timeout") {
        None => None,
        Some(Value::Number(n)) if n.as_f64().is_some_and(|t| t > 0.0) => n.as_f64(),
        Some(_) => return fail("timeout must be a positive number of seconds"),
    };
    let kind = entry.get("type");
    if kind.and_then(Value::as_str) == Some("sse") {
        return fail("legacy SSE transport is not supported; use the streamable HTTP URL");
    }
    let kind_is =
        |names: &[&str]| kind.is_none() || kind.and_then(Value::as_str).is_some_and(|k| names.contains(&k));
    let transport = match (entry.get("url"), entry.get("command")) {
        (Some(Value::String(url)), _) if kind_is(&["http", "streamable-http"]) => {
            if !is_http_url(url) {
                return fail("url must be an http or https URL");
            }
            let headers = match entry.get("headers") {
                None => Vec::new(),
                Some(value) => match string_map(value) {
                    Some(headers) => headers,
                    None => return fail("headers must map names to strings"),
                },
            };
            Transport::Http {
                url: url.clone(),
                headers,
            }
        }
        (_, Some(Value::String(command))) if kind_is(&["stdio"]) => {
            let args = match entry.get("args") {
                None => Vec::new(),
                Some(Value::Array(args)) if args.iter().all(Value::is_string) => args
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_owned))
                    .collect(),
                Some(_) => return fail("args must be an array of strings"),
            };
            let env = match entry.get("env") {
                None => Vec::new(),
                Some(value) => match string_map(value) {
                    Some(env) => env,
                    None => return fail("env must map names to strings"),
                },
            };
            let cwd = match entry.get("cwd") {
                None => None,
                Some(Value::String(cwd)) => Some(cwd.clone()),
                Some(_) => return fail("cwd must be a string"),
            };
            Transport::Stdio {
                command: command.clone(),
                args,
                env,
                cwd,
            }
        }
        _ => {
            return Err(format!(
                r#"server "{name}" needs either "command" (stdio) or "url" (streamable HTTP)"#
            ));
        }
    };
    let exposure = match entry.get("exposure") {
        None => Exposure::Codemode,
        Some(value) => match value.as_str().and_then(Exposure::parse) {
            Some(exposure) => exposure,
            None => return fail(&format!("exposure must be one of {EXPOSURES}")),
        },
    };
    let tool_exposure = match entry.get("toolExposure") {
        None => Vec::new(),
        Some(Value::Object(map)) => {
            let mut list = Vec::with_capacity(map.len());
            for (tool, value) in map {
                match value.as_str().and_then(Exposure::parse) {
                    Some(exposure) => list.push((tool.clone(), exposure)),
                    None => return fail(&format!(r#"toolExposure "{tool}" must be one of {EXPOSURES}"#)),
                }
            }
            list
        }
        Some(_) => return fail("toolExposure must map tool names to exposures"),
    };
    Ok(ServerConfig {
        name: name.to_owned(),
        transport,
        enabled,
        description,
        timeout,
        exposure,
        tool_exposure,
        source: path.to_owned(),
        scope,
        raw: entry.clone(),
    })
}

/// A JSON object of strings, in file order.
fn string_map(value: &Value) -> Option<Vec<(String, String)>> {
    value
        .as_object()?
        .iter()
        .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
        .collect()
}

/// Whether `url` parses as an `http:` or `https:` URL with a host (WHATWG's `URL.canParse` and protocol check,
/// for the URLs a configuration holds).
fn is_http_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    rest.is_some_and(|rest| {
        let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
        !host.is_empty() && !host.contains(' ')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(files: &[(&str, Scope)]) -> McpConfig {
        let mut config = McpConfig::default();
        for (i, (text, scope)) in files.iter().enumerate() {
            config.read_text(Path::new(&format!("/f{i}.json")), text, *scope);
        }
        config
    }

    #[test]
    fn invalid_entries_are_reported_with_pis_texts_and_skipped() {
        let config = read(&[(
            r#"{"mcpServers": {
                "bad name": {"command": "x"},
                "a": 3,
                "b": {"command": "x", "enabled": "yes"},
                "c": {"command": "x", "timeout": 0},
                "d": {"url": "https://x", "type": "sse"},
                "e": {"url": "ftp://x"},
                "f": {"command": "x", "args": [1]},
                "g": {"command": "x", "env": {"K": 1}},
                "h": {},
                "i": {"command": "x", "exposure": "everywhere"},
                "j": {"command": "x", "toolExposure": {"t": "x"}},
                "ok": {"command": "node", "args": ["s.js"], "exposure": "codemode-deferred"}
            }}"#,
            Scope::User,
        )]);
        assert_eq!(
            config.errors,
            vec![
                r#"/f0.json: invalid server name "bad name" (use letters, digits, "_" and "-")"#,
                r#"/f0.json: server "a" must be an object"#,
                r#"/f0.json: server "b": enabled must be a boolean"#,
                r#"/f0.json: server "c": timeout must be a positive number of seconds"#,
                r#"/f0.json: server "d": legacy SSE transport is not supported; use the streamable HTTP URL"#,
                r#"/f0.json: server "e": url must be an http or https URL"#,
                r#"/f0.json: server "f": args must be an array of strings"#,
                r#"/f0.json: server "g": env must map names to strings"#,
                r#"/f0.json: server "h" needs either "command" (stdio) or "url" (streamable HTTP)"#,
                r#"/f0.json: server "i": exposure must be one of "codemode", "deferred", "direct", "hidden""#,
                r#"/f0.json: server "j": toolExposure "t" must be one of "codemode", "deferred", "direct", "hidden""#,
            ]
        );
        assert_eq!(config.servers.len(), 1);
        assert_eq!(config.servers[0].exposure, Exposure::Codemode);
    }

    #[test]
    fn files_replace_entries_and_a_project_may_only_override_a_few_fields() {
        let config = read(&[
            (
                r#"{"mcpServers": {"docs": {"url": "https://d/mcp", "headers": {"Authorization": "Bearer ${T}"}},
                   "fs": {"command": "npx"}}}"#,
                Scope::User,
            ),
            (
                r#"{"mcpServers": {"docs": {"enabled": false}, "fs": {"enabled": false, "env": {}},
                   "new": {"enabled": true}, "docs_": {"command": "y"}, "do-cs": {"command": "z"}}}"#,
                Scope::Project,
            ),
        ]);
        assert_eq!(
            config.errors,
            vec![
                r#"/f1.json: server "fs": an override can only set enabled, exposure, toolExposure"#,
                r#"/f1.json: server "new" needs "command" or "url", or a global server to override"#,
            ]
        );
        let docs = config.servers.iter().find(|s| s.name == "docs").unwrap();
        assert!(!docs.enabled);
        assert_eq!(docs.source, Path::new("/f0.json"));
        assert!(matches!(&docs.transport, Transport::Http { headers, .. } if headers[0].1 == "Bearer ${T}"));
        assert!(config.servers.iter().any(|s| s.name == "docs_"));
        // `do-cs` and `do_cs` would share `mcp__do_cs`; `docs_` does not clash with `docs`.
        let config = read(&[(
            r#"{"mcpServers": {"do_cs": {"command": "a"}, "do-cs": {"command": "b"}}}"#,
            Scope::User,
        )]);
        assert_eq!(
            config.errors,
            vec![r#"/f0.json: server "do-cs" conflicts with "do_cs""#]
        );
    }

    #[test]
    fn a_file_of_another_shape_is_one_error() {
        let config = read(&[(r#"{"mcpServers": []}"#, Scope::User), (r#"[1]"#, Scope::User)]);
        assert_eq!(
            config.errors,
            vec![
                r#"/f0.json: expected an object with an "mcpServers" object"#,
                r#"/f1.json: expected an object with an "mcpServers" object"#,
            ]
        );
    }

    #[test]
    fn tool_exposure_exact_beats_patterns_and_the_first_pattern_wins() {
        // Recorded from pi 1.6.0: echo direct, big codemode (registered as deferred), get.thing deferred, the rest
        // hidden.
        let config = read(&[(
            r#"{"mcpServers": {"probe": {"command": "node",
                "toolExposure": {"echo": "direct", "get*": "deferred", "*": "hidden", "big": "codemode"}}}}"#,
            Scope::User,
        )]);
        let probe = &config.servers[0];
        assert_eq!(probe.tool_exposure("echo"), Exposure::Direct);
        assert_eq!(probe.tool_exposure("big"), Exposure::Codemode);
        assert_eq!(probe.tool_exposure("get.thing"), Exposure::Deferred);
        assert_eq!(probe.tool_exposure("other"), Exposure::Hidden);
        assert!(matches_pattern("a*b*c", "a-x-b-y-c"));
        assert!(!matches_pattern("a*b", "a-x-c"));
        assert!(matches_pattern("*", ""));
        assert!(!matches_pattern("ab*ba", "aba"));
    }
}
