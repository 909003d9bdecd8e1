//! Tools and results in the shape each protocol revision asks for.
//!
//! - **2026-07-28** lets an output schema be any JSON Schema and `structuredContent` any JSON value: both pass
//!   as the tool declared and returned them.
//! - **Earlier revisions** (2025-06-18, 2025-11-25) require both to describe or be an object, and ask a tool
//!   that returns structured content to repeat it, serialized, as a text block. A schema or a value that is not
//!   an object is wrapped as `{"value": …}` ([`WRAPPED_KEY`]): read's `anyOf` of a string and an image object
//!   becomes `{"type": "object", "properties": {"value": <read's schema>}, "required": ["value"]}`, and its
//!   result `{"value": "<the text>"}`. The serialized JSON block goes after pi's own content blocks, unless the
//!   content already carries the value (a text block holds exactly that JSON, or the value is a string that a
//!   text block holds: read's text), or the server was told not to ([`Structured::text`]).
//! - Revisions before 2025-06-18 know no structured output: neither the schema nor the value is sent.

use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};

/// The key a non-object schema or structured value is wrapped under for revisions that require an object.
pub const WRAPPED_KEY: &str = "value";

/// How structured results are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Structured {
    /// Repeat `structuredContent` as a serialized JSON text block where the revision asks for it (2025-06-18 and
    /// 2025-11-25; on by default). Off saves the model reading a result twice when the client shows it
    /// `structuredContent` as well as the content.
    pub text: bool,
}

impl Default for Structured {
    fn default() -> Self {
        Structured { text: true }
    }
}

/// What a revision allows for structured output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Revision {
    /// Before 2025-06-18: no `outputSchema`, no `structuredContent`.
    Unstructured,
    /// 2025-06-18 and 2025-11-25: objects only, repeated as text.
    ObjectsOnly,
    /// 2026-07-28 and later: any schema, any value.
    AnyValue,
}

impl Revision {
    pub(crate) fn of(version: &ProtocolVersion) -> Self {
        let v = version.as_str();
        if v < ProtocolVersion::V_2025_06_18.as_str() {
            Revision::Unstructured
        } else if v < ProtocolVersion::V_2026_07_28.as_str() {
            Revision::ObjectsOnly
        } else {
            Revision::AnyValue
        }
    }
}

fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// The output schema a tool declares under `revision`, if any.
pub(crate) fn output_schema(schema: Option<&Value>, revision: Revision) -> Option<Value> {
    let schema = schema?;
    match revision {
        Revision::Unstructured => None,
        Revision::AnyValue => Some(schema.clone()),
        Revision::ObjectsOnly if is_object_schema(schema) => Some(schema.clone()),
        Revision::ObjectsOnly => Some(json!({
            "type": "object",
            "properties": { WRAPPED_KEY: schema },
            "required": [WRAPPED_KEY],
        })),
    }
}

/// The output schema a tool is served with: its own; for an MCP server's tool served on, that server's (what
/// its codemode schema holds under `structuredContent`), none when it declared none.
pub(crate) fn served_schema(definition: &toolwright_core::definition::ToolDefinition) -> Option<Value> {
    match definition.source {
        toolwright_core::definition::ToolSource::Mcp { .. } => definition
            .output_schema
            .as_ref()
            .and_then(|s| s.pointer("/properties/structuredContent"))
            .filter(|s| s.as_object().is_some_and(|o| !o.is_empty()))
            .cloned(),
        _ => definition.output_schema.clone(),
    }
}

/// Put `structured` into the result `body` (whose `content` is pi's blocks) as `revision` asks.
pub(crate) fn add_structured(
    body: &mut Value,
    structured: Option<&Value>,
    revision: Revision,
    options: Structured,
) {
    let Some(structured) = structured else { return };
    let value = match revision {
        Revision::Unstructured => return,
        Revision::AnyValue => {
            body["structuredContent"] = structured.clone();
            return;
        }
        Revision::ObjectsOnly if structured.is_object() => structured.clone(),
        Revision::ObjectsOnly => json!({ WRAPPED_KEY: structured }),
    };
    if options.text {
        let serialized = value.to_string();
        let content = body["content"].as_array_mut();
        if let Some(content) = content {
            let present = content.iter().any(|block| {
                let text = block["text"].as_str();
                block["type"] == "text" && (text == Some(&serialized) || text == structured.as_str())
            });
            if !present {
                content.push(json!({ "type": "text", "text": serialized }));
            }
        }
    }
    body["structuredContent"] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_schema() -> Value {
        json!({"anyOf": [{"type": "string"}, {"type": "object"}]})
    }

    #[test]
    fn revisions_are_told_apart_by_date() {
        assert_eq!(
            Revision::of(&ProtocolVersion::V_2025_03_26),
            Revision::Unstructured
        );
        assert_eq!(
            Revision::of(&ProtocolVersion::V_2025_06_18),
            Revision::ObjectsOnly
        );
        assert_eq!(
            Revision::of(&ProtocolVersion::V_2025_11_25),
            Revision::ObjectsOnly
        );
        assert_eq!(Revision::of(&ProtocolVersion::V_2026_07_28), Revision::AnyValue);
    }

    #[test]
    fn a_non_object_schema_is_wrapped_only_where_an_object_is_required() {
        let schema = read_schema();
        assert_eq!(
            output_schema(Some(&schema), Revision::AnyValue),
            Some(schema.clone())
        );
        assert_eq!(output_schema(Some(&schema), Revision::Unstructured), None);
        assert_eq!(
            output_schema(Some(&schema), Revision::ObjectsOnly),
            Some(json!({"type": "object", "properties": {"value": schema}, "required": ["value"]}))
        );
        let object = json!({"type": "object", "properties": {"a": {"type": "number"}}});
        assert_eq!(output_schema(Some(&object), Revision::ObjectsOnly), Some(object));
    }

    #[test]
    fn a_string_result_is_wrapped_for_object_only_revisions_and_repeated_only_when_the_text_lacks_it() {
        let mut body = json!({"content": [{"type": "text", "text": "hello"}], "isError": false});
        add_structured(
            &mut body,
            Some(&json!("hello")),
            Revision::ObjectsOnly,
            Structured::default(),
        );
        assert_eq!(body["structuredContent"], json!({"value": "hello"}));
        assert_eq!(
            body["content"].as_array().map(Vec::len),
            Some(1),
            "the text already holds the value"
        );

        let mut body = json!({"content": [{"type": "text", "text": "hello\n\n[2 more lines]"}]});
        add_structured(
            &mut body,
            Some(&json!("hello\n")),
            Revision::ObjectsOnly,
            Structured::default(),
        );
        assert_eq!(
            body["content"][1],
            json!({"type": "text", "text": "{\"value\":\"hello\\n\"}"})
        );

        let mut body = json!({"content": [{"type": "text", "text": "hello"}]});
        add_structured(
            &mut body,
            Some(&json!("hello")),
            Revision::AnyValue,
            Structured::default(),
        );
        assert_eq!(body["structuredContent"], json!("hello"));
        assert_eq!(
            body["content"].as_array().map(Vec::len),
            Some(1),
            "2026-07-28 adds no text block"
        );
    }

    #[test]
    fn the_serialized_block_is_not_repeated_and_can_be_turned_off() {
        let value = json!({"n": 1});
        let mut body = json!({"content": [{"type": "text", "text": "{\"n\":1}"}]});
        add_structured(
            &mut body,
            Some(&value),
            Revision::ObjectsOnly,
            Structured::default(),
        );
        assert_eq!(body["content"].as_array().map(Vec::len), Some(1));

        let mut body = json!({"content": []});
        add_structured(
            &mut body,
            Some(&value),
            Revision::ObjectsOnly,
            Structured { text: false },
        );
        assert_eq!(body["content"], json!([]));
        assert_eq!(body["structuredContent"], value);

        let mut body = json!({"content": []});
        add_structured(
            &mut body,
            Some(&value),
            Revision::Unstructured,
            Structured::default(),
        );
        assert_eq!(body, json!({"content": []}));
    }
}
