//! Replays every case of `tests/fixtures/builtins` (the built-in tools on a real workspace) through the same
//! pipeline `toolwright exec` runs, natively and as wasm plugins, and compares the events and the files left
//! behind with what pi 1.6.0 did (recorded by `tests/oracle/record-builtins.mjs`), and with each other.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use toolwright::toolset::BuiltinMode;
use toolwright_tests::golden::{builtin_fixtures, comparable, differences, parallel_phase_errors, replay};

async fn against_pi(mode: BuiltinMode) {
    let fixtures = builtin_fixtures();
    assert!(fixtures.len() >= 19);
    let mut failures = Vec::new();
    for (name, fixture) in &fixtures {
        let (events, files) = replay(fixture, mode).await;
        failures.extend(parallel_phase_errors(name, fixture, &events));
        let expected = comparable(fixture, &fixture.recorded.events);
        let actual = comparable(fixture, &events);
        failures.extend(differences(
            name,
            (&expected, &fixture.recorded.files),
            (&actual, &files),
        ));
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures differ from pi ({mode:?}):\n{}",
        failures.len(),
        fixtures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_builtins_match_pi_golden_fixtures() {
    against_pi(BuiltinMode::Native).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasm_builtins_match_pi_golden_fixtures() {
    against_pi(BuiltinMode::Wasm).await;
}

/// Parity: the same cases through both builds give the same events, byte for byte after normalisation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_and_wasm_builtins_give_identical_events() {
    let mut failures = Vec::new();
    let mut covered = std::collections::BTreeSet::new();
    for (name, fixture) in &builtin_fixtures() {
        let (native, native_files) = replay(fixture, BuiltinMode::Native).await;
        let (wasm, wasm_files) = replay(fixture, BuiltinMode::Wasm).await;
        covered.extend(fixture.calls.tool_calls.iter().map(|c| c.name.clone()));
        let (native, wasm) = (comparable(fixture, &native), comparable(fixture, &wasm));
        failures.extend(differences(name, (&native, &native_files), (&wasm, &wasm_files)));
    }
    for tool in toolwright::builtins::NAMES {
        assert!(covered.contains(tool), "no parity case calls `{tool}`");
    }
    assert!(
        failures.is_empty(),
        "native and wasm differ:\n{}",
        failures.join("\n")
    );
}

/// Where pi's JavaScript would go on with every property missing (`bash` runs `undefined`, `ls` lists the
/// workspace, `grep` searches for `undefined`) or write an empty file (`content: []`, an empty iterable for
/// Node), the built-ins refuse a rewrite instead; the same texts natively and as wasm, nothing written, and the
/// next call works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewrites_to_non_objects_are_refused_the_same_way_in_both_builds() {
    let fixture: toolwright_tests::golden::Fixture = serde_json::from_value(serde_json::json!({
        "files": {"a.txt": "hello\n", "undefined": "#!/bin/sh\ntouch pwned\n"},
        "calls": {"mode": "sequential", "toolCalls": [
            {"id": "b", "name": "bash", "arguments": {"command": "echo hi"}},
            {"id": "l", "name": "ls", "arguments": {}},
            {"id": "g", "name": "grep", "arguments": {"pattern": "hello"}},
            {"id": "n", "name": "ls", "arguments": {}},
            {"id": "w", "name": "write", "arguments": {"path": "a.txt", "content": "x"}},
            {"id": "ok", "name": "bash", "arguments": {"command": "echo after"}}
        ]},
        "rewrites": {
            "b": {"replaceArgs": [1, 2, 3]},
            "l": {"replaceArgs": "abc"},
            "g": {"replaceArgs": [1, 2, 3]},
            "n": {"replaceArgs": null},
            "w": {"setArgs": {"content": []}}
        },
        "recorded": {"events": [], "files": {}}
    }))
    .unwrap();
    let expected = [
        (
            "b",
            "The arguments of \"bash\" must be a JSON object, not an array",
        ),
        ("l", "The arguments of \"ls\" must be a JSON object, not a string"),
        (
            "g",
            "The arguments of \"grep\" must be a JSON object, not an array",
        ),
        (
            "n",
            "Cannot destructure property 'path' of 'object null' as it is null.",
        ),
        (
            "w",
            "The \"data\" argument must be of type string or an instance of Buffer, TypedArray, or DataView. \
             Received an instance of Array",
        ),
        ("ok", "after\n"),
    ];
    let mut both = Vec::new();
    for mode in [BuiltinMode::Native, BuiltinMode::Wasm] {
        let (events, files) = replay(&fixture, mode).await;
        let ends: Vec<(String, String, bool)> = events
            .iter()
            .filter(|e| e["type"] == "tool_execution_end")
            .map(|e| {
                let id = e["toolCallId"].as_str().unwrap().to_owned();
                let text = e["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                (id, text, e["isError"] == true)
            })
            .collect();
        let got: Vec<(&str, &str)> = ends.iter().map(|(i, t, _)| (i.as_str(), t.as_str())).collect();
        assert_eq!(got, expected, "{mode:?}");
        assert!(
            ends.iter().all(|(id, _, error)| *error == (id != "ok")),
            "{mode:?}: {ends:?}"
        );
        let names: Vec<&String> = files.keys().collect();
        assert_eq!(
            names,
            ["a.txt", "undefined"],
            "{mode:?}: nothing written, nothing run"
        );
        assert_eq!(files["a.txt"], "aGVsbG8K", "{mode:?}");
        both.push(events);
    }
    assert_eq!(both[0], both[1], "native and wasm differ");
}
