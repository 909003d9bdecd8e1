//! # toolwright-test-bomb
//!
//! A hostile handler plugin written with wit-bindgen alone (the SDK would build its answers as parsed JSON in
//! the plugin's own memory first). It acts on `bash` calls whose command starts with `: bomb` (a command that
//! does nothing):
//!
//! - `bomb args MIB`: its `tool_call` handler rewrites the arguments to `{"command": "echo rewritten", "pad":
//!   [0,0,…]}`, MIB MiB of text.
//! - `bomb details MIB`: its `tool_result` handler sets `details` to such an array.
//! - `bomb image WIDTH HEIGHT`: its `tool_result` handler replaces the content with a black PNG of that size
//!   (300 KB for 20 000 × 20 000 pixels).
//! - `bomb image-as MIME BASE64`: its `tool_result` handler replaces the content with an image of that MIME type
//!   and data, as given (whatever they are).
//!
//! Every other call passes untouched. It compiles to nothing natively.
//!
//! It is built against `wit/plugin.wit` here, a frozen copy of the WIT as it was before the handler hooks
//! returned `result` (its `tool-call` returns a bare decision, its `tool-result` a bare option): the plugins
//! built then still load, and every test of this one shows it.

#[cfg(target_arch = "wasm32")]
#[path = "../../../src/bombs.rs"]
mod bombs;

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code, missing_docs)] // Generated bindings: unsafe by nature, documented in the WIT.
mod guest {
    wit_bindgen::generate!({
        world: "handler-plugin",
        path: "wit",
        // The world includes WASI (std uses it through wasi-libc): generate its bindings too.
        generate_all,
    });

    use base64::Engine;
    use exports::toolwright::plugin::handler::{
        Guest, ToolCallDecision, ToolCallEvent, ToolResultChanges, ToolResultEvent,
    };
    use toolwright::plugin::types::{Content, Image, PluginMetadata};

    struct Bomb;

    /// The words after `: bomb` in a `bash` call's command.
    fn bomb(tool: &str, input: &str) -> Option<Vec<String>> {
        if tool != "bash" {
            return None;
        }
        let start = input.find("\"command\":\": bomb ")? + "\"command\":\": bomb ".len();
        let end = start + input[start..].find('"')?;
        Some(input[start..end].split(' ').map(str::to_owned).collect())
    }

    /// `[0,0,…]` of about `mib` MiB, built as text.
    fn array(mib: usize) -> String {
        let mut text = String::with_capacity((mib << 20) + 2);
        text.push('[');
        for _ in 0..(mib << 19) - 1 {
            text.push_str("0,");
        }
        text.push_str("0]");
        text
    }

    fn number(words: &[String], at: usize) -> usize {
        words.get(at).and_then(|w| w.parse().ok()).unwrap_or(16)
    }

    impl Guest for Bomb {
        fn metadata() -> PluginMetadata {
            PluginMetadata {
                name: "toolwright-test-bomb".into(),
                version: "0.1.0".into(),
                description: "Answers with outputs that are small as text and huge once parsed.".into(),
                capabilities: Vec::new(),
            }
        }

        fn tool_call(event: ToolCallEvent) -> ToolCallDecision {
            match bomb(&event.tool_name, &event.input) {
                Some(words) if words.first().map(String::as_str) == Some("args") => {
                    let pad = array(number(&words, 1));
                    ToolCallDecision::Rewrite(format!(r#"{{"command":"echo rewritten","pad":{pad}}}"#))
                }
                _ => ToolCallDecision::Allow,
            }
        }

        fn tool_result(event: ToolResultEvent) -> Option<ToolResultChanges> {
            let words = bomb(&event.tool_name, &event.input)?;
            let mut changes = ToolResultChanges {
                content: None,
                details: None,
                structured_content: None,
                is_error: None,
                usage: None,
            };
            match words.first().map(String::as_str) {
                Some("details") => changes.details = Some(array(number(&words, 1))),
                Some("image-as") => {
                    changes.content = Some(vec![Content::Image(Image {
                        data: words.get(2).cloned().unwrap_or_default(),
                        mime_type: words.get(1).cloned().unwrap_or_default(),
                    })]);
                }
                Some("image") => {
                    let png = crate::bombs::black_png(number(&words, 1) as u32, number(&words, 2) as u32);
                    changes.content = Some(vec![Content::Image(Image {
                        data: base64::engine::general_purpose::STANDARD.encode(png),
                        mime_type: "image/png".into(),
                    })]);
                }
                _ => return None,
            }
            Some(changes)
        }
    }

    export!(Bomb);
}
