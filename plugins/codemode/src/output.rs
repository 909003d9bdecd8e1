//! The result of a script (pi's `executeCodemode` result format, spec §11.5): the output items laid out, the
//! error and call summary on failure, the token budget, and the header block.

use serde::{Deserialize, Serialize};
use serde_json::json;
use toolwright_sdk::js::{utf16_len, utf16_prefix as head, utf16_suffix as tail};
use toolwright_sdk::{Content, ToolResult};

/// Characters per token for the output budget.
pub const CHARS_PER_TOKEN: usize = 4;
/// The output budget when the options line sets none.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 10_000;
/// The key of the side channel on which the engine hands each output item to the host as it is made (a partial
/// result whose `details` has only this key: the host takes it off and passes nothing on).
pub const STREAM_KEY: &str = "toolwright/codemode-output";
/// Characters of output streamed to the host per script; what follows reaches only the final result.
pub const STREAM_LIMIT_CHARS: usize = 4 << 20;
/// Characters of a nested call's arguments shown in `details.calls`.
const ARGS_PREVIEW_CHARS: usize = 200;
/// Characters of a nested call's error shown in `details.calls`.
const ERROR_PREVIEW_CHARS: usize = 500;

/// One item the script produced, in order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum OutputItem {
    /// `text(value)` or the returned value.
    Text {
        /// The text.
        text: String,
    },
    /// A `console.*` line.
    Console {
        /// The line.
        text: String,
    },
    /// `image(…)`: base64 data of a PNG, JPEG, GIF or WebP image.
    Image {
        /// The base64 data.
        data: String,
        /// Its detected type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
}

/// An item of the result being laid out: text, or an image (base64 data and type).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Text(String),
    Image(String, String),
}

/// What [`result`] asks its caller to save in the temp directory: the full text of output the budget cut, or an
/// image's bytes (with the file extension of its type). The answer is the file's path, or why it could not be
/// saved.
#[derive(Debug)]
pub enum Save<'a> {
    /// The whole text output (`pi-codemode-*.txt`).
    Text(&'a str),
    /// An image (`pi-codemode-*.png|.jpg|.gif|.webp`).
    Image(&'a [u8], &'static str),
}

/// The file extension of an image type `image()` accepts.
fn extension(mime_type: &str) -> Option<&'static str> {
    match mime_type {
        "image/png" => Some(".png"),
        "image/jpeg" => Some(".jpg"),
        "image/gif" => Some(".gif"),
        "image/webp" => Some(".webp"),
        _ => None,
    }
}

/// A nested call as `details.calls` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRecord {
    /// `CALLID/N` once the call ran, `CALLID/?` before.
    pub id: String,
    /// The tool's raw name.
    pub name: String,
    /// The arguments as compact JSON, cut to 200 characters.
    pub args: String,
    /// `running`, `ok`, `error` or `cancelled`.
    pub status: String,
    /// Elapsed milliseconds, not rounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// The error text, cut to 500 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CallRecord {
    /// A record of a call that is starting (arguments `None`: the script passed `undefined`).
    pub fn running(caller: &str, name: &str, args: Option<&serde_json::Value>) -> Self {
        CallRecord {
            id: format!("{caller}/?"),
            name: name.to_owned(),
            args: args.map_or_else(String::new, |a| preview(&a.to_string(), ARGS_PREVIEW_CHARS)),
            status: "running".into(),
            duration_ms: None,
            error: None,
        }
    }

    /// Settle the record with the nested call's outcome.
    pub fn finish(&mut self, id: Option<String>, duration_ms: f64, error: Option<String>) {
        if let Some(id) = id {
            self.id = id;
        }
        self.duration_ms = Some(duration_ms);
        match error {
            Some(text) => {
                self.status = "error".into();
                self.error = Some(preview(&text, ERROR_PREVIEW_CHARS));
            }
            None => self.status = "ok".into(),
        }
    }
}

/// The first `max` characters, or the first `max - 3` and `...` when longer (UTF-16 units, as JavaScript counts).
fn preview(text: &str, max: usize) -> String {
    if utf16_len(text) <= max {
        return text.to_owned();
    }
    format!("{}...", head(text, max - 3))
}

/// How a script ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It finished (or called `exit()`), with the text of its returned value, if any.
    Completed(Option<String>),
    /// It failed: the error head (`Name: message`, `Script timed out: …`, …).
    Failed(String),
}

/// pi's `formatCallSummary`.
fn call_summary(calls: &[CallRecord]) -> String {
    if calls.is_empty() {
        return "No tool calls were made.".into();
    }
    let list: Vec<String> = calls
        .iter()
        .map(|c| format!("{} ({})", c.name, c.status))
        .collect();
    format!(
        "Tool calls made before the failure (they are not undone): {}",
        list.join(", ")
    )
}

/// pi's `formatOutput`: numbered text items when there are several, console lines in one trailing block, images
/// where they were shown.
fn layout(output: Vec<OutputItem>) -> Vec<Item> {
    let total = output
        .iter()
        .filter(|i| matches!(i, OutputItem::Text { .. }))
        .count();
    let mut items = Vec::new();
    let mut console = Vec::new();
    let mut index = 0;
    for item in output {
        match item {
            OutputItem::Console { text } => console.push(text),
            OutputItem::Image { data, mime_type } => items.push(Item::Image(data, mime_type)),
            OutputItem::Text { text } => {
                index += 1;
                items.push(Item::Text(if total > 1 {
                    format!("==> text {index}/{total} <==\n{text}")
                } else {
                    text
                }));
            }
        }
    }
    if !console.is_empty() {
        items.push(Item::Text(format!(
            "<console_output>\n{}\n</console_output>",
            console.join("\n")
        )));
    }
    items
}

/// pi's `joinAdjacentText`: each run of adjacent texts becomes one, each part on its own line; images stay.
fn join(items: Vec<Item>) -> Vec<Item> {
    let mut joined = Vec::new();
    let mut text: Option<String> = None;
    let mut last_ends_line = true;
    for item in items {
        match item {
            Item::Image(..) => {
                joined.extend(text.take().map(Item::Text));
                last_ends_line = true;
                joined.push(item);
            }
            Item::Text(part) => {
                let current = text.get_or_insert_with(String::new);
                if !last_ends_line {
                    current.push('\n');
                    last_ends_line = true;
                }
                current.push_str(&part);
                if !part.is_empty() {
                    last_ends_line = part.ends_with('\n');
                }
            }
        }
    }
    joined.extend(text.map(Item::Text));
    joined
}

/// pi's `truncateOutput`: over the budget, the texts become one item that keeps their start and end (the whole
/// saved by `save`), and images follow it. Also gives the saved file's path.
fn budget(
    items: Vec<Item>,
    max_output_tokens: Option<u64>,
    save: &mut dyn FnMut(Save<'_>) -> Result<String, String>,
) -> (Vec<Item>, Option<String>) {
    let texts: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Item::Text(t) => Some(t.as_str()),
            Item::Image(..) => None,
        })
        .collect();
    let combined = texts.join("\n");
    let budget = max_output_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS) as usize * CHARS_PER_TOKEN;
    let length = utf16_len(&combined);
    if texts.is_empty() || length <= budget {
        return (items, None);
    }
    let head_units = budget / 2;
    let tail_units = budget - head_units;
    let removed = length - head_units - tail_units;
    let mut cut = format!(
        "Warning: truncated output (original token count: {})\nTotal output lines: {}\n\n{}…{} tokens truncated…{}",
        length.div_ceil(CHARS_PER_TOKEN),
        combined.split('\n').count(),
        head(&combined, head_units),
        removed.div_ceil(CHARS_PER_TOKEN),
        tail(&combined, tail_units),
    );
    let mut path = None;
    match save(Save::Text(&combined)) {
        Ok(saved) => {
            cut.push_str(&format!("\n\n[Full output: {saved} (read with offset/limit)]"));
            path = Some(saved);
        }
        Err(error) => cut.push_str(&format!("\n\n[Could not save the full output: {error}]")),
    }
    let mut kept = vec![Item::Text(cut)];
    kept.extend(items.into_iter().filter(|i| matches!(i, Item::Image(..))));
    (kept, path)
}

/// pi's `saveImages`: each image saved to a temp file (the same data once) and preceded by a text naming it.
fn save_images(items: Vec<Item>, save: &mut dyn FnMut(Save<'_>) -> Result<String, String>) -> Vec<Item> {
    use base64::Engine as _;
    let mut labels: Vec<(String, String)> = Vec::new();
    let mut out = Vec::new();
    for item in items {
        let Item::Image(data, mime_type) = &item else {
            out.push(item);
            continue;
        };
        let label = match labels.iter().find(|(d, _)| d == data) {
            Some((_, label)) => label.clone(),
            None => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap_or_default();
                let kind = format!(
                    "{mime_type}, {}",
                    toolwright_sdk::truncate::format_size(bytes.len())
                );
                let label = match extension(mime_type) {
                    None => format!(
                        "[Image ({kind}) could not be saved: No file extension for image type {mime_type}]"
                    ),
                    Some(ext) => match save(Save::Image(&bytes, ext)) {
                        Ok(path) => format!("[Image saved to {path} ({kind})]"),
                        Err(error) => format!("[Image ({kind}) could not be saved: {error}]"),
                    },
                };
                labels.push((data.clone(), label.clone()));
                label
            }
        };
        out.push(Item::Text(label));
        out.push(item);
    }
    out
}

/// Build the tool result. `save` writes the full text when the budget cuts it, and each image shown (a path, or
/// why it could not).
pub fn result(
    output: Vec<OutputItem>,
    ending: Ending,
    calls: Vec<CallRecord>,
    wall_seconds: f64,
    max_output_tokens: Option<u64>,
    mut save: impl FnMut(Save<'_>) -> Result<String, String>,
) -> ToolResult {
    let mut output = output;
    let failed = match &ending {
        Ending::Completed(Some(value)) => {
            output.push(OutputItem::Text { text: value.clone() });
            None
        }
        Ending::Completed(None) => None,
        Ending::Failed(head) => Some(head.clone()),
    };
    let mut items = layout(output);
    if let Some(head) = &failed {
        items.push(Item::Text(format!(
            "Script error:\n{head}\n\n{}",
            call_summary(&calls)
        )));
    }
    let (items, full_output_path) = budget(join(items), max_output_tokens, &mut save);
    let items = join(save_images(items, &mut save));
    let header = format!(
        "{}\nWall time {wall_seconds:.1} seconds\nOutput:\n",
        if failed.is_some() {
            "Script failed"
        } else {
            "Script completed"
        }
    );
    let mut content = vec![Content::text(header)];
    content.extend(items.into_iter().map(|item| match item {
        Item::Text(text) => Content::text(text),
        Item::Image(data, mime_type) => Content::image(data, mime_type),
    }));
    let mut details = json!({ "calls": calls });
    if let Some(path) = full_output_path {
        details["fullOutputPath"] = json!(path);
    }
    ToolResult {
        content,
        details: Some(details),
        is_error: failed.is_some().then_some(true),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(result: &ToolResult) -> Vec<String> {
        result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(str::to_owned))
            .collect()
    }

    #[test]
    fn several_texts_are_numbered_and_console_lines_follow() {
        let output = vec![
            OutputItem::Console { text: "log 1".into() },
            OutputItem::Text { text: "a".into() },
            OutputItem::Text { text: "b\n".into() },
        ];
        let r = result(
            output,
            Ending::Completed(Some("42".into())),
            Vec::new(),
            0.04,
            None,
            |_| Ok("x".into()),
        );
        assert_eq!(
            texts(&r),
            [
                "Script completed\nWall time 0.0 seconds\nOutput:\n",
                "==> text 1/3 <==\na\n==> text 2/3 <==\nb\n==> text 3/3 <==\n42\n<console_output>\nlog 1\n</console_output>"
            ]
        );
        assert_eq!(r.is_error, None);
        assert_eq!(r.details, Some(json!({"calls": []})));
    }

    #[test]
    fn a_failure_lists_the_calls_made() {
        let mut call = CallRecord::running("c1", "read", Some(&json!({"path": "a"})));
        call.finish(Some("c1/1".into()), 1.5, None);
        let r = result(
            vec![OutputItem::Text {
                text: "partial".into(),
            }],
            Ending::Failed("Error: bad".into()),
            vec![call],
            1.26,
            None,
            |_| Ok("x".into()),
        );
        assert_eq!(
            texts(&r),
            [
                "Script failed\nWall time 1.3 seconds\nOutput:\n",
                "partial\nScript error:\nError: bad\n\nTool calls made before the failure (they are not undone): read (ok)"
            ]
        );
        assert_eq!(r.is_error, Some(true));
        let empty = result(
            Vec::new(),
            Ending::Failed("Error: x".into()),
            Vec::new(),
            0.0,
            None,
            |_| Ok("x".into()),
        );
        assert_eq!(
            texts(&empty)[1],
            "Script error:\nError: x\n\nNo tool calls were made."
        );
    }

    #[test]
    fn the_budget_keeps_the_head_and_tail_and_saves_the_rest() {
        let long = "x".repeat(100);
        let r = result(
            vec![OutputItem::Text { text: long.clone() }],
            Ending::Completed(None),
            Vec::new(),
            0.0,
            Some(10),
            |saved| match saved {
                Save::Text(full) => {
                    assert_eq!(full, long);
                    Ok("/tmp/out.txt".into())
                }
                Save::Image(..) => Err("no image here".into()),
            },
        );
        assert_eq!(
            texts(&r)[1],
            format!(
                "Warning: truncated output (original token count: 25)\nTotal output lines: 1\n\n{}…15 tokens truncated…{}\n\n[Full output: /tmp/out.txt (read with offset/limit)]",
                "x".repeat(20),
                "x".repeat(20)
            )
        );
        assert_eq!(r.details.as_ref().unwrap()["fullOutputPath"], "/tmp/out.txt");
    }

    #[test]
    fn previews_cut_long_arguments_and_errors() {
        let mut call = CallRecord::running("c1", "bash", Some(&json!({"command": "y".repeat(300)})));
        assert_eq!(call.args.chars().count(), 200);
        assert!(call.args.ends_with("..."));
        call.finish(None, 2.0, Some("e".repeat(600)));
        assert_eq!(call.id, "c1/?");
        assert_eq!(call.status, "error");
        assert_eq!(call.error.as_ref().unwrap().len(), 500);
    }
}
