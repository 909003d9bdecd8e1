//! What a running call may ask the client that made it: MCP's input requests — a form for the user
//! (`elicitation/create`), a message from the client's model (`sampling/createMessage`), the client's roots
//! (`roots/list`).
//!
//! A server registers, for each call it runs, how its client answers ([`ClientInput`]) at a [`ClientDesk`]
//! shared with the runtimes; a plugin's `ask` finds it by the call's id (a nested call by its top call's: its id
//! is `<caller's id>/<n>`). A client of a session (MCP 2025-11-25) is asked at once, and the call waits for the
//! answers; a 2026-07-28 client answers with the call's next round (an `input_required` result, then the call
//! again with the answers), so the call stops at its first unanswered question ([`AskError::Pending`]) and runs
//! again, from the start, with every answer so far.
//!
//! ```
//! use toolwright_core::client::{ClientDesk, InputRequest, validate};
//! use serde_json::json;
//! let desk = ClientDesk::default();
//! assert!(desk.find("mcp-1/2").is_none()); // no client registered the call: nobody to ask
//! let form = InputRequest::new("name", "elicitation/create", json!({"message": "Your name?", "requestedSchema": {"type": "object"}}));
//! assert!(validate(&[form.clone()]).is_ok());
//! assert!(validate(&[form.clone(), form]).unwrap_err().contains("twice"));
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::tool::BoxFuture;

/// The methods a call may ask its client, and the client capability each needs.
pub const METHODS: [(&str, &str); 3] = [
    ("elicitation/create", "elicitation"),
    ("sampling/createMessage", "sampling"),
    ("roots/list", "roots"),
];

/// Questions one `ask` may put at once.
pub const MAX_REQUESTS_PER_ASK: usize = 16;

/// The longest key of a question.
pub const MAX_KEY_CHARS: usize = 64;

/// Bytes of parameters (as JSON) one `ask` may carry.
pub const MAX_ASK_BYTES: usize = 256 * 1024;

/// One question for the client, under the key its answer comes back with.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequest {
    /// The name of the question among the call's questions (`user_name`).
    pub key: String,
    /// One of [`METHODS`].
    pub method: String,
    /// The method's parameters (a JSON object).
    pub params: Value,
}

impl InputRequest {
    /// The question `key`: `method` with `params`.
    pub fn new(key: impl Into<String>, method: impl Into<String>, params: Value) -> Self {
        InputRequest {
            key: key.into(),
            method: method.into(),
            params,
        }
    }

    /// The client capability the question needs (`elicitation`, `sampling`, `roots`).
    pub fn capability(&self) -> Option<&'static str> {
        METHODS
            .iter()
            .find(|(method, _)| *method == self.method)
            .map(|(_, capability)| *capability)
    }
}

/// Why an `ask` got no answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// The client answers with the call's next round (2026-07-28): the call stops here, the client gets the
    /// questions, and the call runs again with the answers.
    #[error("the call stops to ask its client; it runs again with the answers")]
    Pending,
    /// The client did not declare the capability a question needs (`sampling`): MCP's
    /// `MissingRequiredClientCapability` for a 2026-07-28 request.
    #[error("the client did not declare the {0} capability")]
    MissingCapability(String),
    /// Anything else, in words for the plugin.
    #[error("{0}")]
    Failed(String),
}

/// How the client of one call answers its questions.
pub trait ClientInput: Send + Sync {
    /// Answer `requests` of `plugin` (checked by [`validate`]), in their order, each as the client's result
    /// (JSON).
    fn ask<'a>(
        &'a self,
        plugin: &'a str,
        requests: Vec<InputRequest>,
    ) -> BoxFuture<'a, Result<Vec<Value>, AskError>>;

    /// The methods of [`METHODS`] the client declared it answers.
    fn answers(&self) -> Vec<&'static str>;
}

/// Which calls have a client to ask, by call id; cloning shares it.
#[derive(Clone, Default)]
pub struct ClientDesk(Arc<Mutex<HashMap<String, Arc<dyn ClientInput>>>>);

impl std::fmt::Debug for ClientDesk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientDesk")
    }
}

/// A call's registration at a [`ClientDesk`]: dropped, the call has no client to ask.
pub struct Opened {
    desk: ClientDesk,
    call_id: String,
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.desk.lock().remove(&self.call_id);
    }
}

impl ClientDesk {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<dyn ClientInput>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Let the call `call_id` (and its nested calls) ask through `input` until the returned guard is dropped.
    pub fn open(&self, call_id: &str, input: Arc<dyn ClientInput>) -> Opened {
        self.lock().insert(call_id.to_owned(), input);
        Opened {
            desk: self.clone(),
            call_id: call_id.to_owned(),
        }
    }

    /// How the call `call_id` asks its client: its own registration, else its caller's (ids cut at their last
    /// `/`), up to its top call's.
    pub fn find(&self, call_id: &str) -> Option<Arc<dyn ClientInput>> {
        let desk = self.lock();
        let mut id = call_id;
        loop {
            if let Some(input) = desk.get(id) {
                return Some(input.clone());
            }
            id = &id[..id.rfind('/')?];
        }
    }
}

/// Whether `requests` may be put to a client: one to [`MAX_REQUESTS_PER_ASK`] questions, keys unique and of 1
/// to [`MAX_KEY_CHARS`] characters, methods of [`METHODS`], parameters JSON objects of at most [`MAX_ASK_BYTES`]
/// together. The error says what is wrong.
pub fn validate(requests: &[InputRequest]) -> Result<(), String> {
    if requests.is_empty() {
        return Err("asks no question".into());
    }
    if requests.len() > MAX_REQUESTS_PER_ASK {
        return Err(format!(
            "asks {} questions at once (at most {MAX_REQUESTS_PER_ASK})",
            requests.len()
        ));
    }
    let mut bytes = 0;
    for (n, request) in requests.iter().enumerate() {
        let key = &request.key;
        if key.is_empty() || key.chars().count() > MAX_KEY_CHARS {
            return Err(format!(
                "gives question {} a key of {} characters (1 to {MAX_KEY_CHARS})",
                n + 1,
                key.chars().count()
            ));
        }
        if requests[..n].iter().any(|r| r.key == *key) {
            return Err(format!("uses the key {key:?} twice"));
        }
        if request.capability().is_none() {
            let known: Vec<_> = METHODS.iter().map(|(m, _)| *m).collect();
            return Err(format!(
                "asks {:?} under {key:?}, which is not one of {}",
                request.method,
                known.join(", ")
            ));
        }
        if !request.params.is_object() {
            return Err(format!("gives {key:?} parameters that are not a JSON object"));
        }
        bytes += request.params.to_string().len();
    }
    if bytes > MAX_ASK_BYTES {
        return Err(format!(
            "puts {bytes} bytes of parameters in one ask (at most {MAX_ASK_BYTES})"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Fixed;
    impl ClientInput for Fixed {
        fn ask<'a>(
            &'a self,
            _plugin: &'a str,
            requests: Vec<InputRequest>,
        ) -> BoxFuture<'a, Result<Vec<Value>, AskError>> {
            Box::pin(async move { Ok(requests.iter().map(|r| json!(r.key)).collect()) })
        }

        fn answers(&self) -> Vec<&'static str> {
            vec!["roots/list"]
        }
    }

    #[test]
    fn a_nested_call_asks_through_its_top_call_and_nothing_once_the_call_ended() {
        let desk = ClientDesk::default();
        let opened = desk.open("mcp-3", Arc::new(Fixed));
        assert!(desk.find("mcp-3").is_some());
        assert!(desk.find("mcp-3/1/2").is_some());
        // Another call whose id merely starts alike has no client.
        assert!(desk.find("mcp-30").is_none());
        assert!(desk.find("mcp-30/1").is_none());
        drop(opened);
        assert!(desk.find("mcp-3/1").is_none());
    }

    #[test]
    fn questions_are_checked_before_they_reach_a_client() {
        let ok = |key: &str, method: &str| InputRequest::new(key, method, json!({}));
        assert!(validate(&[ok("a", "roots/list"), ok("b", "sampling/createMessage")]).is_ok());
        assert_eq!(validate(&[]).unwrap_err(), "asks no question");
        assert!(
            validate(&[ok("", "roots/list")])
                .unwrap_err()
                .contains("key of 0 characters")
        );
        assert!(
            validate(&[ok("a", "tools/call")])
                .unwrap_err()
                .contains("\"tools/call\"")
        );
        let not_object = InputRequest::new("a", "roots/list", json!([1]));
        assert!(validate(&[not_object]).unwrap_err().contains("not a JSON object"));
        let many: Vec<_> = (0..17).map(|n| ok(&n.to_string(), "roots/list")).collect();
        assert!(validate(&many).unwrap_err().contains("17 questions"));
        let big = InputRequest::new(
            "a",
            "elicitation/create",
            json!({"message": "x".repeat(MAX_ASK_BYTES)}),
        );
        assert!(validate(&[big]).unwrap_err().contains("bytes of parameters"));
    }
}
