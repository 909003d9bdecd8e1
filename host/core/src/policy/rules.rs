//! The typed rules of a policy entry: programs with argument prefixes ([`SpawnRule`]) and network address
//! patterns ([`NetPattern`]).

use serde::{Deserialize, Serialize};

/// A program a policy grants, with the argument prefixes it may be started with.
///
/// In a policy file either a name (`"git"`: any arguments) or a table (`{ program = "git", args = [["status"],
/// ["log"]] }`: the arguments must start with one of the lists).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(from = "SpawnEntry", into = "SpawnEntry")]
pub struct SpawnRule {
    /// The program: a name looked up on the host's `PATH`, an absolute path, or `*` (whatever is requested).
    pub program: String,
    /// The argument prefixes it may be started with (none: any arguments).
    pub args: Option<Vec<Vec<String>>>,
}

/// How a [`SpawnRule`] is spelled in a policy file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
enum SpawnEntry {
    Program(String),
    Rule(SpawnTable),
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SpawnTable {
    program: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    args: Option<Vec<Vec<String>>>,
}

impl From<SpawnEntry> for SpawnRule {
    fn from(entry: SpawnEntry) -> Self {
        match entry {
            SpawnEntry::Program(program) => SpawnRule { program, args: None },
            SpawnEntry::Rule(t) => SpawnRule {
                program: t.program,
                args: t.args,
            },
        }
    }
}

impl From<SpawnRule> for SpawnEntry {
    fn from(rule: SpawnRule) -> Self {
        match rule.args {
            None => SpawnEntry::Program(rule.program),
            args => SpawnEntry::Rule(SpawnTable {
                program: rule.program,
                args,
            }),
        }
    }
}

impl From<&str> for SpawnRule {
    fn from(program: &str) -> Self {
        SpawnRule {
            program: program.to_owned(),
            args: None,
        }
    }
}

impl SpawnRule {
    /// What the grants among `rules` naming `program` (or `*`) allow together: any arguments if one of them
    /// allows any, else the union of their prefixes; none when no rule names it.
    pub fn combined(program: &str, rules: &[SpawnRule]) -> Option<SpawnRule> {
        let matching: Vec<&SpawnRule> = rules
            .iter()
            .filter(|r| r.program == program || r.program == "*")
            .collect();
        if matching.is_empty() {
            return None;
        }
        let args = if matching.iter().any(|r| r.args.is_none()) {
            None
        } else {
            Some(
                matching
                    .iter()
                    .flat_map(|r| r.args.iter().flatten().cloned())
                    .collect(),
            )
        };
        Some(SpawnRule {
            program: program.to_owned(),
            args,
        })
    }

    /// Whether `args` start with one of the allowed prefixes (always, without a restriction).
    pub fn allows_args(&self, args: &[String]) -> bool {
        self.args
            .as_ref()
            .is_none_or(|prefixes| prefixes.iter().any(|p| args.starts_with(p)))
    }
}

impl std::fmt::Display for SpawnRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.args {
            None => write!(f, "\"{}\"", self.program),
            Some(args) => write!(f, "{{ program = \"{}\", args = {args:?} }}", self.program),
        }
    }
}

/// Whether `ip` is this machine (a loopback or unspecified address, IPv4-mapped ones too) or link-local (a cloud's
/// metadata service): what a granted *name* never reaches by resolving to it, unless it says so
/// ([`names_this_machine`]): whoever owns a name chooses its answer, and one that rebinds to 127.0.0.1 would reach
/// the user's own services through a grant of `crates.io:443`.
pub fn is_local_address(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    ip.is_loopback()
        || ip.is_unspecified()
        || match ip {
            IpAddr::V4(v4) => v4.is_link_local(),
            IpAddr::V6(v6) => v6.is_unicast_link_local(),
        }
}

/// Whether the host `host` (a name or an address, as written) says it is local: an address (its own word), or
/// `localhost` (`*.localhost`, a trailing dot, any case).
pub fn names_this_machine(host: &str) -> bool {
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.');
    host.parse::<std::net::IpAddr>().is_ok()
        || host.eq_ignore_ascii_case("localhost")
        || host.to_ascii_lowercase().ends_with(".localhost")
}

/// A network address pattern: `HOST:PORT`, HOST an IP address (IPv6 in brackets), a name or `*`, PORT a
/// number or `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPattern {
    /// The host, lower-cased (`*`: any).
    pub host: String,
    /// The port (none: any).
    pub port: Option<u16>,
}

impl NetPattern {
    /// Parse `HOST:PORT`; none when it is not one.
    pub fn parse(text: &str) -> Option<NetPattern> {
        let (host, port) = text.trim().rsplit_once(':')?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() || host.contains(['/', ' ']) {
            return None;
        }
        let port = match port {
            "*" => None,
            p => Some(p.parse().ok()?),
        };
        Some(NetPattern {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether every address this pattern allows is allowed by `outer`.
    pub fn within(&self, outer: &NetPattern) -> bool {
        (outer.host == "*" || outer.host == self.host) && (outer.port.is_none() || outer.port == self.port)
    }
}

impl std::fmt::Display for NetPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(port) => write!(f, "{host}:{port}"),
            None => write!(f, "{host}:*"),
        }
    }
}
