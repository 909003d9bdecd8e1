//! The result of one tool call.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Content, Usage};

/// What a tool returns: pi's `AgentToolResult`.
///
/// Keys that are `None` are left out of the JSON, as pi leaves out `undefined` ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// What the model sees.
    #[serde(default)]
    pub content: Vec<Content>,
    /// Tool-specific data for renderers and logs; never sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Machine-readable result matching the tool's output schema, for programs (codemode, MCP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Cost of model calls the tool made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// A returned (not thrown) error, such as a non-zero exit; only `Some(true)` counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// A vote to end the run after this batch; only `Some(true)` counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminate: Option<bool>,
}

impl ToolResult {
    /// A result with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        ToolResult {
            content: vec![Content::text(text)],
            ..Default::default()
        }
    }

    /// The result pi builds for every failure it catches: one text block and empty details (`{}`). It is *not*
    /// marked as an error by itself: to fail a call, return `Err(ToolError::new(…))` from `execute` (the model sees
    /// an `isError` result with the message), or mark a returned result with [`ToolResult::into_error`].
    pub fn error(message: impl Into<String>) -> Self {
        ToolResult {
            content: vec![Content::text(message)],
            details: Some(Value::Object(Default::default())),
            ..Default::default()
        }
    }

    /// This result with `details` set.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// This result with `structuredContent` set.
    pub fn with_structured_content(mut self, structured: Value) -> Self {
        self.structured_content = Some(structured);
        self
    }

    /// This result marked as a returned error (`isError: true`).
    pub fn into_error(mut self) -> Self {
        self.is_error = Some(true);
        self
    }

    /// Whether the result is a returned error (`isError === true`).
    pub fn is_error(&self) -> bool {
        self.is_error == Some(true)
    }

    /// Whether the result votes to terminate (`terminate === true`).
    pub fn terminates(&self) -> bool {
        self.terminate == Some(true)
    }

    /// The concatenated text of every block that has one ([`Content::text_view`]: text blocks, embedded
    /// resources' text, audio as pi words it), in order.
    pub fn text_content(&self) -> String {
        self.content.iter().filter_map(Content::text_view).collect()
    }

    /// pi's `textOf`: the blocks' text ([`Content::text_view`]) joined with `\n` (what nested-call records and
    /// codemode see).
    pub fn text_lines(&self) -> String {
        let texts: Vec<_> = self.content.iter().filter_map(Content::text_view).collect();
        texts.join("\n")
    }
}
