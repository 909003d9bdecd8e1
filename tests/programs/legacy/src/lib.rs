//! # toolwright-test-legacy
//!
//! A test program built against the frozen `toolwright:plugin@0.1.0` (`host/wasm/wit-0.1`) with wit-bindgen
//! alone, as a plugin shipped before 0.2.0 was: the host must still load it, serve its imports and call its
//! exports. Its `legacy` tool, by the action it is given (a bare JSON string, or `{"action": "…"}` as an MCP
//! client sends arguments):
//!
//! - `"nested"`: calls `raw` with `"blocks"` (text, audio, embedded resources) and returns the nested outcome's
//!   content as 0.1.0 sees it, after a line `nested: <is-error>`;
//! - `"callable"`: the names of the tools it can call, one line;
//! - `"spawn"`: starts `sh -c 'echo escaped'` through `process@0.1.0` and returns what it got (its output, or the
//!   refusal): the 0.1 door into the process sandbox must refuse what the 0.2 one does;
//! - `"read"`: reads the workspace's `a.txt` and returns what it got (`read: <text>`, or `refused: <error>`
//!   followed by the host's `refusal` for the path, asked through `host@0.1.0`);
//! - anything else: `legacy ok` and a 1×1 PNG, after a partial result `legacy partial`.
//!
//! Its `tool-result` hook answers for `raw`'s calls only: it leaves the content alone and sets the details to
//! `{"legacySaw": [...]}`, each block as it saw it (`text:<text>` or `image:<MIME>`).
//!
//! It compiles to nothing natively.

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code, missing_docs)] // Generated bindings: unsafe by nature, documented in the WIT.
mod guest {
    wit_bindgen::generate!({
        world: "full-plugin",
        path: "../../../host/wasm/wit-0.1",
        // The world includes WASI (std uses it through wasi-libc): generate its bindings too.
        generate_all,
    });

    use exports::toolwright::plugin::handler::{
        Guest as HandlerGuest, ToolCallDecision, ToolCallEvent, ToolResultChanges, ToolResultEvent,
    };
    use exports::toolwright::plugin::tool::Guest;
    use toolwright::plugin::types::{
        Capability, CapabilityRequest, Content, Exposure, Image, Loadout, LoadoutChanges, PluginMetadata,
        ToolResult, ToolSpec,
    };
    use toolwright::plugin::{host, process};

    const RED_PIXEL_PNG: &str =
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

    struct Legacy;

    fn result(content: Vec<Content>) -> ToolResult {
        ToolResult {
            content,
            details: None,
            structured_content: None,
            usage: None,
            is_error: None,
            terminate: None,
        }
    }

    fn metadata() -> PluginMetadata {
        PluginMetadata {
            name: "toolwright-test-legacy".into(),
            version: "0.1.0".into(),
            description: "Built against toolwright:plugin@0.1.0.".into(),
            // Asked for, granted only by a policy that grants it.
            capabilities: vec![CapabilityRequest {
                capability: Capability::Read(".".into()),
                reason: "reads the workspace when granted".into(),
            }],
        }
    }

    /// A JSON string literal of `text`.
    fn quoted(text: &str) -> String {
        let mut out = String::from('"');
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    impl Guest for Legacy {
        fn metadata() -> PluginMetadata {
            metadata()
        }

        fn list_tools() -> Vec<ToolSpec> {
            vec![ToolSpec {
                name: "legacy".into(),
                label: "legacy".into(),
                description: "A tool built against toolwright:plugin@0.1.0.".into(),
                parameters: r#"{"type": ["string", "object"], "properties": {"action": {"type": "string"}}}"#
                    .into(),
                output_schema: None,
                prompt_snippet: None,
                prompt_guidelines: Vec::new(),
                constrained_sampling: None,
                execution_mode: None,
                exposure: Exposure::Direct,
                annotations: None,
                namespace: None,
                default_active: None,
                renders_own_frame: false,
                prepares_arguments: false,
                mutates_files: false,
                prepares_loadout: false,
            }]
        }

        fn prepare_arguments(_tool: String, _arguments: String) -> Result<Option<String>, String> {
            Ok(None)
        }

        fn mutated_path(_tool: String, _arguments: String) -> Option<String> {
            None
        }

        fn execute(_tool: String, _call_id: String, arguments: String) -> Result<ToolResult, String> {
            // `{"action": "spawn"}` is `"spawn"`.
            let arguments = match arguments.split_once(r#""action":"#) {
                Some((_, action)) => action.trim().trim_end_matches('}').trim().to_owned(),
                None => arguments,
            };
            match arguments.as_str() {
                r#""nested""# => {
                    let outcome = host::call_tool("raw", r#""blocks""#);
                    let mut content = vec![Content::Text(format!("nested: {}", outcome.is_error))];
                    content.extend(outcome.result.content);
                    Ok(result(content))
                }
                r#""spawn""# => {
                    let command = process::Command {
                        program: "sh".into(),
                        args: vec!["-c".into(), "echo escaped".into()],
                        cwd: None,
                        env: Vec::new(),
                    };
                    let said = match process::spawn(&command) {
                        Err(refusal) => format!("refused: {refusal}"),
                        Ok(child) => {
                            let mut out = Vec::new();
                            loop {
                                match child.next(1000) {
                                    Ok(process::ProcessEvent::Output(bytes)) => out.extend(bytes),
                                    Ok(process::ProcessEvent::Idle) => {}
                                    Ok(process::ProcessEvent::Exited(_)) | Err(_) => break,
                                }
                            }
                            format!("ran: {}", String::from_utf8_lossy(&out))
                        }
                    };
                    Ok(result(vec![Content::Text(said)]))
                }
                r#""read""# => {
                    // The workspace as the plugin sees it (`host.cwd`; wit-bindgen alone does not change into it).
                    let path = format!("{}/a.txt", host::cwd());
                    let said = match std::fs::read_to_string(&path) {
                        Ok(text) => format!("read: {text}"),
                        Err(e) => format!(
                            "refused: {e}; {}",
                            host::refusal(&path, false).unwrap_or_else(|| "no refusal".into())
                        ),
                    };
                    Ok(result(vec![Content::Text(said)]))
                }
                r#""callable""# => {
                    let names: Vec<String> = host::callable_tools().into_iter().map(|t| t.name).collect();
                    Ok(result(vec![Content::Text(names.join(","))]))
                }
                _ => {
                    host::update(&result(vec![Content::Text("legacy partial".into())]));
                    Ok(result(vec![
                        Content::Text("legacy ok".into()),
                        Content::Image(Image {
                            data: RED_PIXEL_PNG.into(),
                            mime_type: "image/png".into(),
                        }),
                    ]))
                }
            }
        }

        fn prepare_loadout(_tool: String, _loadout: Loadout) -> Result<Option<LoadoutChanges>, String> {
            Ok(None)
        }

        fn render_call(_tool: String, _arguments: String) -> Option<String> {
            None
        }

        fn render_result(
            _tool: String,
            _result: ToolResult,
            _expanded: bool,
            _partial: bool,
        ) -> Option<String> {
            None
        }
    }

    impl HandlerGuest for Legacy {
        fn metadata() -> PluginMetadata {
            metadata()
        }

        fn tool_call(_event: ToolCallEvent) -> Result<ToolCallDecision, String> {
            Ok(ToolCallDecision::Allow)
        }

        fn tool_result(event: ToolResultEvent) -> Result<Option<ToolResultChanges>, String> {
            if event.tool_name != "raw" {
                return Ok(None);
            }
            let seen: Vec<String> = event
                .content
                .iter()
                .map(|c| match c {
                    Content::Text(text) => quoted(&format!("text:{text}")),
                    Content::Image(image) => quoted(&format!("image:{}", image.mime_type)),
                })
                .collect();
            Ok(Some(ToolResultChanges {
                content: None,
                details: Some(format!(r#"{{"legacySaw": [{}]}}"#, seen.join(", "))),
                structured_content: None,
                is_error: None,
                usage: None,
            }))
        }
    }

    export!(Legacy);
}
