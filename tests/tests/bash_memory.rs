//! 200 MB of output from `bash` keep the host's memory bounded (a bounded tail in memory, the rest streamed to
//! the temp file), and no byte is lost. Alone in its binary, so the peak RSS it reads is its own.

#![allow(clippy::unwrap_used, clippy::print_stdout)] // Test code.

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolwright::{AssistantMessage, EventLog, Pipeline, ToolCall};

/// `VmHWM` (peak resident set) of this process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_megabytes_of_output_keep_memory_bounded() {
    const BYTES: u64 = 200 * 1024 * 1024;
    let ws = tempfile::tempdir().unwrap();
    let tools = toolwright::builtins::agent_tools(ws.path()).unwrap();
    // 64-byte lines: many lines and many bytes, so both limits are exceeded.
    let command =
        format!("yes 0123456789012345678901234567890123456789012345678901234567890 | head -c {BYTES}");
    let message = AssistantMessage {
        tool_calls: vec![ToolCall::new("big", "bash", json!({"command": command}))],
        ..Default::default()
    };
    let before = peak_rss_kib();
    let outcome = Pipeline::new()
        .execute_tool_calls(&tools, &message, &EventLog::new(), &CancellationToken::new())
        .await;
    let after = peak_rss_kib();
    let result = &outcome.results[0];
    assert!(!result.is_error(), "{}", result.text_content());
    let path = result.details.as_ref().unwrap()["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_owned();
    let size = std::fs::metadata(&path).unwrap().len();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(size, BYTES, "the temp file holds every byte");
    assert!(result.text_content().ends_with(&format!("Full output: {path}]")));
    let structured = result.structured_content.as_ref().unwrap();
    assert_eq!(structured["truncated"], true);
    assert_eq!(structured["full_output_path"], path.as_str());
    let growth_mib = (after.saturating_sub(before)) / 1024;
    println!(
        "peak RSS before {} MiB, after {} MiB, growth {growth_mib} MiB for {} MiB of output",
        before / 1024,
        after / 1024,
        BYTES >> 20
    );
    assert!(
        growth_mib < 64,
        "peak RSS grew by {growth_mib} MiB for 200 MiB of output"
    );
}
