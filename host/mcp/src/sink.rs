//! What a running call sends to its client while it runs: partial results as `notifications/progress`, log
//! lines as `notifications/message`.
// MCP logging is deprecated by SEP-2577 in rmcp, yet it is how 2025-11-25 clients hear a tool's logs.
#![allow(deprecated)]

use std::sync::Mutex;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use serde_json::{Value, json};
use toolwright_core::pipeline::{EventSink, ToolLog};
use toolwright_core::tool::{BoxFuture, LogLevel};
use toolwright_core::types::{AgentEvent, ToolResult};

/// The level a client of a revision before 2026-07-28 hears when it has not chosen one (`logging/setLevel`, or
/// a per-request `io.modelcontextprotocol/logLevel`). A 2026-07-28 request without a level hears no log lines.
pub const DEFAULT_LOG_LEVEL: LoggingLevel = LoggingLevel::Info;

/// The rank of an MCP level, lowest first (RFC 5424's order, as MCP defines it).
pub(crate) fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Whether a line at `level` goes to a client that wants lines at `wanted` and above (`None`: no lines).
pub(crate) fn heard(level: LoggingLevel, wanted: Option<LoggingLevel>) -> bool {
    wanted.is_some_and(|wanted| rank(level) >= rank(wanted))
}

/// A tool's log level as MCP names it.
pub(crate) fn mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Warn => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
    }
}

/// The progress a partial result reports: `details.progress` (with `details.total` and `details.message` when
/// given) for a tool that counts its own progress, else the number of partial results so far, with the last
/// non-empty line of the partial text as the message.
pub(crate) fn progress_of(partial: &ToolResult, count: u64) -> (f64, Option<f64>, Option<String>) {
    let details = partial.details.as_ref();
    let number = |key: &str| details.and_then(|d| d.get(key)).and_then(Value::as_f64);
    if let Some(progress) = number("progress").filter(|p| p.is_finite()) {
        let total = number("total").filter(|t| t.is_finite());
        let message = details
            .and_then(|d| d.get("message"))
            .and_then(Value::as_str)
            .map(|m| m.chars().take(200).collect());
        return (progress, total, message);
    }
    let text = partial.text_content();
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    let message = (!last.is_empty()).then(|| last.chars().take(200).collect());
    (count as f64, None, message)
}

/// Sends one call's progress and logs to its client.
pub(crate) struct CallSink {
    pub peer: Peer<RoleServer>,
    /// The client's progress token, when it asked for progress.
    pub token: Option<ProgressToken>,
    /// The lowest level the client wants to hear; `None`: no log lines at all (a 2026-07-28 request that set no
    /// level in its `_meta`).
    pub level: Option<LoggingLevel>,
    pub count: Mutex<u64>,
    /// How the call's plugins ask the client (`ask`); none: they have nobody to ask (a task).
    pub input: Option<std::sync::Arc<dyn toolwright_core::client::ClientInput>>,
}

impl EventSink for CallSink {
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Nested calls' updates reach the client through their caller's, if it passes them on.
            let (
                Some(token),
                AgentEvent::ToolExecutionUpdate {
                    partial_result,
                    parent_tool_call_id: None,
                    ..
                },
            ) = (&self.token, &event)
            else {
                return;
            };
            let count = {
                let mut count = self.count.lock().unwrap_or_else(|p| p.into_inner());
                *count += 1;
                *count
            };
            let (progress, total, message) = progress_of(partial_result, count);
            let mut notification = ProgressNotificationParam::new(token.clone(), progress);
            notification.total = total;
            notification.message = message;
            if let Err(error) = self.peer.notify_progress(notification).await {
                tracing::debug!("cannot send progress: {error}");
            }
        })
    }

    fn log(&self, log: ToolLog) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let level = mcp_level(log.line.level);
            if !heard(level, self.level) {
                return;
            }
            // Nested calls' lines are the request's too: the logger names the tool that wrote them.
            let mut notification = LoggingMessageNotificationParam::new(level, json!(log.line.message));
            notification.logger = Some(log.tool_name);
            if let Err(error) = self.peer.notify_logging_message(notification).await {
                tracing::debug!("cannot send a log message: {error}");
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_the_tools_own_count_when_it_gives_one() {
        let mut partial = ToolResult::text("step two\n\n");
        assert_eq!(progress_of(&partial, 3), (3.0, None, Some("step two".into())));
        partial.details = Some(json!({"progress": 50, "total": 100, "message": "half"}));
        assert_eq!(progress_of(&partial, 3), (50.0, Some(100.0), Some("half".into())));
    }

    #[test]
    fn a_client_that_set_no_level_hears_no_line_and_one_that_did_hears_those_at_or_above_it() {
        assert!(!heard(LoggingLevel::Emergency, None));
        assert!(heard(LoggingLevel::Warning, Some(LoggingLevel::Warning)));
        assert!(heard(LoggingLevel::Error, Some(LoggingLevel::Warning)));
        assert!(!heard(LoggingLevel::Info, Some(LoggingLevel::Warning)));
    }

    #[test]
    fn levels_rank_as_mcp_orders_them() {
        assert!(rank(mcp_level(LogLevel::Debug)) < rank(DEFAULT_LOG_LEVEL));
        assert!(rank(mcp_level(LogLevel::Warn)) > rank(DEFAULT_LOG_LEVEL));
        assert_eq!(rank(LoggingLevel::Emergency), 7);
    }
}
