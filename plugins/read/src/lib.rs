//! # toolwright-tool-read
//!
//! pi 1.6.0's `read` tool: a text file by lines with offset and limit, truncated to 2000 lines or 50 KB with
//! pi's continuation notices; an image (detected by its magic bytes) as an attachment, resized to pi's limits.
//!
//! ```
//! use toolwright_sdk::Tool;
//! assert_eq!(toolwright_tool_read::Read.spec().name, "read");
//! ```

mod image;

pub use image::normalize_images;

use serde_json::{Value, json};
use toolwright_sdk::arguments::{self, Unchecked};
use toolwright_sdk::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head};
use toolwright_sdk::{Content, Ctx, Tool, ToolError, ToolResult, ToolSpec, js, paths};
use unicode_normalization::UnicodeNormalization;

/// The `read` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Read;

/// Files up to this size are read with one open.
const SMALL_FILE: u64 = 256 * 1024;

/// The model-visible description.
pub const DESCRIPTION: &str = "Read the contents of a file. Supports text files and images (jpg, png, gif, webp, bmp). Images are sent as attachments. For text files, output is truncated to 2000 lines or 50KB (whichever is hit first). Use offset/limit for large files. When you need the full file, continue with offset until complete.";

impl Tool for Read {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read".into(),
            label: "read".into(),
            description: DESCRIPTION.into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
                    "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
                    "limit": {"type": "number", "description": "Maximum number of lines to read"}
                },
                "required": ["path"]
            }),
            output_schema: Some(json!({
                "anyOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "properties": {
                            "type": {"const": "image", "type": "string"},
                            "data": {"type": "string"},
                            "mimeType": {"type": "string"},
                            "note": {"type": "string"}
                        },
                        "required": ["type", "data", "mimeType", "note"]
                    }
                ]
            })),
            prompt_snippet: Some("Read file contents".into()),
            prompt_guidelines: vec!["Use read to examine files instead of cat or sed.".into()],
            constrained_sampling: Some(json!({"type": "json_schema", "strict": "prefer"})),
            // MCP's hints for clients that decide what to auto-approve (README, "Serving MCP clients").
            annotations: Some(toolwright_sdk::ToolAnnotations::hints(true, false, true, false)),
            ..Default::default()
        }
    }

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        let Args { path, offset, limit } = arguments::destructure(args, "path")?;
        if ctx.is_cancelled() {
            return Err(ToolError::new("Operation aborted"));
        }
        let path = path.path()?;
        let files = ctx.files();
        let home = ctx.home();
        let (absolute, found) = resolve_read_path(path, ctx.cwd(), home.as_deref(), files);
        let metadata = match found {
            Some(metadata) => metadata,
            None => files
                .metadata(&absolute)
                .map_err(|e| ToolError::io(&e, "access", &absolute))?,
        };
        let read_all = || {
            files
                .read(&absolute)
                .map_err(|e| ToolError::io_no_path(&e, "read"))
        };
        // A small file is read once and sniffed from memory; a large one is sniffed from its head first, so an
        // image is not read twice and a huge text file is read once.
        let (head, whole) = if metadata.len <= SMALL_FILE {
            let bytes = read_all()?;
            (None, Some(bytes))
        } else {
            let head = files
                .read_prefix(&absolute, image::SNIFF_BYTES)
                .map_err(|e| ToolError::io_no_path(&e, "read"))?;
            (Some(head), None)
        };
        let sniffed = head.as_deref().or(whole.as_deref()).unwrap_or_default();
        let sniffed = &sniffed[..sniffed.len().min(image::SNIFF_BYTES)];
        let mime = image::detect(sniffed);
        let bytes = match whole {
            Some(bytes) => bytes,
            None => read_all()?,
        };
        let (content, details) = match mime {
            Some(mime) => (image::content(&bytes, mime), None),
            None => {
                let (text, details) = read_text(&String::from_utf8_lossy(&bytes), path, offset, limit)?;
                (vec![Content::text(text)], details)
            }
        };
        if ctx.is_cancelled() {
            return Err(ToolError::new("Operation aborted"));
        }
        let structured = read_output(&content);
        Ok(ToolResult {
            content,
            details,
            structured_content: Some(structured),
            ..Default::default()
        })
    }
}

/// The arguments of `read`, as pi destructures them.
#[derive(serde::Deserialize)]
struct Args {
    #[serde(default)]
    path: Unchecked,
    #[serde(default, deserialize_with = "arguments::lenient")]
    offset: Option<f64>,
    #[serde(default, deserialize_with = "arguments::lenient")]
    limit: Option<f64>,
}

/// pi's `resolveReadPathAsync`: the resolved path, or the first existing variant of it (macOS screenshot
/// names, NFD, curly apostrophes).
/// The metadata comes along when a variant was found, so the caller need not look it up again.
fn resolve_read_path(
    path: &str,
    cwd: &str,
    home: Option<&str>,
    files: &dyn toolwright_sdk::Files,
) -> (String, Option<toolwright_sdk::Metadata>) {
    let resolved = paths::resolve_to_cwd(path, cwd, home);
    if let Ok(metadata) = files.metadata(&resolved) {
        return (resolved, Some(metadata));
    }
    let am_pm = screenshot_variant(&resolved);
    let nfd: String = resolved.nfd().collect();
    let curly = resolved.replace('\'', "\u{2019}");
    let nfd_curly = nfd.replace('\'', "\u{2019}");
    [am_pm, nfd, curly, nfd_curly]
        .into_iter()
        .filter(|v| *v != resolved)
        .find_map(|v| files.metadata(&v).ok().map(|m| (v, Some(m))))
        .unwrap_or((resolved, None))
}

/// ` AM.`/` PM.` (any case) with U+202F before AM/PM, as macOS names screenshots.
fn screenshot_variant(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(i) = rest.find(' ') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let marker = after.get(..3).map(str::to_ascii_uppercase);
        if matches!(marker.as_deref(), Some("AM.") | Some("PM.")) {
            out.push('\u{202F}');
        } else {
            out.push(' ');
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The text path: pi's line selection, truncation and notices.
fn read_text(
    text: &str,
    path: &str,
    offset: Option<f64>,
    limit: Option<f64>,
) -> Result<(String, Option<Value>), ToolError> {
    let lines: Vec<&str> = text.split('\n').collect();
    let total = lines.len() as f64;
    let start_line = match offset {
        Some(o) if o != 0.0 && !o.is_nan() => (o - 1.0).max(0.0),
        _ => 0.0,
    };
    if start_line >= total {
        let shown = offset.map_or_else(|| "undefined".into(), js::number_to_string);
        return Err(ToolError::new(format!(
            "Offset {shown} is beyond end of file ({} lines total)",
            lines.len()
        )));
    }
    let end_line = limit.map(|l| (start_line + l).min(total));
    let (from, to) = js_slice(lines.len(), start_line, end_line);
    let truncation = truncate_head(
        &lines[from..to.max(from)].join("\n"),
        DEFAULT_MAX_LINES,
        DEFAULT_MAX_BYTES,
    );
    let shown_start = js::number_to_string(start_line + 1.0);
    let details = Some(json!({ "truncation": truncation }));
    if truncation.first_line_exceeds_limit {
        let size = format_size(lines[start_line as usize].len());
        let limit_size = format_size(DEFAULT_MAX_BYTES);
        let text = format!(
            "[Line {shown_start} is {size}, exceeds {limit_size} limit. Use bash: sed -n '{shown_start}p' {path} | head -c {DEFAULT_MAX_BYTES}]"
        );
        return Ok((text, details));
    }
    if truncation.truncated {
        let end = start_line + 1.0 + truncation.output_lines as f64 - 1.0;
        let (end_shown, next) = (js::number_to_string(end), js::number_to_string(end + 1.0));
        let limit_note = if truncation.truncated_by == Some("lines") {
            String::new()
        } else {
            format!(" ({} limit)", format_size(DEFAULT_MAX_BYTES))
        };
        let text = format!(
            "{}\n\n[Showing lines {shown_start}-{end_shown} of {}{limit_note}. Use offset={next} to continue.]",
            truncation.content,
            lines.len()
        );
        return Ok((text, details));
    }
    if let Some(end) = end_line {
        let user_limited = end - start_line;
        if start_line + user_limited < total {
            let remaining = js::number_to_string(total - (start_line + user_limited));
            let next = js::number_to_string(start_line + user_limited + 1.0);
            let text = format!(
                "{}\n\n[{remaining} more lines in file. Use offset={next} to continue.]",
                truncation.content
            );
            return Ok((text, None));
        }
    }
    Ok((truncation.content, None))
}

/// The index range of JavaScript's `array.slice(start, end)` on an array of `len` items.
fn js_slice(len: usize, start: f64, end: Option<f64>) -> (usize, usize) {
    let clamp = |x: f64| -> usize {
        let x = x.trunc();
        if x < 0.0 {
            (len as f64 + x).max(0.0) as usize
        } else {
            x.min(len as f64) as usize
        }
    };
    (clamp(start), end.map_or(len, clamp))
}

/// pi's `toReadOutput`: the text, or the image with its note.
fn read_output(content: &[Content]) -> Value {
    let text = content.iter().find_map(Content::as_text).unwrap_or_default();
    match content.iter().find_map(|c| match c {
        Content::Image { data, mime_type } => Some((data, mime_type)),
        _ => None,
    }) {
        Some((data, mime_type)) => {
            json!({"type": "image", "data": data, "mimeType": mime_type, "note": text})
        }
        None => Value::String(text.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_limits() {
        let twelve: String = (1..=12).map(|i| format!("l{i}\n")).collect();
        assert_eq!(read_text(&twelve, "a", Some(13.0), None).unwrap().0, "");
        assert_eq!(
            read_text(&twelve, "a", Some(14.0), None).unwrap_err().message(),
            "Offset 14 is beyond end of file (13 lines total)"
        );
        assert_eq!(
            read_text(&twelve, "a", Some(2.0), Some(2.0)).unwrap().0,
            "l2\nl3\n\n[10 more lines in file. Use offset=4 to continue.]"
        );
        assert_eq!(
            read_text(&twelve, "a", None, Some(0.0)).unwrap().0,
            "\n\n[13 more lines in file. Use offset=1 to continue.]"
        );
        assert_eq!(
            read_text("", "a", Some(2.0), None).unwrap_err().message(),
            "Offset 2 is beyond end of file (1 lines total)"
        );
        assert_eq!(
            read_text("a\nb\nc", "a", None, Some(-1.0)).unwrap().0,
            "a\nb\n\n[4 more lines in file. Use offset=0 to continue.]"
        );
    }

    #[test]
    fn truncation_notices() {
        let many: String = (1..=2500).map(|i| format!("{i}\n")).collect();
        let (text, details) = read_text(&many, "a", None, None).unwrap();
        assert!(text.ends_with("\n\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]"));
        assert_eq!(details.unwrap()["truncation"]["truncatedBy"], "lines");
        let wide = format!("{}\n", "x".repeat(60_000));
        let (text, _) = read_text(&wide, "big.txt", None, None).unwrap();
        assert_eq!(
            text,
            "[Line 1 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '1p' big.txt | head -c 51200]"
        );
    }

    #[test]
    fn screenshot_names() {
        assert_eq!(
            screenshot_variant("/a/Shot 10.00.00 AM.png"),
            "/a/Shot 10.00.00\u{202F}AM.png"
        );
    }
}

toolwright_sdk::export_tool!(Read; capabilities = [
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Read("/".into()), "reads the files the model asks for, wherever the user can"),
]);
