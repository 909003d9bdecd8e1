//! # toolwright-test-raw
//!
//! A test program written against `wit/plugin.wit` with wit-bindgen alone, as a plugin in any language with WIT
//! tooling would be: no SDK to keep its values well-formed. Its `raw` tool returns, by the `arguments` text it is
//! given (not parsed: the test passes a bare JSON string):
//!
//! - `"details"`: a result whose `details` is not JSON;
//! - `"structured"`: a result whose `structured-content` is not JSON;
//! - `"partial"`: a malformed partial result (not JSON details), then a good result;
//! - `"terminate"`: a good result that votes to end the run (`terminate: true`);
//! - `"blocks"` (or `{"want":"blocks"}`, for clients that send objects only): text, audio, an embedded text
//!   resource and an embedded binary one (`toolwright:plugin@0.2.0`);
//! - `"bad-audio"`: an audio block whose data is not base64;
//! - anything else: a good result, `raw ok`.
//!
//! Two more tools return `raw ok` for whatever passes their schemas, which the host must enforce: `guarded`
//! takes a `name` that a look-ahead pattern forbids to start with `evil` (and says it is quick: `long-running`
//! false, so an MCP client that accepts tasks gets its result at once); `tree` takes a recursive object.
//!
//! It compiles to nothing natively.

#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code, missing_docs)] // Generated bindings: unsafe by nature, documented in the WIT.
mod guest {
    wit_bindgen::generate!({
        world: "tool-plugin",
        path: "../../../wit",
        // The world includes WASI (std uses it through wasi-libc): generate its bindings too.
        generate_all,
    });

    use exports::toolwright::plugin::tool::Guest;
    use toolwright::plugin::types::{
        Audio, Content, EmbeddedResource, Exposure, Loadout, LoadoutChanges, PluginMetadata, ResourceBody,
        ToolResult, ToolSpec,
    };

    struct Raw;

    fn spec(name: &str, description: &str, parameters: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            label: name.into(),
            description: description.into(),
            parameters: parameters.into(),
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
            long_running: None,
        }
    }

    fn text(text: &str) -> ToolResult {
        ToolResult {
            content: vec![Content::Text(text.into())],
            details: None,
            structured_content: None,
            usage: None,
            is_error: None,
            terminate: None,
        }
    }

    impl Guest for Raw {
        fn metadata() -> PluginMetadata {
            PluginMetadata {
                name: "toolwright-test-raw".into(),
                version: "0.1.0".into(),
                description: "Returns malformed values on request.".into(),
                capabilities: Vec::new(),
            }
        }

        fn list_tools() -> Vec<ToolSpec> {
            let mut specs = vec![
                spec(
                    "raw",
                    "Returns a malformed value on request.",
                    r#"{"type": ["string", "object"]}"#,
                ),
                spec(
                    "guarded",
                    "Runs for a name that does not start with evil.",
                    r#"{"type": "object", "required": ["name"],
                        "properties": {"name": {"type": "string", "pattern": "^(?!evil)"}}}"#,
                ),
                spec(
                    "tree",
                    "Runs for a tree of objects.",
                    r##"{"type": "object", "properties": {"child": {"$ref": "#"}}, "additionalProperties": false}"##,
                ),
            ];
            specs[1].long_running = Some(false);
            specs
        }

        fn prepare_arguments(_tool: String, _arguments: String) -> Result<Option<String>, String> {
            Ok(None)
        }

        fn mutated_path(_tool: String, _arguments: String) -> Option<String> {
            None
        }

        fn execute(_tool: String, _call_id: String, arguments: String) -> Result<ToolResult, String> {
            let mut result = text("raw ok");
            match arguments.as_str() {
                r#""details""# => result.details = Some("{not json".into()),
                r#""structured""# => result.structured_content = Some("nope".into()),
                r#""partial""# => {
                    let mut partial = text("partial");
                    partial.details = Some("{not json".into());
                    toolwright::plugin::host::update(&partial);
                }
                r#""terminate""# => result.terminate = Some(true),
                r#""blocks""# | r#"{"want":"blocks"}"# => {
                    result.content.push(Content::Audio(Audio {
                        data: "UklGRg==".into(),
                        mime_type: "audio/wav".into(),
                    }));
                    result.content.push(Content::Resource(EmbeddedResource {
                        uri: "raw://notes.txt".into(),
                        mime_type: Some("text/plain".into()),
                        body: ResourceBody::Text("embedded text".into()),
                    }));
                    result.content.push(Content::Resource(EmbeddedResource {
                        uri: "raw://clip.ogg".into(),
                        mime_type: Some("audio/ogg".into()),
                        body: ResourceBody::Blob("AAEC".into()),
                    }));
                }
                r#""bad-audio""# => result.content.push(Content::Audio(Audio {
                    data: "not base64!".into(),
                    mime_type: "audio/wav".into(),
                })),
                _ => {}
            }
            Ok(result)
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

    export!(Raw);
}
