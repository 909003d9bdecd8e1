//! # toolwright-tool-find
//!
//! pi 1.6.0's `find` tool, with ripgrep's walker and globset in place of the `fd` binary pi runs: hidden files
//! included, `.gitignore` honoured everywhere (`--no-require-git` outside repositories), `.ignore` and
//! `.fdignore` too; a pattern without `/` matches file names at any depth with smart case, a pattern with `/` is
//! anchored at the search path; directories end with `/`.
//!
//! ```
//! use toolwright_sdk::Tool;
//! assert_eq!(toolwright_tool_find::Find.spec().name, "find");
//! ```

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;
use serde_json::{Value, json};
use toolwright_sdk::arguments::{self, Unchecked};
use toolwright_sdk::truncate::{DEFAULT_MAX_BYTES, Notices, truncate_head};
use toolwright_sdk::{Access, Ctx, Tool, ToolError, ToolResult, ToolSpec, paths};

/// The `find` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Find;

const DEFAULT_LIMIT: f64 = 1000.0;

/// The arguments of `find`, as pi destructures them.
#[derive(serde::Deserialize)]
struct Args {
    #[serde(default)]
    pattern: Unchecked,
    #[serde(default)]
    path: Unchecked,
    #[serde(default, deserialize_with = "arguments::lenient")]
    limit: Option<f64>,
}

impl Tool for Find {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "find".into(),
            label: "find".into(),
            description: "Search for files by glob pattern. Returns matching file paths relative to the search directory. Respects .gitignore. Output is truncated to 1000 results or 50KB (whichever is hit first).".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern relative to the search directory, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"},
                    "path": {"type": "string", "description": "Directory to search in (default: current directory)"},
                    "limit": {"type": "number", "description": "Maximum number of results (default: 1000)"}
                },
                "required": ["pattern"]
            }),
            prompt_snippet: Some("Find files by glob pattern (respects .gitignore)".into()),
            // MCP's hints for clients that decide what to auto-approve (README, "Serving MCP clients").
            annotations: Some(toolwright_sdk::ToolAnnotations::hints(true, false, true, false)),
            ..Default::default()
        }
    }

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        let Args { pattern, path, limit } = arguments::destructure(args, "pattern")?;
        if ctx.is_cancelled() {
            return Err(ToolError::new("Operation aborted"));
        }
        let dir_arg = path.optional_path()?.unwrap_or(".");
        let search_path = paths::resolve_to_cwd(dir_arg, ctx.cwd(), ctx.home().as_deref());
        let limit = limit.unwrap_or(DEFAULT_LIMIT).floor().max(1.0);
        // pi calls `pattern.replace(…)` before fd runs.
        let mut pattern = pattern.receiver("effectivePattern")?;
        while let Some(rest) = pattern.strip_prefix("./") {
            pattern = rest;
        }
        let files = ctx.files();
        match files.metadata(&search_path) {
            Ok(meta) if meta.is_dir() => {}
            Err(e) if e.get_ref().is_some() => return Err(ToolError::new(e.to_string())),
            _ => {
                return Err(ToolError::new(format!(
                    "[fd error]: Search path '{search_path}' is not a directory.\n[fd error]: No valid search paths given."
                )));
            }
        }
        let root = files
            .check(&search_path, Access::Read)
            .map_err(|e| ToolError::new(e.to_string()))?;
        let matcher = Matcher::new(pattern, &root)?;
        let in_git_repo = {
            let mut dir = root.as_str();
            loop {
                if files.metadata(&paths::join(dir, ".git")).is_ok() {
                    break true;
                }
                if dir == "/" {
                    break false;
                }
                dir = paths::parent(dir);
            }
        };
        let mut walk = WalkBuilder::new(&root);
        walk.hidden(false)
            .require_git(in_git_repo)
            .follow_links(false)
            .add_custom_ignore_filename(".fdignore")
            .sort_by_file_name(|a, b| a.cmp(b));
        let mut stored = Vec::new();
        let (mut count, mut output_bytes) = (0f64, 0usize);
        let mut limit_reached = false;
        for entry in walk.build() {
            if ctx.is_cancelled() {
                return Err(ToolError::new("Operation aborted"));
            }
            let Ok(entry) = entry else { continue };
            if entry.depth() == 0 {
                continue;
            }
            let path = entry.path().to_string_lossy();
            if !matcher.matches(&path) {
                continue;
            }
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            let mut result = paths::relative(&root, &path);
            if is_dir {
                result.push('/');
            }
            if count == limit {
                limit_reached = true;
                break;
            }
            count += 1.0;
            if output_bytes as i64 - 1 <= DEFAULT_MAX_BYTES as i64 {
                stored.push(result.clone());
            }
            output_bytes += result.len() + 1;
        }
        if count == 0.0 {
            return Ok(ToolResult::text("No files found matching pattern"));
        }
        let mut truncation = truncate_head(&stored.join("\n"), usize::MAX, DEFAULT_MAX_BYTES);
        truncation.total_lines = count as usize;
        truncation.total_bytes = output_bytes.saturating_sub(1);
        let mut notices = Notices::new();
        if limit_reached {
            notices.limit(limit, "results", ", or refine pattern", "resultLimitReached");
        }
        notices.bytes(&truncation);
        Ok(notices.finish(truncation.content))
    }
}

/// fd's glob matching as pi drives it.
enum Matcher {
    /// Against the file name, with smart case.
    Name(GlobMatcher),
    /// Against the full path, the pattern anchored at the search path.
    FullPath(GlobMatcher),
}

impl Matcher {
    fn new(pattern: &str, root: &str) -> Result<Self, ToolError> {
        let build = |glob: &str, case_insensitive: bool| {
            GlobBuilder::new(glob)
                .case_insensitive(case_insensitive)
                .literal_separator(true)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|e| ToolError::new(format!("[fd error]: {e}")))
        };
        let lowercase = pattern == pattern.to_lowercase();
        if !pattern.contains('/') {
            return Ok(Matcher::Name(build(pattern, lowercase)?));
        }
        if pattern.starts_with('/') {
            return Ok(Matcher::FullPath(build(pattern, false)?));
        }
        let escaped: String = root
            .trim_end_matches('/')
            .chars()
            .flat_map(|c| {
                if "\\*?[]{}".contains(c) {
                    vec!['\\', c]
                } else {
                    vec![c]
                }
            })
            .collect();
        Ok(Matcher::FullPath(build(
            &format!("{escaped}/{pattern}"),
            lowercase,
        )?))
    }

    fn matches(&self, path: &str) -> bool {
        match self {
            Matcher::Name(g) => g.is_match(paths::base_name(path)),
            Matcher::FullPath(g) => g.is_match(path),
        }
    }
}

toolwright_sdk::export_tool!(Find; capabilities = [
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Read("/".into()), "searches the directories the model asks for, wherever the user can"),
]);
