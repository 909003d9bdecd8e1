//! # toolwright-tool-grep
//!
//! pi 1.6.0's `grep` tool, with ripgrep's own libraries in place of the `rg` binary pi runs: the same regex
//! engine, the same ignore rules (`.gitignore` inside git repositories, `.ignore` and `.rgignore` everywhere,
//! hidden files searched), the same `--glob` overrides and binary detection, and pi's output format, limits and
//! notices.
//!
//! ```
//! use toolwright_sdk::Tool;
//! assert_eq!(toolwright_tool_grep::Grep.spec().name, "grep");
//! ```

use std::path::Path;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use serde_json::{Value, json};
use toolwright_sdk::arguments::{self, Unchecked};
use toolwright_sdk::truncate::{
    DEFAULT_MAX_BYTES, GREP_MAX_LINE_LENGTH, Notices, truncate_head, truncate_line,
};
use toolwright_sdk::{Access, Ctx, Tool, ToolError, ToolResult, ToolSpec, paths};

/// The `grep` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grep;

const DEFAULT_LIMIT: f64 = 100.0;

/// The arguments of `grep`, as pi destructures them.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    #[serde(default)]
    pattern: Unchecked,
    #[serde(default)]
    path: Unchecked,
    #[serde(default, deserialize_with = "arguments::lenient")]
    glob: Option<String>,
    #[serde(default, deserialize_with = "arguments::lenient")]
    ignore_case: Option<bool>,
    #[serde(default, deserialize_with = "arguments::lenient")]
    literal: Option<bool>,
    #[serde(default, deserialize_with = "arguments::lenient")]
    context: Option<f64>,
    #[serde(default, deserialize_with = "arguments::lenient")]
    limit: Option<f64>,
}

impl Tool for Grep {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "grep".into(),
            label: "grep".into(),
            description: "Search file contents for a pattern. Returns matching lines with file paths and line numbers. Respects .gitignore. Output is truncated to 100 matches or 50KB (whichever is hit first). Long lines are truncated to 500 chars.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
                    "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
                    "glob": {"type": "string", "description": "Filter files by glob pattern relative to path, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"},
                    "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
                    "literal": {"type": "boolean", "description": "Treat pattern as literal string instead of regex (default: false)"},
                    "context": {"type": "number", "description": "Number of lines to show before and after each match (default: 0)"},
                    "limit": {"type": "number", "description": "Maximum number of matches to return (default: 100)"}
                },
                "required": ["pattern"]
            }),
            prompt_snippet: Some("Search file contents for patterns (respects .gitignore)".into()),
            // MCP's hints for clients that decide what to auto-approve (README, "Serving MCP clients").
            annotations: Some(toolwright_sdk::ToolAnnotations::hints(true, false, true, false)),
            ..Default::default()
        }
    }

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        let Args {
            pattern,
            path,
            glob,
            ignore_case,
            literal,
            context,
            limit,
        } = arguments::object("grep", args, "pattern")?;
        if ctx.is_cancelled() {
            return Err(ToolError::new("Operation aborted"));
        }
        // pi hands `String(pattern)` to rg: a missing pattern searches for "undefined", never for everything.
        let pattern = &pattern.string();
        let dir_arg = path.optional_path()?.unwrap_or(".");
        let search_path = paths::resolve_to_cwd(dir_arg, ctx.cwd(), ctx.home().as_deref());
        let meta = ctx
            .files()
            .metadata(&search_path)
            .map_err(|e| match e.get_ref() {
                Some(_) => ToolError::new(e.to_string()),
                None => ToolError::new(format!("Path not found: {search_path}")),
            })?;
        let root = ctx
            .files()
            .check(&search_path, Access::Read)
            .map_err(|e| ToolError::new(e.to_string()))?;
        let context = match context {
            Some(c) if c > 0.0 => c.floor().min(9_007_199_254_740_991.0) as u64,
            _ => 0,
        };
        let limit = limit.unwrap_or(DEFAULT_LIMIT).floor().max(1.0);
        let options = Search {
            pattern,
            ignore_case: ignore_case.unwrap_or(false),
            literal: literal.unwrap_or(false),
            glob: glob.as_deref().map(strip_dot_slash),
            context,
            limit,
        };
        let collected = search(ctx, Path::new(&root), meta.is_dir(), &options)?;
        Ok(render(collected, limit))
    }
}

/// The glob without leading `./` segments (after an optional `!`), as pi passes it to rg.
fn strip_dot_slash(glob: &str) -> String {
    let (bang, rest) = glob.strip_prefix('!').map_or(("", glob), |r| ("!", r));
    let mut rest = rest;
    while let Some(r) = rest.strip_prefix("./") {
        rest = r;
    }
    format!("{bang}{rest}")
}

struct Search<'a> {
    pattern: &'a str,
    ignore_case: bool,
    literal: bool,
    glob: Option<String>,
    context: u64,
    limit: f64,
}

/// pi's line collection: every line until the limit, then the rest of the last match's trailing context.
#[derive(Default)]
struct Collected {
    lines: Vec<String>,
    output_bytes: usize,
    line_count: usize,
    match_count: f64,
    limit_hit: bool,
    trailing_end: u64,
    last_file: String,
    match_limit_reached: bool,
    lines_truncated: bool,
    done: bool,
}

impl Collected {
    fn push(&mut self, file: &str, number: u64, text: &[u8], is_match: bool) {
        self.last_file = file.to_owned();
        let text = String::from_utf8_lossy(text);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        let text = text.strip_suffix('\r').unwrap_or(text);
        let (text, cut) = truncate_line(text, GREP_MAX_LINE_LENGTH);
        self.lines_truncated |= cut;
        let line = if is_match {
            format!("{file}:{number}: {text}")
        } else {
            format!("{file}-{number}- {text}")
        };
        if self.output_bytes as i64 - 1 <= DEFAULT_MAX_BYTES as i64 {
            self.output_bytes += line.len() + 1;
            self.lines.push(line);
        } else {
            self.output_bytes += line.len() + 1;
        }
        self.line_count += 1;
    }

    /// One line of rg's output; false when the search should stop.
    fn line(
        &mut self,
        file: &str,
        number: u64,
        text: &[u8],
        is_match: bool,
        limit: f64,
        context: u64,
    ) -> bool {
        if !self.limit_hit {
            self.push(file, number, text, is_match);
            if is_match {
                self.match_count += 1.0;
                if self.match_count >= limit {
                    self.limit_hit = true;
                    self.trailing_end = number + context;
                }
            }
            return true;
        }
        let in_window = file == self.last_file && number <= self.trailing_end;
        if in_window {
            self.push(file, number, text, false);
        }
        if is_match {
            self.match_limit_reached = true;
        }
        if self.match_limit_reached && !(in_window && number < self.trailing_end) {
            self.done = true;
        }
        !self.done
    }
}

struct FileSink<'a> {
    collected: &'a mut Collected,
    file: &'a str,
    limit: f64,
    context: u64,
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _s: &grep_searcher::Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let first = m.line_number().unwrap_or(0);
        for (number, line) in (first..).zip(m.lines()) {
            if !self
                .collected
                .line(self.file, number, line, true, self.limit, self.context)
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn context(&mut self, _s: &grep_searcher::Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        let number = c.line_number().unwrap_or(0);
        Ok(self
            .collected
            .line(self.file, number, c.bytes(), false, self.limit, self.context))
    }
}

fn search(ctx: &dyn Ctx, root: &Path, is_dir: bool, o: &Search<'_>) -> Result<Collected, ToolError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(o.ignore_case)
        .fixed_strings(o.literal)
        .line_terminator(Some(b'\n'))
        .build(o.pattern)
        .map_err(|e| ToolError::new(format!("rg: {e}")))?;
    let binary = if is_dir {
        BinaryDetection::quit(b'\x00')
    } else {
        BinaryDetection::convert(b'\x00')
    };
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .before_context(o.context as usize)
        .after_context(o.context as usize)
        .binary_detection(binary)
        .build();
    let mut walk = WalkBuilder::new(root);
    walk.hidden(false)
        .follow_links(false)
        .add_custom_ignore_filename(".rgignore")
        .sort_by_file_name(|a, b| a.cmp(b));
    if let Some(glob) = &o.glob {
        let mut overrides = OverrideBuilder::new(root);
        overrides
            .add(glob)
            .map_err(|e| ToolError::new(format!("rg: {e}")))?;
        walk.overrides(
            overrides
                .build()
                .map_err(|e| ToolError::new(format!("rg: {e}")))?,
        );
    }
    let mut collected = Collected::default();
    let mut errors = Vec::new();
    for entry in walk.build() {
        if ctx.is_cancelled() {
            return Err(ToolError::new("Operation aborted"));
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                errors.push(format!("rg: {e}"));
                continue;
            }
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        let shown = if is_dir {
            path.strip_prefix(root).map_or_else(
                |_| path.display().to_string(),
                |p| p.to_string_lossy().into_owned(),
            )
        } else {
            paths::base_name(&path.to_string_lossy()).to_owned()
        };
        let mut sink = FileSink {
            collected: &mut collected,
            file: &shown,
            limit: o.limit,
            context: o.context,
        };
        if let Err(e) = searcher.search_path(&matcher, path, &mut sink) {
            errors.push(format!("rg: {}: {e}", shown));
        }
        if collected.done {
            return Ok(collected);
        }
    }
    if !errors.is_empty() {
        return Err(ToolError::new(errors.join("\n")));
    }
    Ok(collected)
}

/// pi's result: the lines, truncated to 50 KB, with the notices.
fn render(c: Collected, limit: f64) -> ToolResult {
    if c.match_count == 0.0 {
        return ToolResult::text("No matches found");
    }
    let mut truncation = truncate_head(&c.lines.join("\n"), usize::MAX, DEFAULT_MAX_BYTES);
    truncation.total_lines = c.line_count;
    truncation.total_bytes = c.output_bytes.saturating_sub(1);
    let mut notices = Notices::new();
    if c.match_limit_reached {
        notices.limit(limit, "matches", ", or refine pattern", "matchLimitReached");
    }
    notices.bytes(&truncation);
    if c.lines_truncated {
        let text =
            format!("Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines");
        notices.push(text, "linesTruncated", json!(true));
    }
    notices.finish(truncation.content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_lose_leading_dot_slash() {
        assert_eq!(strip_dot_slash("./sub/*.txt"), "sub/*.txt");
        assert_eq!(strip_dot_slash("!././x"), "!x");
    }

    #[test]
    fn limit_keeps_the_trailing_context_of_the_last_match() {
        let mut c = Collected::default();
        let lines: [(u64, &[u8], bool); 4] = [
            (1, b"m1\n", true),
            (2, b"ctx\n", false),
            (3, b"m2\n", true),
            (4, b"m3\n", true),
        ];
        for (n, text, is_match) in lines {
            if !c.line("a.txt", n, text, is_match, 1.0, 1) {
                break;
            }
        }
        let result = render(c, 1.0);
        assert_eq!(
            result.text_content(),
            "a.txt:1: m1\na.txt-2- ctx\n\n[1 matches limit reached. Use limit=2 for more, or refine pattern]"
        );
        assert_eq!(result.details, Some(json!({"matchLimitReached": 1})));
    }
}

toolwright_sdk::export_tool!(Grep; capabilities = [
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Read("/".into()), "searches the directories the model asks for, wherever the user can"),
]);
