//! The record of the nested calls one model-issued call made (pi's `NestedCallRecorder`), and the
//! [`CallRecords`] the pipeline takes it from when it makes that call's result message.

use std::time::Instant;

use toolwright_sdk::js;

use crate::types::{NestedToolCallRecord, NestedToolCalls, ToolCall, ToolResultMessage, Usage};

/// Where the pipeline finds the record of the calls a model-issued call made, to put on its result message.
/// [`NestedCalls`](crate::nested::NestedCalls) is one; the pipeline holds none, it is given one per batch.
pub trait CallRecords: Send + Sync {
    /// Remove and return the record of the calls `call_id` made; `None` when it made none.
    fn take_record(&self, call_id: &str) -> Option<NestedRecord>;
}

/// pi's `NESTED_CALL_LIMITS`: what the record of one model-issued call keeps.
pub mod limits {
    /// Calls recorded; later ones are counted in the usage but left out of the record.
    pub const MAX_CALLS: usize = 256;
    /// Bytes of JSON arguments kept per call; larger arguments are recorded as their size.
    pub const MAX_ARGUMENT_BYTES_PER_CALL: usize = 8 * 1024;
    /// Bytes of JSON arguments kept over the whole record.
    pub const MAX_ARGUMENT_BYTES_TOTAL: usize = 32 * 1024;
    /// Characters of error text kept per call.
    pub const MAX_ERROR_CHARS: usize = 500;
}

/// pi's `NestedCallRecorder`: the nested calls of one model-issued call, at every depth, and their usage.
#[derive(Debug, Default)]
pub struct NestedCallRecorder {
    calls: Vec<NestedToolCallRecord>,
    /// When each call started; `None` for a call [sealed](NestedCallRecorder::seal) unfinished.
    started: Vec<Option<Instant>>,
    complete: bool,
    argument_bytes: usize,
    usage: Option<Usage>,
}

impl NestedCallRecorder {
    /// An empty, complete record.
    pub fn new() -> Self {
        NestedCallRecorder {
            complete: true,
            ..Default::default()
        }
    }

    /// Record `call` as it starts: its index, or `None` when the record is full (and now incomplete).
    pub fn start(&mut self, call: &ToolCall) -> Option<usize> {
        if self.calls.len() >= limits::MAX_CALLS {
            self.complete = false;
            return None;
        }
        let json = serde_json::to_string(&call.arguments).unwrap_or_else(|_| "{}".into());
        let bytes = json.len();
        let mut record = NestedToolCallRecord {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: None,
            arguments_bytes: None,
            status: "unfinished".into(),
            duration_ms: None,
            error: None,
        };
        if bytes > limits::MAX_ARGUMENT_BYTES_PER_CALL
            || self.argument_bytes + bytes > limits::MAX_ARGUMENT_BYTES_TOTAL
        {
            record.arguments_bytes = Some(bytes as u64);
            self.complete = false;
        } else {
            record.arguments = Some(call.arguments.clone());
            self.argument_bytes += bytes;
        }
        self.calls.push(record);
        self.started.push(Some(Instant::now()));
        Some(self.calls.len() - 1)
    }

    /// Settle the record `index` (from [`NestedCallRecorder::start`]): status, rounded duration, and the first
    /// 500 characters of the error text.
    pub fn finish(&mut self, index: Option<usize>, is_error: bool, text: &str) {
        let Some((index, started)) = index.and_then(|i| Some((i, self.started[i]?))) else {
            return;
        };
        let record = &mut self.calls[index];
        record.status = if is_error { "error" } else { "ok" }.into();
        record.duration_ms = Some((started.elapsed().as_secs_f64() * 1000.0).round() as u64);
        if is_error && !text.is_empty() {
            record.error = Some(js::utf16_prefix(text, limits::MAX_ERROR_CHARS).to_owned());
        }
    }

    /// The call `caller_id` has ended: the calls it made (at any depth) that are still running stay
    /// `unfinished` in the record whenever they end, as in pi, whose record is taken as the caller's result is
    /// made, before any call cancelled with the caller can wind down.
    pub fn seal(&mut self, caller_id: &str) {
        for (record, started) in self.calls.iter().zip(&mut self.started) {
            let below = record
                .id
                .strip_prefix(caller_id)
                .is_some_and(|rest| rest.starts_with('/'));
            if below && record.status == "unfinished" {
                *started = None;
            }
        }
    }

    /// Add a nested result's usage (counted even for calls the record left out).
    pub fn add_usage(&mut self, usage: &Usage) {
        self.usage = Some(match &self.usage {
            Some(total) => total.combine(usage),
            None => usage.clone(),
        });
    }

    /// The summed usage of every nested result.
    pub fn total_usage(&self) -> Option<&Usage> {
        self.usage.as_ref()
    }

    /// The record so far, or `None` when no call was made; `complete` is false when anything was left out or a
    /// call is still unfinished.
    pub fn snapshot(&self) -> Option<NestedToolCalls> {
        if self.calls.is_empty() && self.complete {
            return None;
        }
        Some(NestedToolCalls {
            calls: self.calls.clone(),
            complete: self.complete && self.calls.iter().all(|c| c.status != "unfinished"),
        })
    }
}

/// The calls a model-issued call made, taken for its result message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NestedRecord {
    /// The record (`nestedCalls`), when calls were made.
    pub calls: Option<NestedToolCalls>,
    /// Their summed usage, when any reported usage.
    pub usage: Option<Usage>,
}

impl NestedRecord {
    /// pi's `message_start` step: `nestedCalls` set and the usage added to the message's own.
    pub fn attach(self, message: &mut ToolResultMessage) {
        if let Some(calls) = self.calls {
            message.nested_calls = Some(calls);
        }
        if let Some(usage) = self.usage {
            message.usage = Some(match &message.usage {
                Some(own) => own.combine(&usage),
                None => usage,
            });
        }
    }
}
