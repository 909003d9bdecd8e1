//! An MCP server's results as the model sees them, with pi 1.6.0's texts: content blocks one by one (audio,
//! resource links, embedded and binary resources, unknown blocks as pi words them), `structuredContent` shown
//! only when there is no content, an error without text named, and text over 20 KiB with its middle removed and
//! the whole of it in a file.

use serde_json::{Map, Value, json};
use toolwright_core::model_view::{self, save};
use toolwright_sdk::truncate::format_size;
use toolwright_sdk::{Content, ToolResult};

/// pi's bound on the text of one result, in bytes.
pub const MAX_OUTPUT_BYTES: usize = 20 * 1024;

/// Where a result came from, for its texts.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// The server's configured name.
    pub server: &'a str,
    /// The tool's name as the server gave it (or the resource tool's).
    pub tool: &'a str,
    /// Whether the server's resources can be read with `read_mcp_resource` (a resource link says so).
    pub reads_resources: bool,
}

/// A `tools/call` result as the model sees it; its `structuredContent` is the server's result without `_meta`
/// (what a codemode script gets).
pub fn tool_result(raw: Value, source: Source<'_>) -> ToolResult {
    let mut raw = match raw {
        Value::Object(o) => o,
        _ => Map::new(),
    };
    raw.remove("_meta");
    if !raw.contains_key("content") {
        raw.insert("content".into(), Value::Array(Vec::new()));
    }
    let is_error = raw.get("isError").and_then(Value::as_bool) == Some(true);
    let blocks = raw
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut content: Vec<Content> = blocks.iter().map(|b| block(b, source)).collect();
    if blocks.is_empty()
        && let Some(structured) = raw.get("structuredContent")
    {
        content.push(Content::text(
            serde_json::to_string_pretty(structured).unwrap_or_default(),
        ));
    }
    if is_error && joined_text(&content).is_empty() {
        content.push(Content::text(format!(
            "MCP tool {}/{} returned an error",
            source.server, source.tool
        )));
    }
    let mut details = json!({ "server": source.server, "tool": source.tool });
    let content = limit(content, &mut details);
    ToolResult {
        content,
        details: Some(details),
        structured_content: Some(Value::Object(raw)),
        is_error: is_error.then_some(true),
        ..Default::default()
    }
}

/// Text already made (a resource listing, a resource read), through pi's 20 KiB bound.
pub fn limited(content: Vec<Content>, details: &mut Value) -> Vec<Content> {
    limit(content, details)
}

fn joined_text(content: &[Content]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One content block.
fn block(b: &Value, source: Source<'_>) -> Content {
    let text = |key: &str| b.get(key).and_then(Value::as_str);
    match text("type") {
        Some("text") => Content::text(text("text").unwrap_or_default()),
        Some("image") => Content::Image {
            data: text("data").unwrap_or_default().to_owned(),
            mime_type: text("mimeType").unwrap_or_default().to_owned(),
        },
        Some("audio") => Content::text(model_view::audio(text("mimeType"))),
        Some("resource_link") => Content::text(resource_link(b, source)),
        Some("resource") => model_view::embedded(b.get("resource").unwrap_or(&Value::Null)),
        Some(other) => Content::text(format!("[unsupported MCP content {other}]")),
        None => Content::text(format!(
            "[unsupported MCP content {}]",
            b.get("type").map_or("undefined".to_owned(), Value::to_string)
        )),
    }
}

fn resource_link(b: &Value, source: Source<'_>) -> String {
    let text = |key: &str| b.get(key).and_then(Value::as_str);
    let uri = text("uri").unwrap_or_default();
    let title = text("title").or(text("name")).unwrap_or("undefined");
    let mut details: Vec<String> = Vec::new();
    if let Some(mime) = text("mimeType").filter(|m| !m.is_empty()) {
        details.push(mime.to_owned());
    }
    if let Some(size) = b.get("size").and_then(Value::as_u64) {
        details.push(format_size(size as usize));
    }
    let details = if details.is_empty() {
        String::new()
    } else {
        format!(" ({})", details.join(", "))
    };
    let description = text("description")
        .filter(|d| !d.is_empty())
        .map(|d| format!(": {d}"))
        .unwrap_or_default();
    let read = if source.reads_resources {
        format!(". Read it with read_mcp_resource (server \"{}\")", source.server)
    } else {
        String::new()
    };
    format!("[Resource {uri} \"{title}\"{details}{description}{read}]")
}

/// pi's 20 KiB bound: past it, the text blocks become one text with the middle removed (the whole text saved to
/// a file named in it and in `details.fullOutputPath`), followed by the images.
fn limit(content: Vec<Content>, details: &mut Value) -> Vec<Content> {
    let combined = joined_text(&content);
    let total = combined.len();
    if total <= MAX_OUTPUT_BYTES {
        return content;
    }
    let half = MAX_OUTPUT_BYTES / 2;
    let mut head_end = half;
    while !combined.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = total - half;
    while !combined.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let removed = combined[head_end..tail_start].chars().count();
    let lines = combined.split('\n').count() - usize::from(combined.ends_with('\n'));
    let where_ = match save(combined.as_bytes(), ".txt") {
        Ok(path) => {
            details["fullOutputPath"] = Value::String(path.display().to_string());
            format!(
                "\n\n[Full output: {} (read it with offset/limit)]",
                path.display()
            )
        }
        Err(e) => format!("\n\n[Could not save the full output: {e}]"),
    };
    let text = format!(
        "Warning: truncated output (original token count: {})\nTotal output lines: {lines}\n\n{}…{removed} chars \
         truncated…{}{where_}",
        total.div_ceil(4),
        &combined[..head_end],
        &combined[tail_start..],
    );
    let mut limited = vec![Content::text(text)];
    limited.extend(content.into_iter().filter(|c| matches!(c, Content::Image { .. })));
    limited
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: Source<'static> = Source {
        server: "docs-srv",
        tool: "err",
        reads_resources: true,
    };

    fn texts(result: &ToolResult) -> Vec<String> {
        result
            .content
            .iter()
            .map(|c| match c {
                Content::Text { text } => text.clone(),
                Content::Image { mime_type, .. } => format!("<image {mime_type}>"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn blocks_read_as_pi_shows_them() {
        // Each text as pi 1.6.0 printed it for the same block (docs/brief of the oracle runs).
        let raw = json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///r/one.txt", "name": "one", "title": "One",
             "mimeType": "text/plain", "size": 2048, "description": "the first"},
            {"type": "resource_link", "uri": "file:///r/two", "name": "two"},
            {"type": "resource", "resource": {"uri": "file:///r/t.txt", "text": "embedded"}},
            {"type": "resource", "resource": {"uri": "file:///r/j", "mimeType": "application/json",
             "blob": "eyJhIjoxfQ=="}},
            {"type": "image", "data": "iVBOR", "mimeType": "image/png"},
            {"type": "weird"}
        ], "_meta": {"x": 1}});
        let result = tool_result(raw, SOURCE);
        assert_eq!(
            texts(&result),
            [
                "one",
                "[audio audio/wav omitted]",
                "[Resource file:///r/one.txt \"One\" (text/plain, 2.0KB): the first. Read it with read_mcp_resource \
                 (server \"docs-srv\")]",
                "[Resource file:///r/two \"two\". Read it with read_mcp_resource (server \"docs-srv\")]",
                "embedded",
                "{\"a\":1}",
                "<image image/png>",
                "[unsupported MCP content weird]",
            ]
        );
        assert_eq!(result.details, Some(json!({"server": "docs-srv", "tool": "err"})));
        assert_eq!(result.is_error, None);
        let structured = result.structured_content.unwrap();
        assert!(structured.get("_meta").is_none());
    }

    #[test]
    fn an_error_without_text_is_named_and_structured_content_shows_only_alone() {
        let result = tool_result(json!({"content": [], "isError": true}), SOURCE);
        assert_eq!(texts(&result), ["MCP tool docs-srv/err returned an error"]);
        assert_eq!(result.is_error, Some(true));
        let result = tool_result(
            json!({"structuredContent": {"b": 2, "a": [1, {"c": "x"}]}}),
            SOURCE,
        );
        assert_eq!(
            texts(&result),
            ["{\n  \"b\": 2,\n  \"a\": [\n    1,\n    {\n      \"c\": \"x\"\n    }\n  ]\n}"]
        );
        // The script's value: the server's fields in its order, content last where it sent none.
        assert_eq!(
            serde_json::to_string(&result.structured_content.unwrap()).unwrap(),
            r#"{"structuredContent":{"b":2,"a":[1,{"c":"x"}]},"content":[]}"#
        );
        let result = tool_result(
            json!({"content": [{"type": "text", "text": "shown"}], "structuredContent": {"hidden": 1}}),
            SOURCE,
        );
        assert_eq!(texts(&result), ["shown"]);
    }

    #[test]
    fn text_past_20_kib_loses_its_middle_and_is_kept_whole_in_a_file() {
        // pi 1.6.0 on 25,016 bytes of `A` in four lines: `original token count: 6254`, 4 lines, 4536 removed.
        let line = "A".repeat(6253);
        let text = format!("{line}\n{line}\n{line}\n{line}");
        assert_eq!(text.len(), 25015);
        let result = tool_result(
            json!({"content": [{"type": "text", "text": text.clone() + "A"}]}),
            SOURCE,
        );
        let shown = &texts(&result)[0];
        assert!(
            shown.starts_with(
                "Warning: truncated output (original token count: 6254)\nTotal output lines: 4\n\n"
            ),
            "{shown}"
        );
        assert!(shown.contains("…4536 chars truncated…"), "{shown}");
        let path = result.details.as_ref().unwrap()["fullOutputPath"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(shown.ends_with(&format!("\n\n[Full output: {path} (read it with offset/limit)]")));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text + "A");
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_binary_resource_is_saved_with_its_extension() {
        let raw = json!({"content": [{"type": "resource", "resource": {"uri": "file:///r/data.bin",
            "mimeType": "application/octet-stream", "blob": "AAECAw=="}}]});
        let shown = texts(&tool_result(raw, SOURCE)).remove(0);
        let prefix = "[Binary resource file:///r/data.bin (application/octet-stream, 4B) saved to ";
        assert!(shown.starts_with(prefix), "{shown}");
        let path = shown[prefix.len()..shown.len() - 1].to_owned();
        assert!(path.ends_with(".bin"));
        assert_eq!(std::fs::read(&path).unwrap(), [0, 1, 2, 3]);
        std::fs::remove_file(path).unwrap();
    }
}
