//! pi 1.6.0's `mcp_servers` section of the system prompt: the servers whose tools are not declared to the model
//! (exposed to codemode scripts or left to `tool_search`), one line each with how to reach them and a summary,
//! within pi's budgets (4096 characters in all, 250 per server's summary).

use super::config::{Exposure, ServerConfig};
use super::naming;

/// The whole section's budget, in UTF-16 units (JavaScript's `length`).
pub const MAX_SECTION_CHARS: usize = 4096;
/// One server's summary's budget.
pub const MAX_SERVER_DESCRIPTION_CHARS: usize = 250;

/// One server as the section lists it.
#[derive(Debug, Clone)]
pub struct Listed<'a> {
    /// Its configuration.
    pub config: &'a ServerConfig,
    /// Its `instructions`, once it connected.
    pub instructions: Option<&'a str>,
}

fn len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// The first `max` UTF-16 units of `text`, never splitting a character.
fn slice_head(text: &str, max: usize) -> &str {
    let mut units = 0;
    for (at, c) in text.char_indices() {
        units += c.len_utf16();
        if units > max {
            return &text[..at];
        }
    }
    text
}

fn truncate(text: &str, max: usize) -> String {
    if len(text) <= max {
        text.to_owned()
    } else if max <= 1 {
        String::new()
    } else {
        format!("{}…", slice_head(text, max - 1).trim_end())
    }
}

/// The exposures a server's configuration uses: its own and those of its `toolExposure`.
fn exposures(config: &ServerConfig) -> Vec<Exposure> {
    std::iter::once(config.exposure)
        .chain(config.tool_exposure.iter().map(|(_, e)| *e))
        .collect()
}

/// The section's text, inside `<mcp_servers>` tags; none when no enabled server leaves tools undeclared.
pub fn section(servers: &[Listed<'_>]) -> Option<String> {
    let mut listed: Vec<&Listed<'_>> = servers
        .iter()
        .filter(|s| {
            let e = exposures(s.config);
            s.config.enabled && (e.contains(&Exposure::Codemode) || e.contains(&Exposure::Deferred))
        })
        .collect();
    if listed.is_empty() {
        return None;
    }
    listed.sort_by(|a, b| naming::locale_order(&a.config.name, &b.config.name));
    let reach = |s: &Listed<'_>| {
        if exposures(s.config).contains(&Exposure::Codemode) {
            "codemode"
        } else {
            "tool_search"
        }
    };
    let mut intro = "MCP servers whose tools are not declared to you.".to_owned();
    if listed.iter().any(|s| reach(s) == "codemode") {
        intro.push_str(" Call the tools of `codemode` servers from codemode scripts.");
    }
    if listed.iter().any(|s| reach(s) == "tool_search") {
        intro.push_str(" Load the tools of `tool_search` servers with `tool_search`.");
    }
    let heads: Vec<String> = listed
        .iter()
        .map(|s| format!("- {} ({})", naming::namespace(&s.config.name), reach(s)))
        .collect();
    let omitted = |count: usize| -> Vec<String> {
        if count == 0 {
            Vec::new()
        } else {
            vec![format!(
                "- … {count} more server{}; find their tools with searchTools()",
                if count == 1 { "" } else { "s" }
            )]
        }
    };
    let size = |k: usize| {
        let mut lines = vec![intro.clone()];
        lines.extend(heads[..k].iter().cloned());
        lines.extend(omitted(heads.len() - k));
        len(&lines.join("\n"))
    };
    let n = heads.len();
    let kept = (0..=n).rev().find(|k| size(*k) <= MAX_SECTION_CHARS).unwrap_or(0);
    let per_server = MAX_SECTION_CHARS
        .saturating_sub(size(kept))
        .checked_div(kept)
        .map_or(0, |room| MAX_SERVER_DESCRIPTION_CHARS.min(room.saturating_sub(2)));
    let mut lines = vec![intro.clone()];
    for (server, head) in listed.iter().zip(&heads).take(kept) {
        let summary = naming::server_summary(server.config.description.as_deref(), server.instructions);
        let summary = if per_server > 0 {
            truncate(&summary, per_server)
        } else {
            String::new()
        };
        lines.push(if summary.is_empty() {
            head.clone()
        } else {
            format!("{head}: {summary}")
        });
    }
    lines.extend(omitted(n - kept));
    Some(format!("<mcp_servers>\n{}\n</mcp_servers>", lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::config::{McpConfig, Scope};

    fn parse(text: &str) -> McpConfig {
        let mut config = McpConfig::default();
        config.read_text(std::path::Path::new("/a/mcp.json"), text, Scope::User);
        assert!(config.errors.is_empty(), "{:?}", config.errors);
        config
    }

    #[test]
    fn the_section_reads_as_pi_1_6_0_wrote_it() {
        // Recorded from pi 1.6.0 (its first request's system prompt) for the same two servers.
        let config = parse(
            r#"{"mcpServers": {
                "probe": {"command": "x", "exposure": "codemode"},
                "docs-srv": {"command": "x", "exposure": "deferred", "description": "Search the docs\nmore"},
                "plain": {"command": "x", "exposure": "direct"}
            }}"#,
        );
        let instructions = "Probe server for research.\nSecond line ignored.";
        let listed: Vec<Listed<'_>> = config
            .servers
            .iter()
            .map(|c| Listed {
                config: c,
                instructions: (c.name == "probe").then_some(instructions),
            })
            .collect();
        assert_eq!(
            section(&listed).unwrap(),
            "<mcp_servers>\nMCP servers whose tools are not declared to you. Call the tools of `codemode` servers \
             from codemode scripts. Load the tools of `tool_search` servers with `tool_search`.\n- mcp__docs_srv \
             (tool_search): Search the docs\n- mcp__probe (codemode): Probe server for research.\n</mcp_servers>"
        );
        // Not yet connected: no instructions, no summary.
        let bare: Vec<Listed<'_>> = config
            .servers
            .iter()
            .map(|c| Listed {
                config: c,
                instructions: None,
            })
            .collect();
        assert!(section(&bare).unwrap().contains("\n- mcp__probe (codemode)\n"));
        // Only direct servers: no section.
        let direct: Vec<Listed<'_>> = listed
            .iter()
            .filter(|l| l.config.name == "plain")
            .cloned()
            .collect();
        assert_eq!(section(&direct), None);
    }

    #[test]
    fn long_summaries_and_many_servers_keep_to_pi_s_budgets() {
        // pi 1.6.0: a 300-character description is cut to 250 characters, `…` included.
        let long = "D".repeat(300);
        let config = parse(&format!(
            r#"{{"mcpServers": {{"one": {{"command": "x", "description": "{long}"}}}}}}"#
        ));
        let listed = [Listed {
            config: &config.servers[0],
            instructions: None,
        }];
        let text = section(&listed).unwrap();
        let line = text.lines().find(|l| l.starts_with("- mcp__one")).unwrap();
        let summary = line.split_once(": ").unwrap().1;
        assert_eq!(len(summary), 250);
        assert!(summary.ends_with('…'));
        // 300 servers: as many as fit, then one line for the rest, within 4096 characters.
        let entries: Vec<String> = (0..300)
            .map(|i| format!(r#""server{i:03}": {{"command": "x"}}"#))
            .collect();
        let config = parse(&format!(r#"{{"mcpServers": {{{}}}}}"#, entries.join(",")));
        let listed: Vec<Listed<'_>> = config
            .servers
            .iter()
            .map(|c| Listed {
                config: c,
                instructions: None,
            })
            .collect();
        let text = section(&listed).unwrap();
        let inner = text
            .strip_prefix("<mcp_servers>\n")
            .and_then(|t| t.strip_suffix("\n</mcp_servers>"))
            .unwrap();
        assert!(len(inner) <= MAX_SECTION_CHARS);
        let last = inner.lines().last().unwrap();
        assert!(
            last.starts_with("- … ") && last.ends_with(" more servers; find their tools with searchTools()")
        );
    }
}
