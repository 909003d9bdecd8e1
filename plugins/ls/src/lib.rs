//! # toolwright-tool-ls
//!
//! pi 1.6.0's `ls` tool: a directory's entries (dotfiles included) sorted as JavaScript's `localeCompare` sorts
//! their lower-cased names (ICU root collation), directories with a `/` suffix, at most `limit` entries.
//!
//! ```
//! use toolwright_sdk::Tool;
//! assert_eq!(toolwright_tool_ls::Ls.spec().name, "ls");
//! ```

use std::cmp::Ordering;

#[cfg(feature = "icu")]
use icu_collator::options::CollatorOptions;
#[cfg(feature = "icu")]
use icu_collator::{Collator, CollatorBorrowed};
use serde_json::{Value, json};
use toolwright_sdk::arguments::{self, Unchecked};
use toolwright_sdk::truncate::{DEFAULT_MAX_BYTES, Notices, truncate_head};
use toolwright_sdk::{Ctx, Tool, ToolError, ToolResult, ToolSpec, paths};

/// The `ls` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ls;

const DEFAULT_LIMIT: f64 = 500.0;

/// The arguments of `ls`, as pi destructures them.
#[derive(serde::Deserialize)]
struct Args {
    #[serde(default)]
    path: Unchecked,
    #[serde(default, deserialize_with = "arguments::lenient")]
    limit: Option<f64>,
}

impl Tool for Ls {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ls".into(),
            label: "ls".into(),
            description: "List directory contents. Returns entries sorted alphabetically, with '/' suffix for directories. Includes dotfiles. Output is truncated to 500 entries or 50KB (whichever is hit first).".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory to list (default: current directory)"},
                    "limit": {"type": "number", "description": "Maximum number of entries to return (default: 500)"}
                }
            }),
            prompt_snippet: Some("List directory contents".into()),
            // MCP's hints for clients that decide what to auto-approve (README, "Serving MCP clients").
            annotations: Some(toolwright_sdk::ToolAnnotations::hints(true, false, true, false)),
            ..Default::default()
        }
    }

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        let Args { path, limit } = arguments::object("ls", args, "path")?;
        if ctx.is_cancelled() {
            return Err(ToolError::new("Operation aborted"));
        }
        let path = path.optional_path()?.unwrap_or(".");
        let dir = paths::resolve_to_cwd(path, ctx.cwd(), ctx.home().as_deref());
        let limit = limit.unwrap_or(DEFAULT_LIMIT).floor().max(1.0);
        let files = ctx.files();
        let meta = files.metadata(&dir).map_err(|e| match e.get_ref() {
            Some(_) => ToolError::new(e.to_string()),
            None => ToolError::new(format!("Path not found: {dir}")),
        })?;
        if !meta.is_dir() {
            return Err(ToolError::new(format!("Not a directory: {dir}")));
        }
        let mut entries = files.read_dir(&dir).map_err(|e| {
            let text = e.get_ref().map_or_else(
                || ToolError::io(&e, "scandir", &dir).message().to_owned(),
                |_| e.to_string(),
            );
            ToolError::new(format!("Cannot read directory: {text}"))
        })?;
        let collator = root_collator();
        entries.sort_by(|a, b| compare(collator.as_ref(), &a.to_lowercase(), &b.to_lowercase()));
        let mut results = Vec::new();
        let mut limit_reached = false;
        for entry in entries {
            if results.len() as f64 >= limit {
                limit_reached = true;
                break;
            }
            // Entries that cannot be stat'ed (dangling symlinks) are skipped, as in pi.
            let Ok(meta) = files.metadata(&paths::join(&dir, &entry)) else {
                continue;
            };
            results.push(if meta.is_dir() { format!("{entry}/") } else { entry });
        }
        if results.is_empty() {
            return Ok(ToolResult::text("(empty directory)"));
        }
        let truncation = truncate_head(&results.join("\n"), usize::MAX, DEFAULT_MAX_BYTES);
        let mut notices = Notices::new();
        if limit_reached {
            notices.limit(limit, "entries", "", "entryLimitReached");
        }
        notices.bytes(&truncation);
        Ok(notices.finish(truncation.content))
    }
}

/// ICU's root collation, as `localeCompare` uses it; `None` if its data failed to load.
#[cfg(feature = "icu")]
fn root_collator() -> Option<CollatorBorrowed<'static>> {
    Collator::try_new(Default::default(), CollatorOptions::default()).ok()
}

#[cfg(feature = "icu")]
fn compare(collator: Option<&CollatorBorrowed<'static>>, a: &str, b: &str) -> Ordering {
    match collator {
        Some(c) => c.compare(a, b),
        None => a.cmp(b),
    }
}

/// Built without ICU: no collator.
#[cfg(not(feature = "icu"))]
fn root_collator() -> Option<()> {
    None
}

/// Built without ICU: code point order.
#[cfg(not(feature = "icu"))]
fn compare(_collator: Option<&()>, a: &str, b: &str) -> Ordering {
    a.cmp(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "icu")]
    fn sorts_like_locale_compare() {
        let mut names = vec![
            "f.txt", "éclair", "ab", "a b", "9.txt", "10.txt", "-dash", "_under",
        ];
        let collator = root_collator();
        names.sort_by(|a, b| compare(collator.as_ref(), &a.to_lowercase(), &b.to_lowercase()));
        assert_eq!(
            names,
            [
                "_under", "-dash", "10.txt", "9.txt", "a b", "ab", "éclair", "f.txt"
            ]
        );
    }
}

toolwright_sdk::export_tool!(Ls; capabilities = [
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Read("/".into()), "searches the directories the model asks for, wherever the user can"),
]);
