//! pi's names for MCP servers' tools: `mcp__<server>__<tool>`, every character outside `[A-Za-z0-9_]` made `_`,
//! at most 64 characters; a name that is too long, or that another tool also sanitizes to, gets `_` and the
//! first 8 hex digits of `sha256(server NUL tool)` (pi-mcp's `naming.js`).

use sha2::{Digest, Sha256};

/// The longest tool name pi gives an MCP tool.
pub const MAX_TOOL_NAME_LENGTH: usize = 64;

/// `mcp__<server>__<tool>` as pi names it; `is_taken` says whether a candidate name belongs to another tool.
pub fn tool_name(server: &str, tool: &str, is_taken: impl Fn(&str) -> bool) -> String {
    let name = sanitize(&format!("mcp__{server}__{tool}"));
    if name.chars().count() <= MAX_TOOL_NAME_LENGTH && !is_taken(&name) {
        return name;
    }
    let mut hasher = Sha256::new();
    hasher.update(server.as_bytes());
    hasher.update([0u8]);
    hasher.update(tool.as_bytes());
    let hash: String = hasher.finalize()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let head: String = name.chars().take(MAX_TOOL_NAME_LENGTH - hash.len() - 1).collect();
    format!("{head}_{hash}")
}

/// The namespace of a server's tools in codemode and the prompt: `mcp__<server>` with `-` made `_`.
pub fn namespace(server: &str) -> String {
    format!("mcp__{}", server.replace('-', "_"))
}

/// Server names in the order pi's `localeCompare` gives them (case-insensitive first, lower case before upper,
/// `_` before `-`), close enough for names of letters, digits, `_` and `-`.
pub fn locale_order(a: &str, b: &str) -> std::cmp::Ordering {
    let key = |s: &str| {
        s.chars()
            .map(|c| match c {
                '_' => (0u8, 0u32, 0u8),
                '-' => (0, 1, 0),
                c if c.is_ascii_digit() => (1, c as u32, 0),
                c => (2, c.to_ascii_lowercase() as u32, u8::from(c.is_ascii_uppercase())),
            })
            .collect::<Vec<_>>()
    };
    let (ka, kb) = (key(a), key(b));
    let primary = |k: &Vec<(u8, u32, u8)>| k.iter().map(|(g, c, _)| (*g, *c)).collect::<Vec<_>>();
    primary(&ka).cmp(&primary(&kb)).then_with(|| ka.cmp(&kb))
}

/// A server's summary in the prompt (pi's `mcpServerSummary`): the first line of its configured description, else
/// of its instructions, trimmed.
pub fn server_summary(description: Option<&str>, instructions: Option<&str>) -> String {
    let description = description.map(str::trim).filter(|d| !d.is_empty());
    let text = description.or(instructions.map(str::trim)).unwrap_or_default();
    text.split('\n').next().unwrap_or_default().trim().to_owned()
}

/// Each character outside `[A-Za-z0-9_]` made `_` (one per UTF-16 unit, as JavaScript's regex replaces).
fn sanitize(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            let keep = c.is_ascii_alphanumeric() || c == '_';
            let units = if keep { 1 } else { c.len_utf16() };
            std::iter::repeat_n(if keep { c } else { '_' }, units)
        })
        .collect()
}

/// The names of one listing of a server's tools, as pi registers them: a name two distinct tools of the
/// listing sanitize to is taken for both (each gets its hash), as is one `owned_elsewhere` says belongs to
/// another tool.
pub fn listing_names(
    server: &str,
    tools: &[&str],
    owned_elsewhere: impl Fn(&str, &str) -> bool,
) -> Vec<String> {
    let plain: Vec<String> = tools.iter().map(|t| tool_name(server, t, |_| false)).collect();
    let mut assigned: Vec<String> = Vec::with_capacity(tools.len());
    for tool in tools {
        let name = tool_name(server, tool, |candidate| {
            owned_elsewhere(candidate, tool)
                || assigned.iter().any(|a| a == candidate)
                || plain.iter().filter(|p| *p == candidate).count() > 1
        });
        assigned.push(name);
    }
    assigned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_pi_as_recorded_from_pi_1_6_0() {
        assert_eq!(
            tool_name("probe", "get.thing", |_| false),
            "mcp__probe__get_thing"
        );
        assert_eq!(
            tool_name("docs-srv", "search", |_| false),
            "mcp__docs_srv__search"
        );
        assert_eq!(namespace("docs-srv"), "mcp__docs_srv");
        // Two tools that sanitize alike both get their hash.
        assert_eq!(
            listing_names("probe", &["a-b", "a_b", "echo"], |_, _| false),
            vec![
                "mcp__probe__a_b_43521d30",
                "mcp__probe__a_b_5a817e78",
                "mcp__probe__echo"
            ]
        );
        // Too long: 55 characters, `_` and the hash.
        let long = "x".repeat(70);
        let name = tool_name("probe", &long, |_| false);
        assert_eq!(name, format!("mcp__probe__{}_a3369019", "x".repeat(43)));
        assert_eq!(name.len(), MAX_TOOL_NAME_LENGTH);
    }
}
