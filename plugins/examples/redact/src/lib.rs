//! # toolwright-example-redact
//!
//! A handler plugin in the result path of every tool (pi's `tool_result` hook): `SECRET=…` values and AWS
//! access key ids (`AKIA` + 16 characters) in text results are replaced before the model sees them: text blocks,
//! and embedded resources' text (a resource's bytes too, when they are UTF-8 text: the model sees a text-typed
//! blob decoded, and an MCP client gets it whole). The new content drops the result's structured content, as pi
//! does when a handler replaces content alone.
//!
//! A result containing `__redact_fail__` makes it fail with the message `redact asked to fail`, and one
//! containing `__redact_trap__` makes it panic (a trap), which shows how the host treats a failing `tool_result`
//! handler: it is reported and skipped, and the result goes through unchanged, as pi does with a throwing
//! extension's.
//!
//! ```
//! assert_eq!(toolwright_example_redact::redact("x SECRET=hunter2 y"), "x SECRET=[redacted] y");
//! ```

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use toolwright_sdk::{Content, Handler, ResourceBody, ToolError, ToolResultChanges, ToolResultEvent};

/// The redactor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Redact;

impl Handler for Redact {
    fn tool_result(&self, event: &ToolResultEvent) -> Result<Option<ToolResultChanges>, ToolError> {
        let text: String = event.content.iter().filter_map(Content::as_text).collect();
        assert!(!text.contains("__redact_trap__"), "redact asked to trap");
        if text.contains("__redact_fail__") {
            return Err(ToolError::new("redact asked to fail"));
        }
        let mut changed = false;
        let content = event
            .content
            .iter()
            .map(|block| match block {
                Content::Text { text } => {
                    let clean = redact(text);
                    changed |= clean != *text;
                    Content::text(clean)
                }
                Content::Resource { resource } => {
                    let mut resource = resource.clone();
                    match &mut resource.body {
                        ResourceBody::Text { text } => {
                            let clean = redact(text);
                            changed |= clean != *text;
                            *text = clean;
                        }
                        ResourceBody::Blob { blob } => {
                            let text = STANDARD
                                .decode(&*blob)
                                .ok()
                                .and_then(|b| String::from_utf8(b).ok());
                            if let Some(text) = text {
                                let clean = redact(&text);
                                if clean != text {
                                    changed = true;
                                    *blob = STANDARD.encode(clean);
                                }
                            }
                        }
                    }
                    Content::Resource { resource }
                }
                other => other.clone(),
            })
            .collect();
        Ok(changed.then(|| ToolResultChanges {
            content: Some(content),
            ..Default::default()
        }))
    }
}

/// `SECRET=value` (to the end of the word) becomes `SECRET=[redacted]`; `AKIA…` key ids become `[redacted]`.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("SECRET=") {
        out.push_str(&rest[..i + 7]);
        out.push_str("[redacted]");
        let after = &rest[i + 7..];
        rest = &after[after.find(char::is_whitespace).unwrap_or(after.len())..];
    }
    out.push_str(rest);
    let mut result = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(i) = rest.find("AKIA") {
        let key = &rest[i..];
        let len = key
            .chars()
            .take(20)
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
            .count();
        if len == 20 {
            result.push_str(&rest[..i]);
            result.push_str("[redacted]");
            rest = &key[20..];
        } else {
            result.push_str(&rest[..i + 4]);
            rest = &key[4..];
        }
    }
    result.push_str(rest);
    result
}

toolwright_sdk::export_handler!(Redact);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_embedded_resources_are_redacted_too() {
        let event = ToolResultEvent {
            tool_name: "t".into(),
            tool_call_id: "c".into(),
            parent_tool_call_id: None,
            input: serde_json::json!({}),
            content: vec![
                Content::resource_text("r://t", Some("text/plain".into()), "SECRET=a"),
                Content::resource_blob("r://b", None, STANDARD.encode("key SECRET=b")),
                Content::resource_blob("r://bin", None, STANDARD.encode([0xff, 0xfe])),
                Content::audio("UklGRg==", "audio/wav"),
            ],
            details: None,
            structured_content: None,
            is_error: false,
            usage: None,
        };
        let content = Redact.tool_result(&event).unwrap().unwrap().content.unwrap();
        assert_eq!(
            content[0],
            Content::resource_text("r://t", Some("text/plain".into()), "SECRET=[redacted]")
        );
        assert_eq!(
            content[1],
            Content::resource_blob("r://b", None, STANDARD.encode("key SECRET=[redacted]"))
        );
        assert_eq!(
            content[2..],
            event.content[2..],
            "bytes that are not text, and audio, pass"
        );
    }
}
