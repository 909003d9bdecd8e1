//! The audit record of one call: its trail from preflight to the final result, written when it settles (or,
//! for a call whose future was dropped before it settled, as `cancelled` when it is dropped).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::prepare::CallContext;
use super::texts;
use crate::audit::{AuditRecord, AuditSink, Origin, OriginKind, Outcome, Settled, Trail};
use crate::tool::HostFault;
use crate::types::{ToolCall, ToolResult};

/// One call's audit state: off (and free) when the pipeline has no sink.
pub(super) struct CallAudit {
    trail: Trail,
    open: Option<Open>,
}

/// What a record needs that the call's end does not bring.
struct Open {
    sink: Arc<dyn AuditSink>,
    call: ToolCall,
    parent: Option<String>,
    authority: Option<String>,
    origin: Option<Arc<Origin>>,
    started: SystemTime,
    clock: Instant,
}

impl CallAudit {
    /// Start auditing `call`, if the pipeline audits.
    pub(super) fn begin(ctx: &CallContext<'_>, call: &ToolCall) -> CallAudit {
        let Some(sink) = &ctx.pipeline.audit else {
            return CallAudit {
                trail: Trail::off(),
                open: None,
            };
        };
        // A tool without an origin was made by the embedding application from code of its own.
        let origin = ctx.tools.iter().find(|t| t.name() == call.name).map(|t| {
            t.origin().cloned().unwrap_or_else(|| {
                Arc::new(Origin {
                    kind: OriginKind::Embedder,
                    ..Default::default()
                })
            })
        });
        CallAudit {
            trail: Trail::on(),
            open: Some(Open {
                sink: sink.clone(),
                call: call.clone(),
                parent: ctx.parent.clone(),
                authority: ctx.authority.as_ref().map(|a| a.principal().to_owned()),
                origin,
                started: SystemTime::now(),
                clock: Instant::now(),
            }),
        }
    }

    /// The trail the call's steps and activity go to.
    pub(super) fn trail(&self) -> &Trail {
        &self.trail
    }

    /// Write the record of the call, settled with `result`.
    pub(super) fn finish(
        mut self,
        ctx: &CallContext<'_>,
        result: &ToolResult,
        is_error: bool,
        fault: Option<HostFault>,
    ) {
        if let Some(open) = self.open.take() {
            let outcome = outcome(ctx, result, is_error, fault);
            let error = (outcome != Outcome::Ok).then(|| result.text_content());
            open.write(&self.trail, outcome, error.as_deref());
        }
    }
}

impl Open {
    fn write(self, trail: &Trail, outcome: Outcome, error: Option<&str>) {
        let settled = Settled {
            started: self.started,
            duration_ms: (self.clock.elapsed().as_secs_f64() * 1000.0).round() as u64,
            call: &self.call,
            parent: self.parent.as_deref(),
            authority: self.authority.as_deref(),
            origin: self.origin.as_deref(),
            outcome,
            error,
        };
        self.sink.record(&AuditRecord::settle(settled, trail));
    }
}

impl Drop for CallAudit {
    /// A call whose future was dropped before it settled (a nested call whose caller went away, a server
    /// shutting down) still leaves its line.
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            open.write(&self.trail, Outcome::Cancelled, Some(texts::OPERATION_ABORTED));
        }
    }
}

/// How a call ended: the host's own verdict when it stopped the call, else the result's flag, an error counting
/// as cancelled when the batch was aborted (tools report their cancellation in their own words).
fn outcome(ctx: &CallContext<'_>, result: &ToolResult, is_error: bool, fault: Option<HostFault>) -> Outcome {
    if !is_error {
        return Outcome::Ok;
    }
    let aborted = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .is_some_and(|t| t == texts::OPERATION_ABORTED);
    match fault {
        _ if aborted => Outcome::Cancelled,
        Some(HostFault::Cancelled) => Outcome::Cancelled,
        Some(HostFault::Limit | HostFault::Timeout) => Outcome::Limit,
        _ if ctx.cancel.is_cancelled() => Outcome::Cancelled,
        _ => Outcome::Error,
    }
}
