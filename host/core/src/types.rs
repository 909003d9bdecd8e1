//! The wire types of one batch: tool calls in, result messages and events out, with pi's JSON names.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use toolwright_sdk::{Content, ToolResult, Usage};

/// A tool call block of an assistant message: `{type: "toolCall", id, name, arguments}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Always `"toolCall"`.
    #[serde(rename = "type", default = "tool_call_type")]
    pub kind: String,
    /// The tool call id, echoed in every event and in the result message.
    pub id: String,
    /// The tool name as the model wrote it; the lookup is exact and case-sensitive.
    pub name: String,
    /// The raw model arguments: any JSON, usually an object, key order kept.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// Set when the model's arguments text was not a valid JSON object (`arguments` is then `{}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_error: Option<String>,
}

fn tool_call_type() -> String {
    "toolCall".into()
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl ToolCall {
    /// A tool call with the given id, tool name and arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            kind: tool_call_type(),
            id: id.into(),
            name: name.into(),
            arguments,
            arguments_error: None,
        }
    }
}

/// Why the model stopped generating: pi's `stopReason`, as far as tool handling cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// The message ends with tool calls (the normal case).
    #[default]
    ToolUse,
    /// The model finished without asking for tools.
    Stop,
    /// The output token limit cut the message: no call runs (the length guard).
    Length,
    /// The provider failed: the run ends before tool handling.
    Error,
    /// The response was aborted: the run ends before tool handling.
    Aborted,
}

/// The part of an assistant message the pipeline reads: its tool calls, in content order, and its stop reason.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// The tool call blocks, in content order.
    pub tool_calls: Vec<ToolCall>,
    /// The stop reason.
    #[serde(default)]
    pub stop_reason: StopReason,
}

/// The persisted result of one tool call: pi's `ToolResultMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// Always `"toolResult"`.
    pub role: String,
    /// The id of the assistant's tool call.
    pub tool_call_id: String,
    /// The tool name as called.
    pub tool_name: String,
    /// The content the model sees.
    pub content: Vec<Content>,
    /// The result's details, absent when the tool returned none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// The tool's own usage (plus, later, the summed usage of its nested calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The nested calls the tool made, present only when it made some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_calls: Option<NestedToolCalls>,
    /// The final error flag after hooks.
    pub is_error: bool,
    /// Wall time of `execute` in whole milliseconds; absent when the tool never executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Milliseconds since the Unix epoch at message creation.
    pub timestamp: u64,
}

/// The record of the nested calls a tool made (pi's `NestedToolCalls`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NestedToolCalls {
    /// One record per nested call, in start order.
    pub calls: Vec<NestedToolCallRecord>,
    /// False when records were dropped for exceeding the limits.
    pub complete: bool,
}

/// One nested call (pi's `NestedToolCallRecord`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NestedToolCallRecord {
    /// The nested call's id, `<callerId>/<n>`.
    pub id: String,
    /// The tool called.
    pub name: String,
    /// The arguments, when within the size limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The size of the arguments, when they were left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_bytes: Option<u64>,
    /// `ok`, `error` or `unfinished`.
    pub status: String,
    /// Wall time of the nested call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The error text, cut to pi's limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What running one tool call produced (pi's `AgentToolCallOutcome`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentToolCallOutcome {
    /// The tool call as issued.
    pub tool_call: ToolCall,
    /// The final result.
    pub result: ToolResult,
    /// The final error flag.
    pub is_error: bool,
    /// Wall time of `execute`; absent when the tool never executed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// An event of the pipeline, serialised as pi's agent events (`{"type": "tool_execution_start", …}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A call entered the pipeline.
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        /// The call id.
        tool_call_id: String,
        /// The tool name as called.
        tool_name: String,
        /// The raw arguments, before preparation or coercion.
        args: Value,
        /// The calling tool's call id, for nested calls only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<String>,
    },
    /// A running tool reported a partial result.
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate {
        /// The call id.
        tool_call_id: String,
        /// The tool name as called.
        tool_name: String,
        /// The raw arguments.
        args: Value,
        /// The partial result.
        partial_result: ToolResult,
        /// The calling tool's call id, for nested calls only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<String>,
    },
    /// A call finished.
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        /// The call id.
        tool_call_id: String,
        /// The tool name as called.
        tool_name: String,
        /// The final result, `structuredContent` included.
        result: ToolResult,
        /// The final error flag.
        is_error: bool,
        /// Wall time of `execute`; absent when the tool never executed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration_ms: Option<u64>,
        /// The calling tool's call id, for nested calls only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<String>,
    },
    /// A result message is about to be added.
    MessageStart {
        /// The message.
        message: ToolResultMessage,
    },
    /// A result message was added.
    MessageEnd {
        /// The message.
        message: ToolResultMessage,
    },
}

impl AgentEvent {
    /// The tool call id the event concerns.
    pub fn tool_call_id(&self) -> &str {
        match self {
            AgentEvent::ToolExecutionStart { tool_call_id, .. }
            | AgentEvent::ToolExecutionUpdate { tool_call_id, .. }
            | AgentEvent::ToolExecutionEnd { tool_call_id, .. } => tool_call_id,
            AgentEvent::MessageStart { message } | AgentEvent::MessageEnd { message } => {
                &message.tool_call_id
            }
        }
    }

    /// The event's `type` string, as on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentEvent::ToolExecutionStart { .. } => "tool_execution_start",
            AgentEvent::ToolExecutionUpdate { .. } => "tool_execution_update",
            AgentEvent::ToolExecutionEnd { .. } => "tool_execution_end",
            AgentEvent::MessageStart { .. } => "message_start",
            AgentEvent::MessageEnd { .. } => "message_end",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_keys_stay_absent() {
        let message = ToolResultMessage {
            role: "toolResult".into(),
            tool_call_id: "c1".into(),
            tool_name: "read".into(),
            content: vec![Content::text("x")],
            details: None,
            usage: None,
            nested_calls: None,
            is_error: false,
            duration_ms: None,
            timestamp: 5,
        };
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read",
                   "content": [{"type": "text", "text": "x"}], "isError": false, "timestamp": 5})
        );
        let start = AgentEvent::ToolExecutionStart {
            tool_call_id: "c1".into(),
            tool_name: "read".into(),
            args: json!({}),
            parent_tool_call_id: None,
        };
        assert_eq!(
            serde_json::to_value(&start).unwrap(),
            json!({"type": "tool_execution_start", "toolCallId": "c1", "toolName": "read", "args": {}})
        );
    }

    #[test]
    fn tool_calls_parse_from_the_calls_file_shape() {
        let call: ToolCall = serde_json::from_value(json!({"id": "c1", "name": "read"})).unwrap();
        assert_eq!(call, ToolCall::new("c1", "read", json!({})));
    }
}
