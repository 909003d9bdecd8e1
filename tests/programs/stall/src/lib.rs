//! # toolwright-test-stall
//!
//! A test program written with wit-bindgen alone: its `metadata` export never returns (a busy loop), as a plugin
//! that tries to hold every start of the host hostage would. The host must give up on it at its load deadline
//! and start without it.
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
        Content, Exposure, Loadout, LoadoutChanges, PluginMetadata, ToolResult, ToolSpec,
    };

    struct Hostile;

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

    impl Guest for Hostile {
        fn metadata() -> PluginMetadata {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }

        fn list_tools() -> Vec<ToolSpec> {
            vec![spec("stall", "Never gets this far.", r#"{"type": "object"}"#)]
        }

        fn prepare_arguments(_tool: String, _arguments: String) -> Result<Option<String>, String> {
            Ok(None)
        }

        fn mutated_path(_tool: String, _arguments: String) -> Option<String> {
            None
        }

        fn execute(_tool: String, _call_id: String, _arguments: String) -> Result<ToolResult, String> {
            Ok(text("ran"))
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

    export!(Hostile);
}
