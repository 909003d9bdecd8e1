//! # toolwright-tests
//!
//! Integration tests that span crates: the pipeline replayed against golden fixtures recorded from pi 1.6.0,
//! the `toolwright` binary's contract, and (later) native-vs-wasm parity.
//!
//! - [`scenario`]: pipeline scenarios as data, with the test tools and hooks that both the pi driver
//!   (`tests/oracle/record.mjs`) and this crate build from them.
//! - [`normalize`]: event normalisation shared by every golden comparison.
//! - [`mcp`]: `toolwright mcp --http` for a test, and the pinned Node tools (conformance suite, Inspector).
//! - [`bombs`]: inputs small on disk and huge once parsed (a PNG declaring 20 000 × 20 000 pixels).
//!
//! ```
//! let fixtures = toolwright_tests::fixtures_dir();
//! assert!(fixtures.ends_with("fixtures"));
//! ```

pub mod bombs;
pub mod golden;

/// The README's Rust examples, run as this crate's doctests, and what they are given.
#[doc = include_str!("../../README.md")]
pub mod readme {
    use tempfile::TempDir;

    /// A workspace with a file in it, and a plugin directory holding the `guard` handler plugin
    /// (`plugins/examples/guard`), the `nest` test program (`tests/programs/nested`), whose tools call others,
    /// and `policy.toml`, granting `nest` the tools it calls within the workspace.
    pub fn fixture() -> (TempDir, TempDir) {
        let workspace = tempfile::tempdir().expect("a temporary workspace");
        std::fs::write(workspace.path().join("notes.md"), "# Notes\n").expect("write into the workspace");
        let plugins = tempfile::tempdir().expect("a temporary plugin directory");
        let (_, guard) = super::programs::EXAMPLES
            .iter()
            .find(|(name, _)| name.ends_with("guard"))
            .expect("the guard example is built");
        std::fs::write(plugins.path().join("guard.wasm"), guard).expect("install guard.wasm");
        std::fs::copy(super::programs::NESTED, plugins.path().join("nest.wasm")).expect("install nest.wasm");
        std::fs::write(
            plugins.path().join("policy.toml"),
            "[plugins.toolwright-test-nested]\ntools = [\"bash\", \"ls\"]\nread = [\".\"]\n",
        )
        .expect("write the policy");
        (workspace, plugins)
    }
}

/// Paths of the test programs (wasm components built by `build.rs`), and their tools as definitions.
pub mod programs {
    include!(concat!(env!("OUT_DIR"), "/programs.rs"));

    use std::path::Path;
    use std::sync::Arc;

    use toolwright::definition::{ToolDefinition, ToolSource};
    use toolwright::native::NativeEnv;
    use toolwright::wasm::{PluginHost, WasmGrants};

    /// The content `raw` returns for `"blocks"`, as it crosses to an MCP client or a `tool_execution_end`: text,
    /// audio, an embedded text resource and an embedded binary one.
    pub fn raw_blocks() -> serde_json::Value {
        serde_json::json!([
            {"type": "text", "text": "raw ok"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "raw://notes.txt", "mimeType": "text/plain",
                                              "text": "embedded text"}},
            {"type": "resource", "resource": {"uri": "raw://clip.ogg", "mimeType": "audio/ogg", "blob": "AAEC"}},
        ])
    }

    /// A test program's tools linked natively, as embedder (SDK) tools working in `cwd`.
    pub fn native<T: toolwright_sdk::Tool + 'static>(tools: Vec<T>, cwd: &Path) -> Vec<ToolDefinition> {
        let env = NativeEnv::builtin(cwd).expect("a native environment for the workspace");
        tools
            .into_iter()
            .map(|t| toolwright::native::tool_definition(Arc::new(t), env.clone(), ToolSource::Embedder))
            .collect()
    }

    /// A test program's tools loaded from its component at `path`, granted the workspace (read-write) and
    /// nested calls of any tool, nothing else. The plugin stays loaded for the rest of the test process.
    pub fn wasm(path: &str, cwd: &Path) -> Vec<ToolDefinition> {
        let host = PluginHost::new(None).expect("a plugin runtime");
        let plugin = host.load_file(Path::new(path)).expect("the test program loads");
        let mut grants = WasmGrants::none(cwd);
        grants.preopens = vec![toolwright::wasm::Preopen {
            host: cwd.to_path_buf(),
            guest: toolwright_sdk::paths::normalize(&cwd.to_string_lossy()),
            write: true,
        }];
        grants.calls = toolwright::wasm::Calls::Own(vec!["*".into()]);
        let tools = plugin.tool_definitions(&grants);
        std::mem::forget(plugin);
        tools
    }
}
pub mod mcp;

/// The text blocks of an MCP or pi `content` array, joined by newlines.
pub fn text_of(content: &serde_json::Value) -> String {
    content
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The `tool_execution_end` events `toolwright exec --json` printed on a terminal, where the text of a question (on
/// stderr) may share their lines.
pub fn terminal_execution_ends(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .filter_map(|l| {
            l.find("{\"type\"")
                .and_then(|at| serde_json::from_str::<serde_json::Value>(l[at..].trim()).ok())
        })
        .filter(|e| e["type"] == "tool_execution_end")
        .collect()
}

/// The result messages of `toolwright exec`'s event lines (`message_end`), in call order.
pub fn result_messages(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("an event line is JSON"))
        .filter(|e| e["type"] == "message_end")
        .map(|mut e| e["message"].take())
        .collect()
}
pub mod normalize;
pub mod scenario;
pub mod workspace;

use std::path::PathBuf;

/// The `tests/fixtures` directory.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}
