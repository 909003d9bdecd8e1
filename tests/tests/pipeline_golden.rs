//! Replays every scenario of `tests/fixtures/pipeline` through Toolwright's pipeline and compares the events with
//! the ones pi 1.6.0 emitted for it (recorded by `tests/oracle/record-pipeline.mjs`).

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright::EventLog;
use toolwright_tests::{fixtures_dir, normalize, scenario::Scenario};

#[derive(Deserialize)]
struct Fixture {
    scenario: Scenario,
    recorded: Recorded,
}

#[derive(Deserialize)]
struct Recorded {
    events: Vec<Value>,
    terminate: bool,
}

async fn replay(scenario: &Scenario) -> (Vec<Value>, bool) {
    let abort = CancellationToken::new();
    let tools = scenario.tools(&abort);
    let log = EventLog::new();
    let outcome = scenario
        .pipeline(&abort)
        .execute_tool_calls(&tools, &scenario.message(), &log, &abort)
        .await;
    let events = log
        .events()
        .into_iter()
        .map(|e| normalize::event(serde_json::to_value(e).unwrap()))
        .collect();
    (events, outcome.terminate)
}

#[tokio::test]
async fn pipeline_matches_pi_golden_fixtures() {
    let dir = fixtures_dir().join("pipeline");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.retain(|p| p.extension().is_some_and(|e| e == "json"));
    paths.sort();
    assert!(
        paths.len() >= 30,
        "expected at least 30 pipeline fixtures, found {}",
        paths.len()
    );
    let mut failures = Vec::new();
    for path in &paths {
        let fixture: Fixture = serde_json::from_str(&std::fs::read_to_string(path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (events, terminate) = replay(&fixture.scenario).await;
        let expected: Vec<Value> = fixture
            .recorded
            .events
            .into_iter()
            .map(normalize::integers)
            .collect();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if events != expected {
            failures.push(format!(
                "{name}: events differ\n  expected: {}\n  actual:   {}",
                serde_json::to_string(&expected).unwrap(),
                serde_json::to_string(&events).unwrap()
            ));
        }
        // An aborted run never asks the model again, whatever the votes; pi's recording shows the run ending.
        if terminate != fixture.recorded.terminate && !name.starts_with("abort_") {
            failures.push(format!(
                "{name}: terminate {terminate}, pi {}",
                fixture.recorded.terminate
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures differ from pi:\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}
