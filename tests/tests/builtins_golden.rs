//! Replays every case of `tests/fixtures/builtins` (the built-in tools on a real workspace) through the same
//! pipeline `toolwright exec` runs, natively and as wasm plugins, and compares the events and the files left
//! behind with what pi 1.6.0 did (recorded by `tests/oracle/record-builtins.mjs`), and with each other. The
//! cases of `tests/fixtures/powershell` (recorded by `tests/oracle/record-powershell.mjs`) run through the
//! `toolwright` binary itself, with `--allow +powershell` and a stand-in `pwsh` on its `PATH`.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::Path;

use serde_json::Value;
use toolwright::toolset::BuiltinMode;
use toolwright_tests::golden::{
    Fixture, builtin_fixtures, comparable, differences, exec, fixtures_in, parallel_phase_errors, replay,
};

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
    // `powershell` needs a stand-in `pwsh` on the host's PATH: its parity is checked through the binary
    // (`powershell_matches_pi_natively_and_as_wasm`).
    for tool in toolwright::builtins::ACTIVE_BY_DEFAULT {
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
    let fixture: Fixture = serde_json::from_value(serde_json::json!({
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

/// The `powershell` fixtures' stand-in `pwsh` written into a directory of its own (none for a fixture without
/// one), and the `PATH` that puts it first: the host's, without any directory that has a real `pwsh`.
fn pwsh_path(fixture: &Value) -> (tempfile::TempDir, String) {
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().unwrap();
    if let Some(script) = fixture["pwsh"].as_str() {
        let pwsh = bin.path().join("pwsh");
        std::fs::write(&pwsh, script).unwrap();
        std::fs::set_permissions(&pwsh, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let host = std::env::var("PATH").unwrap_or_default();
    let dirs: Vec<&str> = std::iter::once(bin.path().to_str().unwrap())
        .chain(host.split(':').filter(|d| !Path::new(d).join("pwsh").exists()))
        .collect();
    let path = dirs.join(":");
    (bin, path)
}

/// `powershell` as pi 1.6.0 runs it on Windows (the arguments it starts PowerShell with, what it makes of the
/// output, its text when there is no PowerShell), natively and as wasm, through `toolwright exec --allow
/// +powershell`; and the two builds identical.
#[test]
fn powershell_matches_pi_natively_and_as_wasm() {
    let exe = Path::new(env!("CARGO_BIN_EXE_toolwright-cli"));
    let mut failures = Vec::new();
    let mut names = Vec::new();
    for (name, fixture) in fixtures_in("powershell") {
        let raw: Value = serde_json::from_str(
            &std::fs::read_to_string(
                toolwright_tests::fixtures_dir().join(format!("powershell/{name}.json")),
            )
            .unwrap(),
        )
        .unwrap();
        // pi refuses every call outside Windows; Toolwright runs `pwsh` where it is installed (recorded for the
        // record, not compared).
        if raw["platform"] != "win32" {
            continue;
        }
        names.push(name.clone());
        let (_bin, path) = pwsh_path(&raw);
        let expected = comparable(&fixture, &fixture.recorded.events);
        let mut builds = Vec::new();
        for mode in [BuiltinMode::Native, BuiltinMode::Wasm] {
            let (events, files) = exec(exe, &fixture, mode, &path, &["--allow", "+powershell"]);
            let actual = comparable(&fixture, &events);
            failures.extend(differences(
                &format!("{name} ({mode:?})"),
                (&expected, &fixture.recorded.files),
                (&actual, &files),
            ));
            builds.push((actual, files));
        }
        failures.extend(differences(
            &format!("{name} (native against wasm)"),
            (&builds[0].0, &builds[0].1),
            (&builds[1].0, &builds[1].1),
        ));
    }
    assert_eq!(names, ["fake", "missing"]);
    assert!(
        failures.is_empty(),
        "powershell differs:\n{}",
        failures.join("\n")
    );
}

/// Without `--allow +powershell` the tool is registered but not active: a call is pi's `Tool powershell not
/// found`, and no `pwsh` starts even when one is on `PATH`.
#[test]
fn powershell_is_inactive_unless_selected() {
    let exe = Path::new(env!("CARGO_BIN_EXE_toolwright-cli"));
    let (name, fixture) = fixtures_in("powershell")
        .into_iter()
        .find(|(n, _)| n == "fake")
        .unwrap();
    let raw: Value = serde_json::from_str(
        &std::fs::read_to_string(toolwright_tests::fixtures_dir().join(format!("powershell/{name}.json")))
            .unwrap(),
    )
    .unwrap();
    let (_bin, path) = pwsh_path(&raw);
    for (args, active) in [
        (&[][..], false),
        (&["--allow", "powershell"][..], true),
        (&["--allow", "+powershell", "--deny", "power*"][..], false),
    ] {
        let (events, _) = exec(exe, &fixture, BuiltinMode::Native, &path, args);
        let end = events
            .iter()
            .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == "p1")
            .unwrap();
        let text = end["result"]["content"][0]["text"].as_str().unwrap();
        if active {
            assert!(text.ends_with("echo hello>\nhello\n"), "{args:?}: {text}");
        } else {
            assert_eq!(text, "Tool powershell not found", "{args:?}");
        }
    }
    // `toolwright tools` lists it either way, with the sandbox its programs run in, as for `bash`.
    for (args, state) in [(&[][..], false), (&["--allow", "+powershell"][..], true)] {
        let ws = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(exe)
            .args(["tools", "--json", "--no-default-plugins", "--cwd"])
            .arg(ws.path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let tools: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(names[..8], toolwright::builtins::NAMES, "pi's order");
        let powershell = &tools[2];
        assert_eq!(powershell["active"], state, "{args:?}");
        assert_eq!(powershell["sandbox"], tools[1]["sandbox"], "{args:?}");
        assert!(powershell["sandbox"]["mode"].is_string(), "{powershell}");
    }
}

/// The stand-in `pwsh` runs in the built-ins' sandbox, as `bash`'s programs do: it cannot read a secret nor
/// write outside the workspace and the temporary directory, natively or as wasm, and the model is told which
/// grant would allow it.
#[test]
fn powershell_programs_run_in_the_builtins_sandbox() {
    let exe = Path::new(env!("CARGO_BIN_EXE_toolwright-cli"));
    let raw: Value = serde_json::from_str(
        &std::fs::read_to_string(toolwright_tests::fixtures_dir().join("powershell/fake.json")).unwrap(),
    )
    .unwrap();
    let (_bin, path) = pwsh_path(&raw);
    let secrets = tempfile::tempdir().unwrap();
    std::fs::write(secrets.path().join("key"), "the secret\n").unwrap();
    // Outside the workspace and the temporary directory.
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let policy_dir = tempfile::tempdir().unwrap();
    let policy = policy_dir.path().join("toolwright.toml");
    std::fs::write(
        &policy,
        format!("[builtins]\nsecrets = [{:?}]\n", secrets.path().to_str().unwrap()),
    )
    .unwrap();
    let command = format!(
        "cat {}/key; echo escaped > {}/x",
        secrets.path().display(),
        outside.path().display()
    );
    let fixture: Fixture = serde_json::from_value(serde_json::json!({
        "files": {},
        "calls": {"toolCalls": [{"id": "s", "name": "powershell", "arguments": {"command": command}}]},
        "recorded": {"events": [], "files": {}}
    }))
    .unwrap();
    for mode in [BuiltinMode::Native, BuiltinMode::Wasm] {
        let policy = policy.to_str().unwrap();
        let (events, _) = exec(
            exe,
            &fixture,
            mode,
            &path,
            &["--allow", "+powershell", "--policy", policy],
        );
        let end = events.iter().find(|e| e["type"] == "tool_execution_end").unwrap();
        let text = end["result"]["content"][0]["text"].as_str().unwrap();
        assert!(!text.contains("the secret"), "{mode:?}: {text}");
        assert!(text.contains("Permission denied"), "{mode:?}: {text}");
        assert!(
            text.contains("[sandbox] This command ran in the workspace-write sandbox"),
            "{mode:?}: {text}"
        );
        assert!(
            !outside.path().join("x").exists(),
            "{mode:?}: wrote outside the grants"
        );
    }
}
