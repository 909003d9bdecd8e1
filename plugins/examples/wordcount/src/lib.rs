//! # toolwright-example-wordcount
//!
//! A third-party tool plugin, as small as a useful one gets: the `word_count` tool counts the words, lines and
//! characters of a text. It needs no file, process or variable, so it asks for nothing. Build it with
//! `cargo build -p toolwright-example-wordcount --target wasm32-wasip2 --release` (with `crate-type = ["cdylib"]`,
//! or `cargo rustc ... --crate-type cdylib`) and drop the `.wasm` into a plugin directory.
//!
//! ```
//! use toolwright_sdk::Tool;
//! assert_eq!(toolwright_example_wordcount::WordCount.spec().name, "word_count");
//! ```

use serde_json::{Value, json};
use toolwright_sdk::{Ctx, Tool, ToolError, ToolResult, ToolSpec};

/// The `word_count` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct WordCount;

impl Tool for WordCount {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "word_count".into(),
            label: "word count".into(),
            description: "Count the words, lines and characters of a text.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "The text to count"}},
                "required": ["text"]
            }),
            output_schema: Some(json!({
                "type": "object",
                "properties": {"words": {"type": "integer"}, "lines": {"type": "integer"}, "characters": {"type": "integer"}},
                "required": ["words", "lines", "characters"]
            })),
            prompt_snippet: Some("Count words, lines and characters".into()),
            ..Default::default()
        }
    }

    fn execute(&self, _call_id: &str, args: Value, _ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        let text = args["text"]
            .as_str()
            .ok_or_else(|| ToolError::new("text must be a string"))?;
        let (words, lines, characters) = (
            text.split_whitespace().count(),
            text.lines().count(),
            text.chars().count(),
        );
        Ok(
            ToolResult::text(format!("{words} words, {lines} lines, {characters} characters"))
                .with_structured_content(json!({"words": words, "lines": lines, "characters": characters})),
        )
    }
}

toolwright_sdk::export_tool!(WordCount);
