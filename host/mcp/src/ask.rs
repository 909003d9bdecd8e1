//! Grants asked through the client ([`toolwright_core::ask`]): when a plugin's call ends refused a file,
//! directory or program it declared it needs, the policy asks (`[ask] grants = true` in the user's policy), and
//! the client declared the `elicitation` capability (2025-11-25), the server asks the user with
//! `elicitation/create` — allow once, for this session, always, or deny — and on approval runs the call again with
//! the grant.
//!
//! The call runs again from the start under a new call id: what it did before it was refused (files written
//! within its grants, programs started) it may do again. A call allowed once runs alone (as a sequential tool
//! does), so no other call shares the grant. Deny, a declined or cancelled question, or an answer that is not one
//! of the choices leaves the refusal as it was. Every question and answer is an audit record of its own.
//!
//! A host the built-ins' sandbox refused their programs (bash's `curl`) is asked about likewise, for the session
//! or always only: the call is not run again (a command's other effects would happen twice); its result is given
//! with a line saying the host is allowed now ([`builtins_allowed`]), and the model decides.

use std::sync::Arc;

use rmcp::model::{ElicitRequestParams, ElicitationAction};
use rmcp::service::{Peer, RoleServer};
use serde_json::json;
use toolwright_core::ToolDefinition;
use toolwright_core::ask::{Answer, Question, RefusalBook, Refused, Scope, Subject};
use toolwright_core::audit::{AuditRecord, AuditSink, Outcome, Stage, Step, Verdict};

/// How many questions one call may lead to (a call refused again after an approval may ask about the next
/// refusal).
pub const MAX_QUESTIONS_PER_CALL: usize = 4;

/// How long the server waits for the user's answer before it gives up (the refusal stands).
pub const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// What the server asks with and what an approval does: implemented by whoever holds the plugins and the policy
/// (the command line's `toolwright mcp`).
pub trait GrantAsker: Send + Sync {
    /// The question about what a call of `subject` was refused, none when nothing may be asked.
    fn question(&self, subject: &Subject, refused: &[Refused]) -> Option<Question>;
    /// The plugin's tools with every grant kept for it and the grants of `questions`, for one call: the grants
    /// allowed once so far in the call, all about the called tool's own plugin.
    fn once(&self, questions: &[Question]) -> Option<Vec<ToolDefinition>>;
    /// Keep the question's grant while the server runs: the plugin's tools with every grant kept for it.
    fn session(&self, question: &Question) -> Option<Vec<ToolDefinition>>;
    /// Write the question's grant to the user's policy file (the editor `toolwright plugins add` uses, pinning the
    /// plugin's digest) and keep it while the server runs: the plugin's tools with it.
    fn always(&self, question: &Question) -> Result<Vec<ToolDefinition>, String>;
}

/// Asking for grants: where the host records refusals, and who answers for the plugins and the policy.
#[derive(Clone)]
pub struct Asking {
    /// The refusals of calls, by call id (the toolset's options hold the same book).
    pub refusals: RefusalBook,
    /// The questions and what approvals do.
    pub asker: Arc<dyn GrantAsker>,
}

/// The JSON schema of the answer to `question`: one of its choices.
fn requested_schema(question: &Question) -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "answer": {
                "type": "string",
                "title": "Answer",
                "oneOf": question
                    .choices()
                    .iter()
                    .map(|(value, title)| json!({ "const": value, "title": title }))
                    .collect::<Vec<_>>(),
            }
        },
        "required": ["answer"],
    })
}

/// The `elicitation/create` parameters of `question`.
fn form(question: &Question) -> serde_json::Value {
    json!({
        "mode": "form",
        "message": question.text(),
        "requestedSchema": requested_schema(question),
    })
}

/// The key of the question among an `input_required` result's requests (and of its answer among the input
/// responses).
pub const INPUT_KEY: &str = "grant";

/// `question` as the input request of an `input_required` result (2026-07-28).
pub(crate) fn input_request(question: &Question) -> Option<rmcp::model::InputRequest> {
    let request = json!({ "method": "elicitation/create", "params": form(question) });
    serde_json::from_value(request)
        .inspect_err(|error| tracing::warn!("cannot make the question: {error}"))
        .ok()
}

/// Whether a 2026-07-28 request declared that its client answers elicitation.
pub(crate) fn request_elicits(meta: &rmcp::model::RequestMetaObject) -> bool {
    meta.client_capabilities()
        .is_some_and(|c| c.elicitation.is_some())
}

/// What comes of a call's refusal: the question for a 2026-07-28 client, or the call to run again.
pub(crate) enum Asked {
    /// Put to the client as an `input_required` result.
    InputRequired(Box<Question>),
    /// Allowed: run the call again.
    Rerun(Rerun),
    /// A built-ins' host allowed: the call's result stands, with this line after it ([`builtins_allowed`]).
    Allowed(String),
}

/// The id to run a call again under, and the tools for that call alone (allowed once).
pub(crate) type Rerun = (String, Option<Vec<ToolDefinition>>);

/// What a retried 2026-07-28 call's request state and answer come to.
pub(crate) enum Answered {
    /// Denied or not answered: the refusal, as it was; a built-ins' host allowed: their result, with the line
    /// that says so.
    Result(Box<rmcp::model::CallToolResult>),
    /// Allowed: run the call again, its plugins knowing the answers they were given before the question; with
    /// the grants allowed once in the call so far.
    Rerun(Rerun, crate::input::Known, Vec<Question>),
    /// No question of ours: the call runs as any other.
    Nothing,
}

/// A question put to a 2026-07-28 client, until it answers.
pub(crate) struct Awaiting {
    pub(crate) question: Question,
    /// The refused call.
    pub(crate) call_id: String,
    /// Its result, to give back unchanged when the answer is no approval.
    pub(crate) refused: rmcp::model::CallToolResult,
    /// The answers its plugins had been given in the rounds before (the request state of their questions), for
    /// the call run again.
    pub(crate) known: crate::input::Known,
    /// The grants allowed once in the call before the question, which its run again keeps.
    pub(crate) once: Vec<Question>,
}

/// What is kept for 2026-07-28 calls between rounds, by handle: at most [`MAX_AWAITING`], each for
/// [`ANSWER_WAIT`], each taken once. The handle is unguessable (SipHash of a counter and the time under the
/// process's random keys, 128 bits): it carries nothing, so a client can neither forge nor alter what is kept, only
/// hand back a handle it was given, for the same call (the tool and its arguments).
pub(crate) struct HeldForCalls<T>(std::sync::Mutex<(u64, Vec<Held<T>>)>);

/// One thing kept: its handle, the call it is for, since when.
struct Held<T> {
    handle: String,
    tool: String,
    arguments: serde_json::Value,
    at: std::time::Instant,
    held: T,
}

impl<T> Default for HeldForCalls<T> {
    fn default() -> Self {
        HeldForCalls(std::sync::Mutex::new((0, Vec::new())))
    }
}

/// The questions put to 2026-07-28 clients, by request state.
pub(crate) type AwaitingAnswers = HeldForCalls<Awaiting>;

/// The grants allowed once for calls that go on in another round, by the handle their sealed state carries: the
/// questions answered, whose tools the call's next round is given again from the plugins loaded then (a reload in
/// between, a narrowed policy or a changed pin, holds).
pub(crate) type OnceGrants = HeldForCalls<Vec<Question>>;

/// The questions (and once-grants) kept for 2026-07-28 clients at once; the oldest goes first.
pub const MAX_AWAITING: usize = 64;

impl<T> HeldForCalls<T> {
    /// Keep `held` for the call of `tool` with `arguments`; its handle.
    pub(crate) fn keep(&self, tool: &str, arguments: &serde_json::Value, held: T) -> String {
        use std::hash::{BuildHasher, Hasher};
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.0 += 1;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut state = String::with_capacity(32);
        for half in 0..2u8 {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u8(half);
            hasher.write_u64(kept.0);
            hasher.write_u128(nanos);
            state.push_str(&format!("{:016x}", hasher.finish()));
        }
        kept.1.retain(|h| h.at.elapsed() < ANSWER_WAIT);
        if kept.1.len() >= MAX_AWAITING {
            kept.1.remove(0);
        }
        kept.1.push(Held {
            handle: state.clone(),
            tool: tool.to_owned(),
            arguments: arguments.clone(),
            at: std::time::Instant::now(),
            held,
        });
        state
    }

    /// What is kept under `handle`, taken, if it is about a call of `tool` with `arguments` and still fresh.
    pub(crate) fn take(&self, handle: &str, tool: &str, arguments: &serde_json::Value) -> Option<T> {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let at = kept.1.iter().position(|h| {
            h.handle == handle && h.tool == tool && h.arguments == *arguments && h.at.elapsed() < ANSWER_WAIT
        })?;
        Some(kept.1.remove(at).held)
    }
}

/// Whether the client declared that it answers `elicitation/create` (forms).
pub(crate) fn client_elicits(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .and_then(|info| info.capabilities.elicitation.as_ref().map(|_| ()))
        .is_some()
}

/// Ask the user `question` through the client. Any answer but one of [`CHOICES`] accepted is no approval.
pub(crate) async fn ask(peer: &Peer<RoleServer>, question: &Question) -> Answer {
    let params: ElicitRequestParams = match serde_json::from_value(form(question)) {
        Ok(params) => params,
        Err(error) => {
            tracing::warn!("cannot make the question: {error}");
            return Answer::Unanswered;
        }
    };
    match tokio::time::timeout(ANSWER_WAIT, peer.create_elicitation(params)).await {
        Ok(Ok(result)) => answer_of_result(question, &result),
        Ok(Err(error)) => {
            tracing::info!("the client did not answer the question: {error}");
            Answer::Unanswered
        }
        Err(_) => Answer::Unanswered,
    }
}

/// The answer an elicitation result gives to `question`: one of its choices accepted, or a decline (deny); anything
/// else is no answer.
fn answer_of_result(question: &Question, result: &rmcp::model::ElicitResult) -> Answer {
    match result.action {
        ElicitationAction::Accept => result
            .content
            .as_ref()
            .and_then(|c| c.get("answer"))
            .and_then(|a| a.as_str())
            .map_or(Answer::Unanswered, |choice| question.answer(choice)),
        ElicitationAction::Decline => Answer::Deny,
        _ => Answer::Unanswered,
    }
}

/// [`answer_of_result`] for a 2026-07-28 client's input response (an elicitation result as JSON).
pub(crate) fn answer_of(question: &Question, response: &serde_json::Value) -> Answer {
    serde_json::from_value::<rmcp::model::ElicitResult>(response.clone())
        .map_or(Answer::Unanswered, |result| answer_of_result(question, &result))
}

/// The line a built-ins' call's result ends with when the host it was refused is allowed now (`answer`, an
/// approval): the command was not run again.
pub fn builtins_allowed(question: &Question, answer: Answer) -> String {
    let (_, host) = question.grant.key_value();
    let how_long = match answer {
        Answer::Allow(Scope::Always) => "from now on (written to the policy file)",
        _ => "for this session",
    };
    format!(
        "The user allowed the built-ins' commands to connect to `{}` {how_long}. The command was not run again: run \
         it again to reach the host.",
        toolwright_core::text::escape(host)
    )
}

/// Who answers the questions of an MCP server, in the audit log.
pub const ASKED_THROUGH_CLIENT: &str = "the user, asked through the MCP client";

/// The tools an answer puts in place (none: the refusal stands); `earlier`: the grants allowed once before in the
/// same call, which a grant allowed once joins.
pub fn approved(
    asker: &dyn GrantAsker,
    question: &Question,
    answer: Answer,
    earlier: &[Question],
) -> Option<Vec<ToolDefinition>> {
    match answer {
        Answer::Allow(Scope::Once) => {
            let mut questions = earlier.to_vec();
            questions.push(question.clone());
            asker.once(&questions)
        }
        Answer::Allow(Scope::Session) => asker.session(question),
        Answer::Allow(Scope::Always) => match asker.always(question) {
            Ok(tools) => Some(tools),
            Err(error) => {
                tracing::warn!("cannot write the grant to the policy file: {error}");
                None
            }
        },
        Answer::Deny | Answer::Unanswered => None,
    }
}

/// Write the question about the call `call_id` of `tool`, and its answer (given by `by`), to `audit`; `rerun`:
/// the id the call runs again under.
pub fn record(
    audit: Option<&Arc<dyn AuditSink>>,
    by: &str,
    call_id: &str,
    tool: &str,
    question: &Question,
    answer: Answer,
    rerun: Option<&str>,
) {
    let Some(audit) = audit else { return };
    let verdict = match answer {
        Answer::Allow(_) => Verdict::Allowed,
        Answer::Deny | Answer::Unanswered => Verdict::Blocked,
    };
    let mut reason = format!("{} Answer: {}.", question.text(), answer.word());
    if let Some(rerun) = rerun {
        reason.push_str(&format!(" The call runs again as {rerun}."));
    }
    let record = AuditRecord {
        prev: None,
        time: toolwright_core::audit::rfc3339(std::time::SystemTime::now()),
        id: call_id.to_owned(),
        parent: None,
        tool: tool.to_owned(),
        authority: None,
        source: None,
        decision: vec![Step::new(by, Stage::Asked, verdict).with_reason(reason)],
        spawns: Vec::new(),
        connections: Vec::new(),
        questions: Vec::new(),
        omitted: 0,
        duration_ms: 0,
        outcome: match answer {
            Answer::Allow(_) => Outcome::Ok,
            _ => Outcome::Error,
        },
        error: None,
    };
    audit.record(&record);
}
