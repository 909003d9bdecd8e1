//! Loading plugins from plugin directories: a third-party plugin works with no grants, bad files are reported
//! and skipped while the others load, name clashes keep the first, and a second start uses the compiled cache.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::{Path, PathBuf};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolwright::toolset::{LoadError, Toolset, ToolsetOptions};
use toolwright::trust::TrustError;
use toolwright::wasm::{Compilation, PluginError, PluginHost};
use toolwright::{AssistantMessage, EventLog, Pipeline, ToolCall};
use toolwright_tests::golden::test_cache_dir;

fn example(name: &str) -> &'static [u8] {
    toolwright_tests::programs::EXAMPLES
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
}

fn builtin(name: &str) -> &'static [u8] {
    toolwright::wasm::components::BUILTINS
        .unwrap()
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
}

fn options(ws: &Path, plugin_dir: &Path) -> ToolsetOptions {
    let mut options = ToolsetOptions::new(ws);
    options.plugin_dirs = vec![plugin_dir.to_path_buf()];
    options.cache_dir = Some(test_cache_dir());
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_party_plugin_runs_next_to_the_builtins() {
    let ws = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("wordcount.wasm"),
        example("toolwright-example-wordcount"),
    )
    .unwrap();
    let toolset = Toolset::load(&options(ws.path(), dir.path())).unwrap();
    assert!(toolset.errors.is_empty(), "{:?}", toolset.errors);
    let definitions = toolset.definitions();
    let names: Vec<&str> = definitions.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read",
            "bash",
            "powershell",
            "edit",
            "write",
            "grep",
            "find",
            "ls",
            "word_count"
        ]
    );
    let plugin = &toolset.plugins[0];
    assert_eq!(plugin.metadata.name, "toolwright-example-wordcount");
    assert!(plugin.metadata.capabilities.is_empty());

    let message = AssistantMessage {
        tool_calls: vec![
            ToolCall::new("w1", "word_count", json!({"text": "one two\nthree"})),
            ToolCall::new("w2", "word_count", json!({"text": 42})),
            ToolCall::new("w3", "word_count", json!({})),
        ],
        ..Default::default()
    };
    let outcome = Pipeline::new()
        .execute_tool_calls(
            &toolset.agent_tools(),
            &message,
            &EventLog::new(),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!(
        outcome.messages[0].content[0].as_text(),
        Some("3 words, 2 lines, 13 characters")
    );
    assert_eq!(
        outcome.results[0].structured_content,
        Some(json!({"words": 3, "lines": 2, "characters": 13}))
    );
    // The same validation and coercion as any tool: 42 becomes "42".
    assert_eq!(
        outcome.messages[1].content[0].as_text(),
        Some("1 words, 1 lines, 2 characters")
    );
    assert_eq!(
        outcome.messages[2].content[0].as_text(),
        Some("Validation failed for tool \"word_count\":\n  - text: missing\n\nReceived arguments:\n{}")
    );
}

#[test]
fn bad_files_are_reported_by_name_and_the_others_load() {
    let ws = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a-good.wasm"),
        example("toolwright-example-wordcount"),
    )
    .unwrap();
    std::fs::write(dir.path().join("b-garbage.wasm"), b"this is not wasm").unwrap();
    // A core module, not a component.
    std::fs::write(dir.path().join("c-core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::write(dir.path().join("d-truncated.wasm"), &builtin("write")[..1000]).unwrap();
    // The same plugin twice: the second is a name clash.
    std::fs::write(
        dir.path().join("e-again.wasm"),
        example("toolwright-example-wordcount"),
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"ignored: not a .wasm").unwrap();
    let toolset = Toolset::load(&options(ws.path(), dir.path())).unwrap();
    assert_eq!(toolset.plugins.len(), 1);
    assert!(toolset.definitions().iter().any(|d| d.name == "word_count"));
    let errors: Vec<String> = toolset.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 4, "{errors:#?}");
    let file = |name: &str| dir.path().join(name).display().to_string();
    assert!(
        errors[0].starts_with(&format!(
            "{}: not a valid WebAssembly component",
            file("b-garbage.wasm")
        )),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].starts_with(&format!(
            "{}: not a valid WebAssembly component",
            file("c-core.wasm")
        )),
        "{}",
        errors[1]
    );
    assert!(
        errors[2].starts_with(&format!(
            "{}: not a valid WebAssembly component",
            file("d-truncated.wasm")
        )),
        "{}",
        errors[2]
    );
    assert!(
        matches!(&toolset.errors[3], LoadError::Trust(TrustError::NameClash { name, .. }) if name == "toolwright-example-wordcount")
    );
    assert!(errors[3].contains(&file("a-good.wasm")), "{}", errors[3]);
}

/// The compiled components in `dir` (not their cached metadata).
fn cached_components(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    found.sort();
    found
}

#[test]
fn a_second_start_loads_compiled_plugins_and_their_metadata_from_the_cache() {
    let cache = tempfile::tempdir().unwrap();
    let bytes = example("toolwright-example-wordcount");
    let path = PathBuf::from("wordcount.wasm");
    let first = PluginHost::new(Some(cache.path().to_path_buf()))
        .unwrap()
        .load_bytes(&path, bytes)
        .unwrap();
    assert_eq!(first.compilation, Compilation::Compiled);
    let cached = cached_components(cache.path());
    assert_eq!(cached.len(), 1, "one compiled component in the cache: {cached:?}");
    let digest = &toolwright::wasm::cache_entries(cache.path()).unwrap()[0].digest;
    let meta = cache.path().join("described").join(format!("{digest}.json"));
    assert!(
        meta.is_file(),
        "its description apart from it, by its digest alone"
    );
    // A new runtime, as a second start of the program would have.
    let second = PluginHost::new(Some(cache.path().to_path_buf()))
        .unwrap()
        .load_bytes(&path, bytes)
        .unwrap();
    assert_eq!(second.compilation, Compilation::Cached);
    assert_eq!(second.metadata, first.metadata);
    assert_eq!(second.tools, first.tools);
    drop(second);
    // Cached metadata that does not parse is read again from the component.
    std::fs::write(&meta, b"{").unwrap();
    let third = PluginHost::new(Some(cache.path().to_path_buf()))
        .unwrap()
        .load_bytes(&path, bytes)
        .unwrap();
    assert_eq!(
        (third.compilation, &third.tools),
        (Compilation::Cached, &first.tools)
    );
    drop(third);
    // A corrupt cache entry is not trusted blindly: it is recompiled.
    std::fs::write(&cached[0], b"garbage").unwrap();
    let fourth = PluginHost::new(Some(cache.path().to_path_buf()))
        .unwrap()
        .load_bytes(&path, bytes)
        .unwrap();
    assert_eq!(fourth.compilation, Compilation::Compiled);
    // Clearing takes the compiled code; the description, a function of the component's bytes, stays.
    assert_eq!(toolwright::wasm::clear_cache(cache.path()).unwrap().0, 1);
    assert!(toolwright::wasm::cache_entries(cache.path()).unwrap().is_empty());
    assert!(meta.is_file());
}

#[test]
fn a_plugin_file_seen_before_is_known_by_its_stamp_and_any_write_to_it_is_seen() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plugin.wasm");
    let (wordcount, guard) = (
        example("toolwright-example-wordcount"),
        example("toolwright-example-guard"),
    );
    let load = || {
        PluginHost::new(Some(cache.path().to_path_buf()))
            .unwrap()
            .load_file(&file)
    };
    let memos = || {
        std::fs::read_dir(cache.path().join("files"))
            .map(|d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    // Both compiled into the cache; a file written just now is hashed and not remembered.
    std::fs::write(&file, guard).unwrap();
    let guard_digest = load().unwrap().sha256();
    std::fs::write(&file, wordcount).unwrap();
    let first = load().unwrap();
    assert_eq!(first.compilation, Compilation::Compiled);
    assert!(
        memos().is_empty(),
        "a file changed within the second is not known by its stamp yet"
    );
    // Once its change time is a second old, a load remembers its digest, and the next load goes by it.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(load().unwrap().sha256(), first.sha256());
    let memo = memos();
    assert_eq!(memo.len(), 1, "{memo:?}");
    let second = load().unwrap();
    assert_eq!(
        (second.compilation, second.sha256()),
        (Compilation::Cached, first.sha256())
    );
    // The remembered digest is what the load goes by, not the file's bytes: a memo claiming the guard's digest
    // for this stamp loads the guard (the cache directory is as trusted as the compiled code in it).
    let text = std::fs::read_to_string(&memo[0]).unwrap();
    let hex = |d: [u8; 32]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    std::fs::write(&memo[0], text.replace(&hex(first.sha256()), &hex(guard_digest))).unwrap();
    assert_eq!(load().unwrap().sha256(), guard_digest);
    std::fs::write(&memo[0], text).unwrap();
    assert_eq!(load().unwrap().sha256(), first.sha256());
    // Any write to the file is seen, the same bytes or not, the same size or not.
    std::fs::write(&file, guard).unwrap();
    assert_eq!(load().unwrap().sha256(), guard_digest);
    std::fs::write(&file, wordcount).unwrap();
    let again = load().unwrap();
    assert_eq!(
        (again.sha256(), &again.metadata),
        (first.sha256(), &first.metadata)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapped_cache_entry_replaced_or_removed_under_a_running_plugin_does_not_disturb_it() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let bytes = example("toolwright-example-wordcount");
    let path = PathBuf::from("wordcount.wasm");
    drop(
        PluginHost::new(Some(cache.path().to_path_buf()))
            .unwrap()
            .load_bytes(&path, bytes)
            .unwrap(),
    );
    let host = PluginHost::new(Some(cache.path().to_path_buf())).unwrap();
    let plugin = host.load_bytes(&path, bytes).unwrap();
    assert_eq!(plugin.compilation, Compilation::Cached, "mapped from the cache");
    let entry = cached_components(cache.path()).remove(0);
    let tools: Vec<_> = plugin
        .tool_definitions(&toolwright::wasm::WasmGrants::none(ws.path()))
        .iter()
        .map(|d| toolwright::definition::wrap_tool_definition(d, None))
        .collect();
    let count = |id: &str| {
        let message = AssistantMessage {
            tool_calls: vec![ToolCall::new(id, "word_count", json!({"text": "one two three"}))],
            ..Default::default()
        };
        let tools = tools.clone();
        async move {
            let outcome = Pipeline::new()
                .execute_tool_calls(&tools, &message, &EventLog::new(), &CancellationToken::new())
                .await;
            outcome.messages[0].content[0].as_text().unwrap().to_owned()
        }
    };
    let before = count("w1").await;
    // Another start writes the entry again (a temporary file renamed over it), another prunes it away.
    let tmp = cache.path().join(".replacement.tmp");
    std::fs::write(&tmp, vec![0u8; 4096]).unwrap();
    std::fs::rename(&tmp, &entry).unwrap();
    assert_eq!(
        count("w2").await,
        before,
        "the mapping keeps the old file's bytes"
    );
    std::fs::remove_file(&entry).unwrap();
    assert_eq!(count("w3").await, before);
}

/// Replace the file at `path` as another start writing the cache would: by renaming a new file over it (a
/// mapped cache entry is never written in place).
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// One `word_count` call to `plugin`'s tool: whether it failed, and its text.
async fn count_words(plugin: &toolwright::wasm::Plugin, ws: &Path) -> (bool, String) {
    let tools: Vec<_> = plugin
        .tool_definitions(&toolwright::wasm::WasmGrants::none(ws))
        .iter()
        .map(|d| toolwright::definition::wrap_tool_definition(d, None))
        .collect();
    let message = AssistantMessage {
        tool_calls: vec![ToolCall::new("w", "word_count", json!({"text": "one two three"}))],
        ..Default::default()
    };
    let outcome = Pipeline::new()
        .execute_tool_calls(&tools, &message, &EventLog::new(), &CancellationToken::new())
        .await;
    let result = &outcome.messages[0];
    (result.is_error, result.content[0].as_text().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_plugin_links_at_its_first_call_and_a_broken_entry_is_rebuilt_from_its_file() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wordcount.wasm");
    std::fs::write(&file, example("toolwright-example-wordcount")).unwrap();
    let load = || {
        PluginHost::new(Some(cache.path().to_path_buf()))
            .unwrap()
            .load_file(&file)
            .unwrap()
    };
    let first = load();
    assert_eq!(first.compilation, Compilation::Compiled);
    let expected = count_words(&first, ws.path()).await;
    assert!(!expected.0, "{expected:?}");
    let entry = cached_components(cache.path()).remove(0);
    // Loaded from its cached description alone: the entry is not mapped until the first call, which finds it
    // broken and compiles the file again.
    let second = load();
    assert_eq!(second.compilation, Compilation::Cached);
    replace(&entry, b"garbage");
    assert_eq!(count_words(&second, ws.path()).await, expected);
    assert!(
        std::fs::metadata(&entry).unwrap().len() > 7,
        "the entry is written again"
    );
    // A broken entry and a plugin file that changed since the load: the call fails, naming the change.
    let third = load();
    replace(&entry, b"garbage");
    std::fs::write(&file, example("toolwright-example-guard")).unwrap();
    let (failed, text) = count_words(&third, ws.path()).await;
    assert!(failed, "{text}");
    assert!(
        text.contains("cannot be loaded") && text.contains("the file changed after it was loaded"),
        "{text}"
    );
    assert!(matches!(third.prepare(), Err(PluginError::Changed { .. })));
    // The other plugins of the host are not disturbed, and a new load sees the new file.
    assert_eq!(count_words(&second, ws.path()).await, expected);
    assert_eq!(load().metadata.name, "toolwright-example-guard");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_plugin_blocks_rewrites_and_redacts_in_the_call_path() {
    let ws = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("1-guard.wasm"),
        example("toolwright-example-guard"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("2-redact.wasm"),
        example("toolwright-example-redact"),
    )
    .unwrap();
    // The guard may rewrite bash (a handler may block any call, but rewrite only what it is granted).
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[plugins.toolwright-example-guard]\nrewrite = [\"bash\"]\n",
    )
    .unwrap();
    let mut options = options(ws.path(), dir.path());
    options.policy_files.push(policy);
    let toolset = Toolset::load(&options).unwrap();
    assert!(toolset.errors.is_empty(), "{:?}", toolset.errors);
    assert!(toolset.plugins.iter().all(|p| p.is_handler && p.tools.is_empty()));
    let calls = [
        ("h1", "rm -rf ./everything"),
        ("h2", "sudo echo hi"),
        ("h3", "echo SECRET=hunter2 ok AKIAIOSFODNN7EXAMPLE"),
        ("h4", "echo __guard_trap__"),
        ("h5", "echo __redact_trap__"),
    ];
    let message = AssistantMessage {
        tool_calls: calls
            .iter()
            .map(|(id, cmd)| ToolCall::new(*id, "bash", json!({"command": cmd})))
            .collect(),
        ..Default::default()
    };
    let log = EventLog::new();
    let outcome = toolset
        .pipeline()
        .execute_tool_calls(&toolset.agent_tools(), &message, &log, &CancellationToken::new())
        .await;
    let text = |i: usize| outcome.messages[i].content[0].as_text().unwrap().to_owned();
    assert_eq!(text(0), "guard: recursive deletes are not allowed");
    assert!(outcome.messages[0].is_error && outcome.messages[0].duration_ms.is_none());
    assert_eq!(text(1), "hi\n", "sudo was dropped before the command ran");
    assert_eq!(text(2), "SECRET=[redacted] ok [redacted]\n");
    assert_eq!(
        outcome.results[2].structured_content, None,
        "new content without structured content drops it"
    );
    assert!(
        text(3).starts_with("The handler plugin toolwright-example-guard failed: it trapped"),
        "{}",
        text(3)
    );
    assert!(outcome.messages[3].is_error);
    assert_eq!(
        text(4),
        "__redact_trap__\n",
        "a failing tool_result handler is skipped"
    );
    // The start event still shows the raw arguments.
    let start = log
        .events()
        .into_iter()
        .find(|e| e.tool_call_id() == "h2")
        .unwrap();
    assert_eq!(
        serde_json::to_value(start).unwrap()["args"],
        json!({"command": "sudo echo hi"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_gets_what_it_requests_only_once_a_policy_grants_it() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("src")).unwrap();
    std::fs::write(
        ws.path().join("src/main.rs"),
        "fn main() {\n    // TODO: greet\n}\n",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("todos.wasm"), example("toolwright-example-todos")).unwrap();
    async fn run(toolset: Toolset) -> (bool, String, Toolset) {
        let call = AssistantMessage {
            tool_calls: vec![ToolCall::new("t1", "todos", json!({}))],
            ..Default::default()
        };
        let out = Pipeline::new()
            .execute_tool_calls(
                &toolset.agent_tools(),
                &call,
                &EventLog::new(),
                &CancellationToken::new(),
            )
            .await;
        (
            out.messages[0].is_error,
            out.messages[0].content[0].as_text().unwrap().to_owned(),
            toolset,
        )
    }

    let (is_error, text, toolset) = run(Toolset::load(&options(ws.path(), dir.path())).unwrap()).await;
    assert!(is_error, "{text}");
    let refused = toolset.grants[0].1.decisions[0].refused.clone().unwrap();
    assert_eq!(
        refused,
        "not granted: add read = [\".\"] under [plugins.toolwright-example-todos] in toolwright.toml"
    );

    std::fs::write(
        ws.path().join("toolwright.toml"),
        "[plugins.toolwright-example-todos]\nread = [\".\"]\n",
    )
    .unwrap();
    let mut granted = options(ws.path(), dir.path());
    granted.policy_files = vec![ws.path().join("toolwright.toml")];
    let (is_error, text, _) = run(Toolset::load(&granted).unwrap()).await;
    assert!(!is_error, "{text}");
    assert_eq!(text, "src/main.rs:2: TODO: greet");
}

/// A 1×1 24-bit BMP: a format models are not sent, so pi's normalisation converts it.
fn tiny_bmp() -> Vec<u8> {
    let mut bmp = Vec::new();
    bmp.extend(b"BM");
    bmp.extend(58u32.to_le_bytes());
    bmp.extend(0u32.to_le_bytes());
    bmp.extend(54u32.to_le_bytes());
    for field in [40u32, 1, 1] {
        bmp.extend(field.to_le_bytes());
    }
    bmp.extend(1u16.to_le_bytes());
    bmp.extend(24u16.to_le_bytes());
    for field in [0u32, 4, 2835, 2835, 0, 0] {
        bmp.extend(field.to_le_bytes());
    }
    bmp.extend([0x20, 0x40, 0x80, 0x00]);
    bmp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_a_tool_returns_are_normalised_by_the_session_without_handlers() {
    use base64::Engine as _;
    let ws = tempfile::tempdir().unwrap();
    let no_plugins = tempfile::tempdir().unwrap();
    let mut options = options(ws.path(), no_plugins.path());
    options.policy_files = Vec::new();
    options.project_policy = None;
    let toolset = Toolset::load(&options).unwrap();
    assert!(toolset.plugins.iter().all(|p| !p.is_handler));
    let data = base64::engine::general_purpose::STANDARD.encode(tiny_bmp());
    let snapshot = toolwright::AgentTool::new(
        "snapshot",
        "Returns a BMP.",
        json!({"type": "object"}),
        move |_run| {
            let data = data.clone();
            async move {
                Ok(toolwright::ToolResult {
                    content: vec![toolwright_sdk::Content::image(data, "image/bmp")],
                    details: Some(json!({"kept": true})),
                    ..Default::default()
                })
            }
        },
    );
    let mut tools = toolset.agent_tools();
    tools.push(snapshot);
    let message = AssistantMessage {
        tool_calls: vec![ToolCall::new("s1", "snapshot", json!({}))],
        ..Default::default()
    };
    let out = toolset
        .pipeline()
        .execute_tool_calls(&tools, &message, &EventLog::new(), &CancellationToken::new())
        .await
        .messages;
    let content = &out[0].content;
    assert_eq!(content.len(), 2, "{content:?}");
    assert!(
        matches!(&content[0], toolwright_sdk::Content::Image { mime_type, .. } if mime_type == "image/png"),
        "{content:?}"
    );
    assert_eq!(
        content[1].as_text(),
        Some("[Image converted from image/bmp to image/png.]")
    );
    assert_eq!(
        out[0].details,
        Some(json!({"kept": true})),
        "only the content changed: the details pass through, as in pi"
    );
}

#[test]
fn a_plugin_replaced_on_disk_is_metered_as_the_component_that_was_granted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probe.wasm");
    std::fs::copy(toolwright_tests::programs::PROBE, &path).unwrap();
    let host = PluginHost::new(Some(test_cache_dir())).unwrap();
    let plugin = host.load_file(&path).unwrap();
    // The same file: metered twin, same metadata.
    let metered = host.metered(&plugin).unwrap();
    assert_eq!(metered.metadata, plugin.metadata);
    // Replaced after loading: the grant was decided for the old component, which is what its metered twin
    // is, compiled from the cache (by its digest, never from the file's new bytes).
    std::fs::copy(toolwright_tests::programs::RAW, &path).unwrap();
    let again = host.metered(&plugin).unwrap();
    assert_eq!(
        (again.sha256(), &again.metadata),
        (plugin.sha256(), &plugin.metadata)
    );
    // With nothing cached the file is read again, and its new bytes are refused.
    let fresh = tempfile::tempdir().unwrap();
    std::fs::copy(toolwright_tests::programs::PROBE, &path).unwrap();
    let host = PluginHost::new(Some(fresh.path().to_path_buf())).unwrap();
    let plugin = host.load_file(&path).unwrap();
    std::fs::copy(toolwright_tests::programs::RAW, &path).unwrap();
    let err = host.metered(&plugin).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: the file changed after it was loaded; it is loaded again at the next start",
            path.display()
        )
    );
}

/// The recorded results of pi 1.6.0 for `tests/fixtures/handlers/<name>.json` (tests/oracle/record-handlers.mjs),
/// by call id; and the scenario's calls.
fn handler_fixture(
    name: &str,
) -> (
    Vec<ToolCall>,
    std::collections::HashMap<String, serde_json::Value>,
) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/handlers/{name}.json"));
    let fixture: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let calls = fixture["scenario"]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| ToolCall::new(c["id"].as_str().unwrap(), "bash", c["arguments"].clone()))
        .collect();
    let recorded = fixture["recorded"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap().to_owned(), r.clone()))
        .collect();
    (calls, recorded)
}

/// A result as the fixtures record it: `isError` and the content, images as their type, size and digest.
fn recorded_shape(message: &toolwright::ToolResultMessage) -> serde_json::Value {
    use base64::Engine as _;
    use sha2::Digest as _;
    let content: Vec<serde_json::Value> = message
        .content
        .iter()
        .map(|block| match block {
            toolwright_sdk::Content::Text { text } => json!({"type": "text", "text": text}),
            toolwright_sdk::Content::Image { data, mime_type } => {
                let bytes = base64::engine::general_purpose::STANDARD.decode(data).unwrap();
                json!({"type": "image", "mimeType": mime_type, "dataLength": bytes.len(),
                       "sha256": format!("{:x}", sha2::Sha256::digest(&bytes))})
            }
            other => panic!("a message holds pi's blocks only (the model's view): {other:?}"),
        })
        .collect();
    json!({"id": message.tool_call_id, "isError": message.is_error, "content": content})
}

/// The guard, the redactor and the bomb (built before the hooks returned `result`) as handlers, in that order,
/// with the probe's tool, in `ws`.
fn failing_handlers(ws: &Path) -> (tempfile::TempDir, Toolset) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("1-guard.wasm"),
        example("toolwright-example-guard"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("2-redact.wasm"),
        example("toolwright-example-redact"),
    )
    .unwrap();
    std::fs::copy(toolwright_tests::programs::BOMB, dir.path().join("3-bomb.wasm")).unwrap();
    std::fs::copy(toolwright_tests::programs::PROBE, dir.path().join("4-probe.wasm")).unwrap();
    let toolset = Toolset::load(&options(ws, dir.path())).unwrap();
    assert!(toolset.errors.is_empty(), "{:?}", toolset.errors);
    assert_eq!(toolset.plugins.iter().filter(|p| p.is_handler).count(), 3);
    (dir, toolset)
}

async fn run_calls(toolset: &Toolset, calls: Vec<ToolCall>) -> Vec<toolwright::ToolResultMessage> {
    let message = AssistantMessage {
        tool_calls: calls,
        ..Default::default()
    };
    toolset
        .pipeline()
        .execute_tool_calls(
            &toolset.agent_tools(),
            &message,
            &EventLog::new(),
            &CancellationToken::new(),
        )
        .await
        .messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_fails_with_a_message_gives_pi_s_result_and_a_trap_stays_a_trap() {
    let ws = tempfile::tempdir().unwrap();
    let (_dir, toolset) = failing_handlers(ws.path());
    let (calls, recorded) = handler_fixture("failures");
    // `f2` throws a string, which only a JavaScript handler can (tests/tests/polyglot.rs checks the SDK's text).
    let calls: Vec<ToolCall> = calls.into_iter().filter(|c| c.id != "f2").collect();
    let mut calls_and_trap = calls.clone();
    calls_and_trap.push(ToolCall::new(
        "t1",
        "bash",
        json!({"command": "echo __guard_trap__"}),
    ));
    calls_and_trap.push(ToolCall::new(
        "t2",
        "bash",
        json!({"command": "echo __redact_trap__"}),
    ));
    let out = run_calls(&toolset, calls_and_trap).await;
    for (call, message) in calls.iter().zip(&out) {
        assert_eq!(recorded_shape(message), recorded[&call.id], "call {}", call.id);
    }
    // The failed `tool_call` handler blocked the call before it ran: no duration, as pi's immediate results.
    assert!(out[0].duration_ms.is_none());
    // A panic is a trap, in the host's words: one line, then the panic's message without where it was built.
    let trap = out[calls.len()].content[0].as_text().unwrap();
    assert_eq!(
        trap,
        "The handler plugin toolwright-example-guard failed: it trapped: it reached unreachable code (a panic, \
         an abort or an uncaught exception)\n\nThe plugin's last lines on stderr:\n\
         thread '<unnamed>' (1) panicked at lib.rs:40:9:\nguard asked to trap"
    );
    assert!(out[calls.len()].is_error);
    // A trapping `tool_result` handler is skipped as a failing one is.
    assert_eq!(
        out[calls.len() + 1].content[0].as_text(),
        Some("__redact_trap__\n")
    );
}

/// A BMP of `width` × `height` pixels, 24 bits, with its pixels (none for a header alone).
fn bmp(width: u32, height: u32, pixels: &[u8]) -> Vec<u8> {
    let mut bmp = Vec::new();
    bmp.extend(b"BM");
    bmp.extend((54 + pixels.len() as u32).to_le_bytes());
    bmp.extend(0u32.to_le_bytes());
    bmp.extend(54u32.to_le_bytes());
    for field in [40, width, height] {
        bmp.extend(field.to_le_bytes());
    }
    bmp.extend(1u16.to_le_bytes());
    bmp.extend(24u16.to_le_bytes());
    for field in [0u32, pixels.len() as u32, 2835, 2835, 0, 0] {
        bmp.extend(field.to_le_bytes());
    }
    bmp.extend(pixels);
    bmp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_of_any_type_from_handlers_and_plugin_tools_are_normalised_as_pi_does() {
    use base64::Engine as _;
    let ws = tempfile::tempdir().unwrap();
    let (_dir, toolset) = failing_handlers(ws.path());
    let (calls, recorded) = handler_fixture("images");
    let tiny = base64::engine::general_purpose::STANDARD.encode(bmp(1, 1, &[0x20, 0x40, 0x80, 0x00]));
    let huge = base64::engine::general_purpose::STANDARD.encode(bmp(6000, 5000, &[]));
    let mut all = calls.clone();
    all.push(ToolCall::new(
        "p1",
        "probe",
        json!({"action": "image", "target": "image/bmp", "data": tiny}),
    ));
    all.push(ToolCall::new(
        "h1",
        "bash",
        json!({"command": format!(": bomb image-as image/bmp {huge}")}),
    ));
    all.push(ToolCall::new(
        "p2",
        "probe",
        json!({"action": "image", "target": "image/bmp", "data": huge}),
    ));
    let out = run_calls(&toolset, all).await;
    let note = json!({"type": "text", "text": "[Image converted from image/bmp to image/png.]"});
    // The handler's BMP: a PNG (encoded here, so not pi's bytes) and pi's note.
    let i1 = recorded_shape(&out[0]);
    assert_eq!(recorded["i1"]["content"][0]["mimeType"], "image/png");
    assert_eq!(i1["content"][0]["mimeType"], "image/png", "{i1}");
    assert_eq!((&i1["content"][1], &recorded["i1"]["content"][1]), (&note, &note));
    assert_eq!(i1["isError"], recorded["i1"]["isError"]);
    // An image nothing can decode is kept as it is, byte for byte, as pi keeps it.
    assert_eq!(recorded_shape(&out[1]), recorded["i2"]);
    // A plugin tool's BMP likewise.
    let p1 = recorded_shape(&out[2]);
    assert_eq!(
        (&p1["content"][0]["mimeType"], &p1["content"][1]),
        (&json!("image/png"), &note),
        "{p1}"
    );
    // An image larger than the decoded-size limit is refused by its header, before anything is decoded.
    let omitted =
        "[Image omitted: 6000x5000 is more than the 25 megapixels an image may have to be decoded.]";
    for message in &out[3..] {
        assert_eq!(message.content.len(), 1, "{:?}", message.content);
        assert_eq!(message.content[0].as_text(), Some(omitted));
    }
}
