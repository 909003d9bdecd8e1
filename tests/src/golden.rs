//! Replaying the built-in tool fixtures (`tests/fixtures/builtins`) and comparing events the way the CLI
//! contract does: exactly, except that in parallel batches each call's events are compared in order (end
//! events come in completion order).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use toolwright::hooks::BeforeToolCallResult;
use toolwright::toolset::{BuiltinMode, Toolset, ToolsetOptions};
use toolwright::{AssistantMessage, EventLog, ExecutionMode, Pipeline, StopReason, ToolCall};

use crate::{fixtures_dir, normalize, workspace};

/// A recorded fixture.
#[derive(Deserialize)]
pub struct Fixture {
    /// The workspace.
    pub files: Map<String, Value>,
    /// The calls file.
    pub calls: Calls,
    /// Unvalidated rewrites by a `before_tool_call` hook, per call id.
    #[serde(default)]
    pub rewrites: Map<String, Value>,
    /// The tools of the batch (default: the built-ins `toolwright exec` makes active,
    /// `builtins::ACTIVE_BY_DEFAULT`).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// What pi did.
    pub recorded: Recorded,
}

/// A calls file.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Calls {
    /// The calls.
    pub tool_calls: Vec<ToolCall>,
    /// The mode.
    #[serde(default)]
    pub mode: Option<ExecutionMode>,
    /// The stop reason.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
}

/// pi's events and the files it left.
#[derive(Deserialize)]
pub struct Recorded {
    /// Normalised events.
    pub events: Vec<Value>,
    /// Files after the batch.
    pub files: Map<String, Value>,
}

/// Every fixture of `tests/fixtures/builtins`, with its name.
pub fn builtin_fixtures() -> Vec<(String, Fixture)> {
    fixtures_in("builtins")
}

/// Every fixture of `tests/fixtures/<dir>`, with its name.
pub fn fixtures_in(dir: &str) -> Vec<(String, Fixture)> {
    let dir = fixtures_dir().join(dir);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .collect();
    paths.retain(|p| p.extension().is_some_and(|e| e == "json"));
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let text = std::fs::read_to_string(&path).expect("readable fixture");
            let fixture = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (name, fixture)
        })
        .collect()
}

/// A cache for compiled components shared by every test run (compiling in a debug build takes seconds): in the
/// target directory the tests were built with (`CARGO_TARGET_DIR` when it was set, so that a clone's tree gets
/// nothing written into it), else the workspace's `target/`.
pub fn test_cache_dir() -> PathBuf {
    match option_env!("CARGO_TARGET_DIR").filter(|dir| Path::new(dir).is_absolute()) {
        Some(dir) => PathBuf::from(dir).join("toolwright-test-cache"),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("target")
            .join("toolwright-test-cache"),
    }
}

/// A fresh workspace with `fixture`'s files, and its path as given and as resolved (what normalising replaces).
fn workspace_of(fixture: &Fixture) -> (tempfile::TempDir, [String; 2]) {
    let ws = workspace::create(&fixture.files);
    let cwd = ws.path().to_string_lossy().into_owned();
    let real = std::fs::canonicalize(ws.path())
        .expect("a real path")
        .to_string_lossy()
        .into_owned();
    (ws, [cwd, real])
}

/// Run `fixture` in a fresh workspace with the built-ins in `mode`: the normalised events and the files left.
pub async fn replay(fixture: &Fixture, mode: BuiltinMode) -> (Vec<Value>, Map<String, Value>) {
    let (ws, [cwd, real]) = workspace_of(fixture);
    let mut options = ToolsetOptions::new(ws.path());
    options.plugin_dirs.clear();
    options.builtins = mode;
    options.cache_dir = Some(test_cache_dir());
    let toolset = Toolset::load(&options).expect("the built-ins load");
    assert!(toolset.errors.is_empty(), "{:?}", toolset.errors);
    let message = AssistantMessage {
        tool_calls: fixture.calls.tool_calls.clone(),
        stop_reason: fixture.calls.stop_reason.unwrap_or_default(),
    };
    let mut pipeline = Pipeline::new().with_tool_execution(fixture.calls.mode.unwrap_or_default());
    if !fixture.rewrites.is_empty() {
        pipeline = pipeline.with_before_tool_call(rewriting(fixture.rewrites.clone()));
    }
    let log = EventLog::new();
    let tools: Vec<_> = toolset
        .agent_tools()
        .into_iter()
        .filter(|t| match &fixture.tools {
            Some(names) => names.iter().any(|n| n == t.name()),
            None => toolwright::builtins::ACTIVE_BY_DEFAULT.contains(&t.name()),
        })
        .collect();
    pipeline
        .execute_tool_calls(&tools, &message, &log, &CancellationToken::new())
        .await;
    let events = log
        .events()
        .into_iter()
        .map(|e| serde_json::to_value(e).expect("serialisable"))
        .collect();
    let files = workspace::snapshot(ws.path(), Path::new(""));
    (normalize::builtin_events(events, &[cwd, real]), files)
}

/// Run `fixture` through the `toolwright` binary `exe` (`toolwright exec`, the built-ins in `mode`, `args` after
/// the calls file) with `path` as its `PATH`: the normalised events and the files left, as [`replay`] gives them.
/// What [`replay`] cannot do in-process: give the host another `PATH` (a stand-in program) or a policy file.
pub fn exec(
    exe: &Path,
    fixture: &Fixture,
    mode: BuiltinMode,
    path: &str,
    args: &[&str],
) -> (Vec<Value>, Map<String, Value>) {
    let (ws, [cwd, real]) = workspace_of(fixture);
    let calls = tempfile::tempdir().expect("a temp dir");
    let calls_file = calls.path().join("calls.json");
    let calls_json = serde_json::json!({
        "toolCalls": fixture.calls.tool_calls,
        "mode": fixture.calls.mode.unwrap_or_default(),
    });
    std::fs::write(&calls_file, calls_json.to_string()).expect("calls written");
    let mode = match mode {
        BuiltinMode::Native => "native",
        BuiltinMode::Wasm => "wasm",
    };
    let out = std::process::Command::new(exe)
        .args(["exec", "--no-default-plugins", "--builtins", mode, "--cwd"])
        .arg(ws.path())
        .arg("--cache-dir")
        .arg(test_cache_dir())
        .arg(&calls_file)
        .args(args)
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("toolwright runs");
    assert!(
        out.status.success(),
        "toolwright exec failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a JSON line"))
        .filter(|e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("tool_execution_"))
                || (e["type"] == "message_end" && e["message"]["role"] == "toolResult")
        })
        .collect();
    let files = workspace::snapshot(ws.path(), Path::new(""));
    (normalize::builtin_events(events, &[cwd, real]), files)
}

/// A `before_tool_call` hook that rewrites arguments as `tests/oracle/record-builtins.mjs` does: `setArgs` merged
/// in, `deleteArgs` removed, or `replaceArgs` handed on instead; none of it is validated again (pi's rule).
fn rewriting(rules: Map<String, Value>) -> toolwright::hooks::BeforeToolCall {
    let rules = std::sync::Arc::new(rules);
    toolwright::before_tool_call(move |ctx, _cancel| {
        let rule = rules.get(&ctx.tool_call.id).cloned();
        async move {
            let Some(rule) = rule else { return Ok(None) };
            if let Some(replacement) = rule.get("replaceArgs") {
                return Ok(Some(BeforeToolCallResult::rewrite(replacement.clone())));
            }
            let mut args = ctx.args.clone();
            if let Value::Object(map) = &mut args {
                if let Some(Value::Object(set)) = rule.get("setArgs") {
                    map.extend(set.clone());
                }
                for key in rule
                    .get("deleteArgs")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    map.shift_remove(key.as_str().unwrap_or_default());
                }
            }
            Ok(Some(BeforeToolCallResult::rewrite(args)))
        }
    })
}

/// The events in the form they are compared in: per call in parallel batches (first and last update only).
pub fn comparable(fixture: &Fixture, events: &[Value]) -> Vec<Value> {
    let parallel = fixture.calls.mode.unwrap_or_default() == ExecutionMode::Parallel
        && fixture.calls.stop_reason != Some(StopReason::Length);
    let events: Vec<Value> = events.iter().cloned().map(normalize::integers).collect();
    if parallel { by_call(&events) } else { events }
}

/// Events grouped by call id, each group in emission order with only its first and last update.
fn by_call(events: &[Value]) -> Vec<Value> {
    let mut groups: Vec<(Value, Vec<Value>)> = Vec::new();
    for e in events {
        let id = e
            .get("toolCallId")
            .or_else(|| e.pointer("/message/toolCallId"))
            .cloned()
            .unwrap_or_default();
        match groups.iter_mut().find(|(k, _)| *k == id) {
            Some((_, g)) => g.push(e.clone()),
            None => groups.push((id, vec![e.clone()])),
        }
    }
    groups
        .into_iter()
        .map(|(_, g)| {
            let updates: Vec<usize> = (0..g.len())
                .filter(|&i| g[i]["type"] == "tool_execution_update")
                .collect();
            let keep =
                |i: &usize| updates.len() < 3 || Some(i) == updates.first() || Some(i) == updates.last();
            Value::Array(
                g.into_iter()
                    .enumerate()
                    .filter(|(i, _)| !updates.contains(i) || keep(i))
                    .map(|(_, e)| e)
                    .collect(),
            )
        })
        .collect()
}

/// The differences between two event lists (and file sets), as readable lines; empty when they match.
pub fn differences(
    name: &str,
    expected: (&[Value], &Map<String, Value>),
    actual: (&[Value], &Map<String, Value>),
) -> Vec<String> {
    let mut out = Vec::new();
    for (i, (e, a)) in expected.0.iter().zip(actual.0).enumerate() {
        if e != a {
            out.push(format!(
                "{name}: event {i} differs\n  expected: {}\n  actual:   {}",
                serde_json::to_string(e).unwrap_or_default(),
                serde_json::to_string(a).unwrap_or_default()
            ));
            break;
        }
    }
    if expected.0.len() != actual.0.len() {
        out.push(format!(
            "{name}: {} events, expected {}",
            actual.0.len(),
            expected.0.len()
        ));
    }
    if expected.1 != actual.1 {
        out.push(format!(
            "{name}: files differ\n  expected: {:?}\n  actual:   {:?}",
            expected.1, actual.1
        ));
    }
    out
}

/// In a parallel batch the result messages come last, all of them.
pub fn parallel_phase_errors(name: &str, fixture: &Fixture, events: &[Value]) -> Vec<String> {
    let parallel = fixture.calls.mode.unwrap_or_default() == ExecutionMode::Parallel
        && fixture.calls.stop_reason != Some(StopReason::Length);
    let first_message = events
        .iter()
        .position(|e| e["type"] == "message_end")
        .unwrap_or(events.len());
    if parallel && events[first_message..].iter().any(|e| e["type"] != "message_end") {
        return vec![format!("{name}: a tool event follows the first result message")];
    }
    Vec::new()
}
