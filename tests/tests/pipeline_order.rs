//! The ordering guarantees of a batch, asserted directly (the golden fixtures check them against pi as well).

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolwright::{AgentEvent, EventLog, ExecutionMode};
use toolwright_tests::scenario::Scenario;

fn slow_fast(mode: &str) -> Scenario {
    serde_json::from_value(json!({
        "mode": mode,
        "tools": [
            {"name": "slow", "steps": [{"sleep": 80}, {"return": "echo"}]},
            {"name": "fast", "steps": [{"sleep": 1}, {"return": "echo"}]}
        ],
        "calls": [
            {"id": "c1", "name": "slow", "arguments": {"value": "1"}},
            {"id": "c2", "name": "fast", "arguments": {"value": "2"}}
        ]
    }))
    .unwrap()
}

async fn run(scenario: &Scenario) -> Vec<(String, String)> {
    let abort = CancellationToken::new();
    let log = EventLog::new();
    let outcome = scenario
        .pipeline(&abort)
        .execute_tool_calls(&scenario.tools(&abort), &scenario.message(), &log, &abort)
        .await;
    let ids: Vec<_> = outcome.messages.iter().map(|m| m.tool_call_id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2"], "result messages always come in call order");
    log.events()
        .iter()
        .map(|e| (e.kind().to_owned(), e.tool_call_id().to_owned()))
        .collect()
}

fn pos(events: &[(String, String)], kind: &str, id: &str) -> usize {
    events.iter().position(|(k, i)| k == kind && i == id).unwrap()
}

#[tokio::test]
async fn parallel_ends_in_completion_order_and_messages_in_call_order() {
    let events = run(&slow_fast("parallel")).await;
    assert!(pos(&events, "tool_execution_start", "c2") < pos(&events, "tool_execution_end", "c2"));
    assert!(
        pos(&events, "tool_execution_end", "c2") < pos(&events, "tool_execution_end", "c1"),
        "{events:?}"
    );
    assert!(pos(&events, "message_end", "c1") < pos(&events, "message_end", "c2"));
    assert!(pos(&events, "tool_execution_end", "c1") < pos(&events, "message_start", "c1"));
}

#[tokio::test]
async fn sequential_finishes_each_call_before_the_next_starts() {
    let scenario = slow_fast("sequential");
    assert_eq!(scenario.mode, Some(ExecutionMode::Sequential));
    let events = run(&scenario).await;
    let kinds: Vec<String> = events.iter().map(|(k, i)| format!("{k}:{i}")).collect();
    assert_eq!(
        kinds,
        [
            "tool_execution_start:c1",
            "tool_execution_end:c1",
            "message_start:c1",
            "message_end:c1",
            "tool_execution_start:c2",
            "tool_execution_end:c2",
            "message_start:c2",
            "message_end:c2"
        ]
    );
}

#[tokio::test]
async fn a_panicking_tool_is_an_error_result_not_a_crash() {
    let tool = toolwright::AgentTool::new("panics", "Panics", json!({"type": "object"}), |_run| async {
        if true {
            panic!("index out of bounds");
        }
        Ok(toolwright::ToolResult::text("unreachable"))
    });
    let message = toolwright::AssistantMessage {
        tool_calls: vec![toolwright::ToolCall::new("c1", "panics", json!({}))],
        ..Default::default()
    };
    let log = EventLog::new();
    let outcome = toolwright::Pipeline::new()
        .execute_tool_calls(&[tool], &message, &log, &CancellationToken::new())
        .await;
    assert!(outcome.messages[0].is_error);
    assert_eq!(
        outcome.messages[0].content[0].as_text(),
        Some("execute of tool \"panics\" panicked: index out of bounds")
    );
    assert!(matches!(log.events().last(), Some(AgentEvent::MessageEnd { .. })));
}
