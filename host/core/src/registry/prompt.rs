//! The system prompt's tool sections (pi 1.6.0's `system-prompt.ts`): `tools`, the list of declared tools with a
//! snippet, and `rules`, the guidelines of the declared tools.

use serde::Serialize;

/// pi's normalised snippet: line breaks and runs of whitespace become one space, trimmed; empty means none.
pub fn normalize_snippet(text: Option<&str>) -> Option<String> {
    let text = text?;
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!one_line.is_empty()).then_some(one_line)
}

/// pi's normalised guidelines: each trimmed, empty ones dropped, duplicates removed (first kept).
pub fn normalize_guidelines(guidelines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for guideline in guidelines {
        let trimmed = js_trim(guideline);
        if !trimmed.is_empty() && !out.iter().any(|g| g == trimmed) {
            out.push(trimmed.to_owned());
        }
    }
    out
}

/// JavaScript's `String.prototype.trim`: whitespace and line terminators, as Rust's `trim` (both use Unicode
/// `White_Space` plus the BOM, which Rust's `char::is_whitespace` lacks).
fn js_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

/// The tool sections of the default system prompt, each with its text as pi renders it
/// (`<tools>\n…\n</tools>`), and the parts they were made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptSections {
    /// The `tools` section's content: `- NAME: SNIPPET` lines (or `(none)`), a blank line and
    /// `Additional tools may be available.`
    pub tools: String,
    /// The `rules` section's content: `- RULE` lines.
    pub rules: String,
}

impl PromptSections {
    /// Build the sections from the active names in order, the hidden declarations, and each tool's normalised
    /// snippet and guidelines (`lookup(name) -> (snippet, guidelines)`).
    pub fn build<'a>(
        selected: &[String],
        hidden: &[String],
        lookup: impl Fn(&str) -> (Option<&'a str>, &'a [String]),
    ) -> Self {
        let declared: Vec<&String> = selected.iter().filter(|n| !hidden.contains(n)).collect();
        let lines: Vec<String> = declared
            .iter()
            .filter_map(|name| lookup(name).0.map(|snippet| format!("- {name}: {snippet}")))
            .collect();
        let tools = if lines.is_empty() {
            "(none)".to_owned()
        } else {
            lines.join("\n")
        };
        PromptSections {
            tools: format!("{tools}\n\nAdditional tools may be available."),
            rules: rules(&declared, &lookup),
        }
    }

    /// The two sections as they appear in the prompt, joined with a blank line.
    pub fn render(&self) -> String {
        format!(
            "<tools>\n{}\n</tools>\n\n<rules>\n{}\n</rules>",
            self.tools, self.rules
        )
    }
}

/// pi's `buildRules`.
fn rules<'a>(declared: &[&String], lookup: &impl Fn(&str) -> (Option<&'a str>, &'a [String])) -> String {
    let mut rules: Vec<String> = Vec::new();
    let mut add = |rule: &str| {
        let rule = js_trim(rule);
        if !rule.is_empty() && !rules.iter().any(|r| r == rule) {
            rules.push(rule.to_owned());
        }
    };
    let has = |name: &str| declared.iter().any(|d| d.as_str() == name);
    let (bash, powershell) = (has("bash"), has("powershell"));
    if (bash || powershell) && !has("grep") && !has("find") && !has("ls") {
        add(match (bash, powershell) {
            (true, true) => {
                "Use bash or PowerShell for file operations like listing, searching, and finding files"
            }
            (false, true) => "Use PowerShell for file operations like listing, searching, and finding files",
            _ => "Use bash for file operations like ls, rg, find",
        });
    }
    for name in declared {
        for rule in lookup(name).1 {
            add(rule);
        }
    }
    add("Be concise in your responses");
    add("Show file paths clearly when working with files");
    rules
        .iter()
        .map(|r| format!("- {r}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_and_guidelines_are_normalised_as_pi_does() {
        assert_eq!(
            normalize_snippet(Some("  Read\r\n  file\tcontents ")),
            Some("Read file contents".into())
        );
        assert_eq!(normalize_snippet(Some(" \n ")), None);
        assert_eq!(
            normalize_guidelines(&[" a ".into(), "".into(), "a".into(), "b".into()]),
            ["a", "b"]
        );
    }

    #[test]
    fn bash_alone_gets_the_file_operations_rule_and_no_tools_give_none() {
        let guidelines = vec!["Use bash well.".to_owned()];
        let sections = PromptSections::build(&["bash".into(), "echo".into()], &[], |name| match name {
            "bash" => (Some("Execute bash commands"), guidelines.as_slice()),
            _ => (None, &[]),
        });
        assert_eq!(
            sections.render(),
            "<tools>\n- bash: Execute bash commands\n\nAdditional tools may be available.\n</tools>\n\n<rules>\n\
             - Use bash for file operations like ls, rg, find\n- Use bash well.\n- Be concise in your responses\n\
             - Show file paths clearly when working with files\n</rules>"
        );
        let hidden = PromptSections::build(&["bash".into()], &["bash".into()], |_| (Some("x"), &[]));
        assert_eq!(hidden.tools, "(none)\n\nAdditional tools may be available.");
    }
}
