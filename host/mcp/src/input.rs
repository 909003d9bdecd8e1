//! Plugins' questions for the client ([`toolwright_core::client`]): a form for the user, a message from the
//! client's model, the client's roots.
//!
//! - A client of a session (2025-11-25, stdio or an HTTP session) is asked at once ([`SessionInput`]): the
//!   server sends `elicitation/create`, `sampling/createMessage` or `roots/list` and the call waits for the
//!   answer ([`crate::ask::ANSWER_WAIT`] at most). A capability the client did not declare is an error the
//!   plugin sees.
//! - A 2026-07-28 request is stateless ([`RoundInput`]): the call stops at its first unanswered question, the
//!   client gets an `input_required` result with the questions and a request state, and calls again with the
//!   answers (`inputResponses`) and the state; the call runs again from the start, and every question answered
//!   so far is answered from them. A question needing a capability the request did not declare fails the request
//!   with `MissingRequiredClientCapability` (-32021). An answer that is not the method's result (a form's
//!   `ElicitResult`, sampling's `CreateMessageResult`, a `ListRootsResult`) is asked again.
//!
//! The request state ([`Rounds`]) carries the answers so far, sealed (HMAC-SHA-256 under a key drawn when the
//! server starts, rmcp's `RequestStateCodec`) and bound to the tool and its arguments for
//! [`crate::ask::ANSWER_WAIT`]: a client cannot alter it, nor carry it to another call. A state that does not
//! open is an invalid-params error.
// Sampling and roots are deprecated by SEP-2577 in rmcp, yet the 2026-07-28 revision still asks for them through
// `input_required`, and 2025-11-25 clients answer them.
#![allow(deprecated)]

use std::collections::BTreeMap;
use std::sync::Mutex;

use rmcp::model::{
    ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ErrorData, ListRootsResult, RequestStateCodec, SealOptions,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;
use sha2::Digest;
use toolwright_core::client::{AskError, ClientInput, InputRequest};
use toolwright_core::tool::BoxFuture;

use crate::ask::ANSWER_WAIT;

/// Whether `capabilities` include `capability` (`elicitation`, `sampling`, `roots`).
fn declared(capabilities: &ClientCapabilities, capability: &str) -> bool {
    match capability {
        "elicitation" => capabilities.elicitation.is_some(),
        "sampling" => capabilities.sampling.is_some(),
        "roots" => capabilities.roots.is_some(),
        _ => false,
    }
}

/// The methods of [`toolwright_core::client::METHODS`] `capabilities` answer.
fn answered_methods(capabilities: &ClientCapabilities) -> Vec<&'static str> {
    toolwright_core::client::METHODS
        .iter()
        .filter(|(_, capability)| declared(capabilities, capability))
        .map(|(method, _)| *method)
        .collect()
}

/// Whether `request`'s parameters are its method's (MCP's): the reason they are not.
fn well_formed(request: &InputRequest) -> Result<(), AskError> {
    let params = request.params.clone();
    let checked = match request.method.as_str() {
        "elicitation/create" => serde_json::from_value::<ElicitRequestParams>(params).map(drop),
        "sampling/createMessage" => serde_json::from_value::<CreateMessageRequestParams>(params).map(drop),
        _ => Ok(()),
    };
    checked.map_err(|e| {
        AskError::Failed(format!(
            "The question {:?} is not a valid {} request: {e}",
            request.key, request.method
        ))
    })
}

/// Whether `answer` is a result of `request`'s method.
fn fits(request: &InputRequest, answer: &Value) -> bool {
    let answer = answer.clone();
    match request.method.as_str() {
        "elicitation/create" => serde_json::from_value::<ElicitResult>(answer).is_ok(),
        "sampling/createMessage" => serde_json::from_value::<CreateMessageResult>(answer).is_ok(),
        "roots/list" => serde_json::from_value::<ListRootsResult>(answer).is_ok(),
        _ => false,
    }
}

/// The client of a session, asked at once.
pub(crate) struct SessionInput {
    pub(crate) peer: Peer<RoleServer>,
}

impl ClientInput for SessionInput {
    fn ask<'a>(
        &'a self,
        _plugin: &'a str,
        requests: Vec<InputRequest>,
    ) -> BoxFuture<'a, Result<Vec<Value>, AskError>> {
        Box::pin(async move {
            let capabilities = self
                .peer
                .peer_info()
                .map(|info| info.capabilities.clone())
                .unwrap_or_default();
            let mut answers = Vec::with_capacity(requests.len());
            for request in &requests {
                let capability = request.capability().unwrap_or_default();
                if !declared(&capabilities, capability) {
                    return Err(AskError::Failed(format!(
                        "The client cannot answer {:?} ({}): it did not declare the {capability} capability",
                        request.key, request.method
                    )));
                }
                let answer = tokio::time::timeout(ANSWER_WAIT, send(&self.peer, request))
                    .await
                    .map_err(|_| {
                        AskError::Failed(format!(
                            "The client did not answer {:?} within {} s",
                            request.key,
                            ANSWER_WAIT.as_secs()
                        ))
                    })??;
                answers.push(answer);
            }
            Ok(answers)
        })
    }

    fn answers(&self) -> Vec<&'static str> {
        self.peer
            .peer_info()
            .map(|info| answered_methods(&info.capabilities))
            .unwrap_or_default()
    }
}

/// Send `request` to the client and wait for its result.
async fn send(peer: &Peer<RoleServer>, request: &InputRequest) -> Result<Value, AskError> {
    let (key, method) = (&request.key, &request.method);
    let invalid = |e: serde_json::Error| {
        AskError::Failed(format!(
            "The question {key:?} is not a valid {method} request: {e}"
        ))
    };
    let failed = |e: rmcp::ServiceError| {
        AskError::Failed(format!(
            "The client answered {key:?} ({method}) with an error: {e}"
        ))
    };
    let answer = match method.as_str() {
        "elicitation/create" => {
            let params: ElicitRequestParams =
                serde_json::from_value(request.params.clone()).map_err(invalid)?;
            serde_json::to_value(peer.create_elicitation(params).await.map_err(failed)?)
        }
        "sampling/createMessage" => {
            let params: CreateMessageRequestParams =
                serde_json::from_value(request.params.clone()).map_err(invalid)?;
            serde_json::to_value(peer.create_message(params).await.map_err(failed)?)
        }
        "roots/list" => serde_json::to_value(peer.list_roots().await.map_err(failed)?),
        _ => {
            return Err(AskError::Failed(format!(
                "{method} is not a question for the client"
            )));
        }
    };
    answer.map_err(|e| AskError::Failed(format!("cannot read the client's answer to {key:?}: {e}")))
}

/// Why a stateless call stopped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stop {
    /// At these unanswered questions.
    Questions(Vec<InputRequest>),
    /// At a question needing this capability, which the request did not declare.
    Missing(String),
}

/// What a call's rounds know: the answers so far, and which plugin asked each question (the request state).
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Known {
    /// The answers so far, by key.
    pub(crate) answers: BTreeMap<String, Value>,
    /// The plugin that asked each question, by key: only it gets the answer (a plugin the call led to cannot read
    /// the answer to another's question by asking under the same key).
    pub(crate) owners: BTreeMap<String, String>,
    /// The handle of a grant allowed once for this call (`crate::ask::OnceGrants`), which its next round runs
    /// with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) once: Option<String>,
}

/// The client of one 2026-07-28 request: answers from the request's state and `inputResponses`, questions kept
/// for the `input_required` result.
pub(crate) struct RoundInput {
    /// What the request declared in its `_meta`.
    declared: ClientCapabilities,
    /// What the rounds so far know.
    known: Known,
    /// Why the call stopped, once it did, and who asked the questions it stopped at.
    stopped: Mutex<Option<(Stop, BTreeMap<String, String>)>>,
}

impl RoundInput {
    pub(crate) fn new(declared: ClientCapabilities, known: Known) -> Self {
        RoundInput {
            declared,
            known,
            stopped: Mutex::new(None),
        }
    }

    /// What the rounds so far know.
    pub(crate) fn known(&self) -> &Known {
        &self.known
    }

    /// Why the call stopped, if it did (taken), and what the next round's state must carry.
    pub(crate) fn take_stop(&self) -> Option<(Stop, Known)> {
        let (stop, asked) = self.stopped.lock().unwrap_or_else(|p| p.into_inner()).take()?;
        let mut known = self.known.clone();
        known.owners.extend(asked);
        Some((stop, known))
    }

    /// Keep `stop` of `plugin` (a missing capability wins; questions of calls running side by side are put
    /// together, the first to ask a key keeping it).
    fn stop(&self, plugin: &str, stop: Stop) {
        let mut stopped = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        let asked = |questions: &[InputRequest]| {
            questions
                .iter()
                .map(|q| (q.key.clone(), plugin.to_owned()))
                .collect::<BTreeMap<_, _>>()
        };
        match (&mut *stopped, stop) {
            (Some((Stop::Questions(kept), owners)), Stop::Questions(more)) => {
                for question in more {
                    if !kept.iter().any(|q| q.key == question.key) {
                        owners.insert(question.key.clone(), plugin.to_owned());
                        kept.push(question);
                    }
                }
            }
            (Some((Stop::Missing(_), _)), _) => {}
            (slot, Stop::Questions(questions)) => {
                let owners = asked(&questions);
                *slot = Some((Stop::Questions(questions), owners));
            }
            (slot, missing) => *slot = Some((missing, BTreeMap::new())),
        }
    }
}

impl ClientInput for RoundInput {
    fn ask<'a>(
        &'a self,
        plugin: &'a str,
        requests: Vec<InputRequest>,
    ) -> BoxFuture<'a, Result<Vec<Value>, AskError>> {
        Box::pin(async move {
            if let Some(taken) = requests
                .iter()
                .find(|r| self.known.owners.get(&r.key).is_some_and(|owner| owner != plugin))
            {
                return Err(AskError::Failed(texts::taken_key(plugin, &taken.key)));
            }
            for request in &requests {
                well_formed(request)?;
            }
            if let Some(capability) = requests
                .iter()
                .filter_map(InputRequest::capability)
                .find(|c| !declared(&self.declared, c))
            {
                self.stop(plugin, Stop::Missing(capability.to_owned()));
                return Err(AskError::MissingCapability(capability.to_owned()));
            }
            let answers = &self.known.answers;
            let unanswered: Vec<InputRequest> = requests
                .iter()
                .filter(|r| !answers.get(&r.key).is_some_and(|a| fits(r, a)))
                .cloned()
                .collect();
            if !unanswered.is_empty() {
                self.stop(plugin, Stop::Questions(unanswered));
                return Err(AskError::Pending);
            }
            Ok(requests.iter().map(|r| answers[&r.key].clone()).collect())
        })
    }

    fn answers(&self) -> Vec<&'static str> {
        answered_methods(&self.declared)
    }
}

/// The sealed request states of one server.
pub(crate) struct Rounds {
    codec: RequestStateCodec,
}

impl Rounds {
    /// States sealed under a fresh random key.
    pub(crate) fn new() -> Self {
        let mut key = [0u8; 32];
        let mut filled = 0;
        while filled < key.len() {
            match rustix::rand::getrandom(&mut key[filled..], rustix::rand::GetRandomFlags::empty()) {
                Ok(n) => filled += n,
                Err(rustix::io::Errno::INTR) => {}
                // No randomness at all: states sealed under a key only the process's hasher knows.
                Err(error) => {
                    tracing::warn!("cannot draw a key for request states: {error}");
                    use std::hash::{BuildHasher, Hasher};
                    for chunk in key.chunks_mut(8) {
                        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
                        hasher.write_usize(chunk.as_ptr() as usize);
                        chunk.copy_from_slice(&hasher.finish().to_le_bytes()[..chunk.len()]);
                    }
                    filled = key.len();
                }
            }
        }
        Rounds {
            codec: RequestStateCodec::try_new(key.to_vec()).expect("a key of 32 bytes is long enough"),
        }
    }

    /// What a state is bound to: the tool and its arguments.
    fn bound_to(tool: &str, arguments: &Value) -> Vec<u8> {
        let mut digest = sha2::Sha256::new();
        digest.update(tool.as_bytes());
        digest.update([0]);
        digest.update(arguments.to_string().as_bytes());
        digest.finalize().to_vec()
    }

    /// The state carrying `known` to the next round of the call of `tool` with `arguments`.
    pub(crate) fn seal(&self, tool: &str, arguments: &Value, known: &Known) -> Result<String, ErrorData> {
        let bound = Self::bound_to(tool, arguments);
        let options = SealOptions::new().associated_data(&bound).ttl(ANSWER_WAIT);
        self.codec
            .seal_json_with(known, &options)
            .map_err(|e| ErrorData::internal_error(format!("cannot seal the request state: {e}"), None))
    }

    /// What a call of `tool` with `arguments` knows: what its `state` carries (when it is a sealed state), with
    /// its `responses` added. A sealed state this server did not seal for this call, or one past its time, is an
    /// invalid-params error; a state that is no sealed state at all (a grant question's handle that was used up,
    /// `crate::ask`) carries nothing.
    pub(crate) fn known(
        &self,
        tool: &str,
        arguments: &Value,
        state: Option<&str>,
        responses: Option<&BTreeMap<String, Value>>,
    ) -> Result<Known, ErrorData> {
        let mut known = match state.filter(|s| is_sealed(s)) {
            Some(state) => {
                let bound = Self::bound_to(tool, arguments);
                self.codec
                    .open_json_with::<Known>(state, &bound)
                    .map_err(|e| ErrorData::invalid_params(texts::bad_state(tool, &e.to_string()), None))?
            }
            None => Known::default(),
        };
        if let Some(responses) = responses {
            known
                .answers
                .extend(responses.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Ok(known)
    }
}

/// Whether `state` has the shape of a sealed request state (`rs1.…` or `rs2.…`, rmcp's formats), tampered with or
/// not.
fn is_sealed(state: &str) -> bool {
    matches!(state.split('.').next(), Some("rs1" | "rs2"))
}

/// `questions` as MCP's input requests, by key (one that does not parse as one is left out, with a warning).
pub(crate) fn input_requests(questions: &[InputRequest]) -> rmcp::model::InputRequests {
    questions
        .iter()
        .filter_map(|q| {
            let request = serde_json::json!({ "method": q.method, "params": q.params });
            serde_json::from_value(request)
                .inspect_err(|e| tracing::warn!(key = %q.key, "cannot put the question to the client: {e}"))
                .ok()
                .map(|request| (q.key.clone(), request))
        })
        .collect()
}

/// The `input_required` result asking `questions`, with `state`.
pub(crate) fn input_required(questions: &[InputRequest], state: String) -> Result<Value, ErrorData> {
    let requests: serde_json::Map<String, Value> = questions
        .iter()
        .map(|q| {
            (
                q.key.clone(),
                serde_json::json!({ "method": q.method, "params": q.params }),
            )
        })
        .collect();
    Ok(serde_json::json!({
        "resultType": "input_required",
        "inputRequests": requests,
        "requestState": state,
    }))
}

/// The `MissingRequiredClientCapability` error for `capability`.
pub(crate) fn missing(capability: &str) -> ErrorData {
    let required: ClientCapabilities =
        serde_json::from_value(serde_json::json!({ capability: {} })).unwrap_or_default();
    ErrorData::missing_required_client_capability(required)
}

/// The texts of the errors a client's round gets.
pub mod texts {
    /// A request state that does not open.
    pub fn bad_state(tool: &str, why: &str) -> String {
        format!(
            "The requestState is not one this server issued for this call of {tool}, or it is past its time \
             ({why}): call the tool again without it"
        )
    }

    /// A plugin asked under a key another plugin's question holds in this call.
    pub fn taken_key(plugin: &str, key: &str) -> String {
        format!(
            "The plugin {plugin} asked under the key {key:?}, which names another plugin's question in this call: \
             ask under another key"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn form(key: &str) -> InputRequest {
        InputRequest::new(
            key,
            "elicitation/create",
            json!({"message": "?", "requestedSchema": {"type": "object", "properties": {}}}),
        )
    }

    #[tokio::test]
    async fn a_question_that_is_not_its_methods_request_is_refused_before_it_stops_the_call() {
        let round = RoundInput::new(all(), Known::default());
        let bad = InputRequest::new("a", "elicitation/create", json!({"message": 1}));
        let Err(AskError::Failed(why)) = round.ask("p", vec![bad]).await else {
            panic!("a malformed question was put");
        };
        assert!(why.contains("not a valid elicitation/create request"), "{why}");
        assert!(round.take_stop().is_none());
    }

    fn all() -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {}, "sampling": {}, "roots": {}})).unwrap()
    }

    fn known(answers: &[(&str, Value)]) -> Known {
        Known {
            answers: answers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            owners: BTreeMap::new(),
            once: None,
        }
    }

    #[tokio::test]
    async fn a_round_answers_what_it_knows_and_stops_at_the_rest() {
        let accepted = json!({"action": "accept", "content": {"name": "Alice"}});
        let round = RoundInput::new(all(), known(&[("a", accepted.clone())]));
        assert_eq!(round.ask("p", vec![form("a")]).await, Ok(vec![accepted]));
        assert_eq!(
            round.ask("p", vec![form("a"), form("b")]).await,
            Err(AskError::Pending)
        );
        let (stop, next) = round.take_stop().unwrap();
        assert_eq!(stop, Stop::Questions(vec![form("b")]));
        assert_eq!(next.owners, BTreeMap::from([("b".to_owned(), "p".to_owned())]));
    }

    #[tokio::test]
    async fn a_plugin_cannot_read_the_answer_to_another_plugins_question() {
        // Round one: `victim` (called by `thief`) asks for a secret under "token".
        let round = RoundInput::new(all(), Known::default());
        assert_eq!(
            round.ask("victim", vec![form("token")]).await,
            Err(AskError::Pending)
        );
        let (_, mut next) = round.take_stop().unwrap();
        next.answers.insert(
            "token".into(),
            json!({"action": "accept", "content": {"token": "s3cret"}}),
        );
        // Round two: `thief` asks under the same key first; only `victim` gets the answer.
        let round = RoundInput::new(all(), next);
        let taken = round.ask("thief", vec![form("token")]).await.unwrap_err();
        assert_eq!(taken, AskError::Failed(texts::taken_key("thief", "token")));
        assert!(round.ask("victim", vec![form("token")]).await.is_ok());
    }

    #[tokio::test]
    async fn an_answer_that_is_not_the_methods_result_is_asked_again() {
        let round = RoundInput::new(all(), known(&[("a", json!({"nonsense": 1}))]));
        assert_eq!(round.ask("p", vec![form("a")]).await, Err(AskError::Pending));
    }

    #[tokio::test]
    async fn a_question_needing_an_undeclared_capability_stops_the_request() {
        let declared = serde_json::from_value(json!({"elicitation": {}})).unwrap();
        let round = RoundInput::new(declared, Known::default());
        let sample = InputRequest::new(
            "s",
            "sampling/createMessage",
            json!({"messages": [], "maxTokens": 1}),
        );
        assert_eq!(
            round.ask("p", vec![form("a"), sample]).await,
            Err(AskError::MissingCapability("sampling".into()))
        );
        assert_eq!(
            round.take_stop().map(|(stop, _)| stop),
            Some(Stop::Missing("sampling".into()))
        );
        let error = missing("sampling");
        assert_eq!(error.code.0, -32021);
        assert_eq!(
            error.data,
            Some(json!({"requiredCapabilities": {"sampling": {}}}))
        );
    }

    #[test]
    fn a_state_opens_only_for_its_own_call_and_unaltered() {
        let rounds = Rounds::new();
        let args = json!({"x": 1});
        let mut sealed = known(&[("a", json!({"action": "decline"}))]);
        sealed.owners.insert("a".into(), "p".into());
        let state = rounds.seal("t", &args, &sealed).unwrap();
        let responses = BTreeMap::from([("b".to_owned(), json!(2))]);
        let opened = rounds.known("t", &args, Some(&state), Some(&responses)).unwrap();
        assert_eq!(opened.answers.len(), 2);
        assert_eq!(opened.owners, sealed.owners);
        // Another tool, other arguments, an altered state, another server's state: all refused.
        assert!(rounds.known("u", &args, Some(&state), None).is_err());
        assert!(rounds.known("t", &json!({"x": 2}), Some(&state), None).is_err());
        let tampered = format!("{state}-TAMPERED");
        let error = rounds.known("t", &args, Some(&tampered), None).unwrap_err();
        assert_eq!(error.code.0, -32602);
        assert!(error.message.contains("not one this server issued"));
        assert!(Rounds::new().known("t", &args, Some(&state), None).is_err());
        // No sealed state at all (a used-up grant question's handle): nothing known, no error.
        let handle = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            rounds.known("t", &args, Some(handle), None).unwrap(),
            Known::default()
        );
    }
}
