//! The registry against pi 1.6.0: every fixture of `tests/fixtures/registry` (recorded by
//! `tests/oracle/record-registry.mjs`) replayed with the test program's tools linked natively and loaded as a
//! wasm component. Sets, pending names, hidden declarations, declarations, transcript tool changes, the
//! prompt's tool sections, tool_search results and loadout errors must all match.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolwright::native::NativeEnv;
use toolwright::registry::transcript::{ToolChanges, ToolDeclaration, ToolReference};
use toolwright::registry::{NoTools, Registry, RegistrySources, Selection, SharedRegistry};
use toolwright::{CallSink, ToolDefinition, ToolExecution};

#[derive(Clone, Copy, Debug)]
enum Variant {
    Native,
    Wasm,
}

fn program_tools(variant: Variant, cwd: &Path) -> Vec<ToolDefinition> {
    match variant {
        Variant::Native => toolwright_tests::programs::native(toolwright_test_loadout::tools(), cwd),
        Variant::Wasm => toolwright_tests::programs::wasm(toolwright_tests::programs::LOADOUT, cwd),
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

fn selection(scenario: &Value) -> Selection {
    let s = &scenario["selection"];
    let list = |key: &str| s.get(key).map(strings);
    Selection {
        tools: list("tools"),
        exclude_tools: list("excludeTools"),
        no_tools: match s.get("noTools").and_then(Value::as_str) {
            Some("all") => Some(NoTools::All),
            Some("builtin") => Some(NoTools::Builtin),
            _ => None,
        },
        default_tools: None,
    }
}

fn transcript(scenario: &Value) -> Vec<ToolChanges> {
    let declare = |name: String| ToolDeclaration {
        description: format!("{name} as recorded"),
        name,
        parameters: json!({"type": "object", "properties": {}}),
        constrained_sampling: None,
    };
    scenario["transcript"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .map(|m| ToolChanges {
                    tools_added: strings(&m["toolsAdded"]).into_iter().map(declare).collect(),
                    tools_removed: strings(&m["toolsRemoved"])
                        .into_iter()
                        .map(|name| ToolReference { name })
                        .collect(),
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn tool_search(registry: &SharedRegistry, step: &Value) -> Value {
    let definition = registry
        .read(|r| r.definition("tool_search").cloned())
        .expect("tool_search is registered");
    let mut params = json!({"query": step["query"]});
    if let Some(limit) = step.get("limit") {
        params["limit"] = limit.clone();
    }
    let run = ToolExecution {
        call_id: "search".into(),
        params,
        cancel: CancellationToken::new(),
        updates: CallSink::discard(),
    };
    match definition.execute.execute(run, None).await {
        Ok(result) => json!({"text": result.text_content(), "details": result.details}),
        Err(error) => json!({"error": error.message()}),
    }
}

fn snapshot(registry: &mut Registry, transcript: &mut Vec<ToolChanges>) -> Value {
    let changes = registry.tool_changes(transcript);
    if let Some(c) = &changes {
        transcript.push(c.clone());
    }
    let sections = registry.prompt_sections();
    let errors: Vec<Value> = registry
        .take_loadout_errors()
        .into_iter()
        .map(|e| json!({"event": e.event, "error": e.error}))
        .collect();
    json!({
        "registered": registry.tool_infos().iter().map(|t| json!({"name": t.name, "exposure": t.exposure})).collect::<Vec<_>>(),
        "active": registry.active_names(),
        "callable": registry.callable_names(),
        "hidden": registry.hidden_declarations(),
        "pending": registry.pending_names(),
        "declarations": registry.declarations(),
        "toolChanges": changes,
        "prompt": {"tools": sections.tools, "rules": sections.rules},
        "loadoutErrors": errors,
    })
}

async fn replay(fixture: &Value, variant: Variant) -> Vec<Value> {
    let scenario = &fixture["scenario"];
    let cwd = tempfile::tempdir().unwrap();
    let program = program_tools(variant, cwd.path());
    let named = |name: &str| program.iter().find(|d| d.name == name).cloned().unwrap();
    let sources = RegistrySources {
        builtins: toolwright::builtins::definitions(&NativeEnv::builtin(cwd.path()).unwrap()),
        extensions: strings(&scenario["tools"]).iter().map(|n| named(n)).collect(),
        embedder: Vec::new(),
    };
    let registry = Registry::with_tool_search(sources, &selection(scenario)).unwrap();
    registry.update(|r| {
        let messages = transcript(scenario);
        if r.uses_default_tools() {
            r.restore_from_transcript(&messages);
        }
    });
    // pi reports errors of the session's creation before anyone can listen.
    registry.update(|r| r.take_loadout_errors());
    let mut recorded_transcript = Vec::new();
    let mut steps = Vec::new();
    for step in scenario["steps"].as_array().unwrap() {
        let mut out = step.clone();
        match step["op"].as_str().unwrap() {
            "snapshot" => {}
            "setActiveTools" => registry.update(|r| r.set_active_tools(&strings(&step["names"]))),
            "register" => registry.update(|r| r.register_extension(named(step["name"].as_str().unwrap()))),
            "toolSearch" => out["result"] = tool_search(&registry, step).await,
            other => panic!("unknown op {other}"),
        }
        out["expect"] = registry.update(|r| snapshot(r, &mut recorded_transcript));
        steps.push(out);
    }
    steps
}

#[tokio::test]
async fn the_registry_matches_pi_for_native_and_wasm_tools() {
    let dir = toolwright_tests::fixtures_dir().join("registry");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the registry fixtures are missing");
    let mut failures = Vec::new();
    for file in &files {
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let expected = fixture["recorded"]["steps"].as_array().expect("recorded").clone();
        for variant in [Variant::Native, Variant::Wasm] {
            let actual = replay(&fixture, variant).await;
            for (i, (want, got)) in expected.iter().zip(&actual).enumerate() {
                let mut want = want.clone();
                for e in want["expect"]["loadoutErrors"].as_array_mut().unwrap() {
                    e.as_object_mut().unwrap().remove("extensionPath");
                }
                if want != *got {
                    for key in want["expect"].as_object().unwrap().keys() {
                        if want["expect"][key] != got["expect"][key] {
                            failures.push(format!(
                                "{} ({variant:?}) step {i} `{key}`:\n  pi:         {}\n  toolwright: {}",
                                file.file_name().unwrap().to_string_lossy(),
                                want["expect"][key],
                                got["expect"][key]
                            ));
                        }
                    }
                    if want.get("result") != got.get("result") {
                        failures.push(format!(
                            "{} ({variant:?}) step {i} result: {} vs {}",
                            file.display(),
                            want["result"],
                            got["result"]
                        ));
                    }
                }
            }
            assert_eq!(expected.len(), actual.len());
        }
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
