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
