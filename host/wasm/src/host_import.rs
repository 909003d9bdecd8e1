//! The `host` import: partial results, cancellation, logging, the call's directories and refusals, nested
//! tool calls (at once, several together, or started and collected later) and questions for the call's client
//! (`ask`, [`toolwright_core::client`]), served from the call's [`PluginState`].

use tokio_util::sync::CancellationToken;

use crate::bindings::{host, types};
use crate::convert;
use crate::state::{PluginState, Started};
use toolwright_core::tool::CallSink;
use toolwright_core::types::AgentToolCallOutcome;

/// How many started calls one plugin call may have uncollected at once: past it, `start-call` answers with an
/// error outcome at once (a plugin flooding the host with calls gets errors, not memory).
pub const MAX_STARTED_CALLS: usize = 1024;

/// The longest `search-tools` query the host ranks (characters; longer ones are cut): ranking is host work the
/// plugin's deadline cannot interrupt.
pub const MAX_SEARCH_QUERY_CHARS: usize = 4096;

impl types::Host for PluginState {}

impl PluginState {
    /// Put `requests` to the call's client ([`toolwright_core::client`]): the answers, none when the call was
    /// stopped (cancelled, out of time) while it waited, or why nobody answers.
    fn put_to_client(
        &self,
        requests: Vec<types::InputRequest>,
    ) -> Result<Option<Vec<serde_json::Value>>, toolwright_core::client::AskError> {
        use toolwright_core::client::{AskError, InputRequest, validate};
        let plugin = &self.call.plugin;
        let client = self
            .call
            .client
            .clone()
            .ok_or_else(|| AskError::Failed(texts::no_client(plugin)))?;
        let mut asked = Vec::with_capacity(requests.len());
        for request in requests {
            let params = serde_json::from_str::<serde_json::Value>(&request.params).map_err(|e| {
                AskError::Failed(format!(
                    "The plugin {plugin} asked {:?} with parameters that are not JSON: {e}",
                    request.key
                ))
            })?;
            asked.push(InputRequest::new(request.key, request.method, params));
        }
        validate(&asked).map_err(|why| AskError::Failed(format!("The plugin {plugin} {why}")))?;
        if !client.sampling
            && let Some(sample) = asked.iter().find(|r| r.method == "sampling/createMessage")
        {
            return Err(AskError::Failed(texts::no_sampling(plugin, &sample.key)));
        }
        // The user sees whose question a form is; the plugin cannot pass for the host.
        for request in &mut asked {
            if request.method == "elicitation/create"
                && let Some(message) = request.params.get_mut("message")
            {
                let text = message.as_str().unwrap_or_default();
                *message = serde_json::Value::String(format!("The plugin {plugin} asks: {text}"));
            }
        }
        let (Some(input), Ok(runtime)) = (
            client.desk.find(&client.call_id),
            tokio::runtime::Handle::try_current(),
        ) else {
            return Err(AskError::Failed(texts::no_client(plugin)));
        };
        let env = self.call.clone();
        toolwright_core::pipeline::block_on_nested(&runtime, async move {
            tokio::select! {
                answered = input.ask(&env.plugin, asked) => answered.map(Some),
                () = env.stopped() => Ok(None),
            }
        })
    }

    /// Keep what the host refused the call, for a server that may ask the user about it (bounded).
    pub(crate) fn note_refused(&mut self, refused: toolwright_core::ask::Refused) {
        if self.refused.len() < toolwright_core::ask::MAX_REFUSALS_PER_CALL
            && !self.refused.contains(&refused)
        {
            self.refused.push(refused);
        }
    }
}

impl host::Host for PluginState {
    fn update(&mut self, partial: types::ToolResult) -> wasmtime::Result<()> {
        self.carried
            .add(convert::result_bytes(&partial))
            .map_err(wasmtime::Error::new)?;
        let result = match convert::result_from_wit(partial) {
            Ok(result) => result,
            Err(e) => {
                tracing::warn!(plugin = %self.call.plugin, "dropping a malformed partial result: {e}");
                return Ok(());
            }
        };
        // A plugin sending faster than its updates are consumed waits for room, within its deadline.
        let call = &self.call;
        let sent = match tokio::runtime::Handle::try_current() {
            // On the thread that polls its batch, which waits for it: it hands the update on itself.
            Ok(runtime) if toolwright_core::pipeline::runs_here() => {
                call.updates.update(result);
                toolwright_core::pipeline::flush_owed(&runtime);
                true
            }
            Ok(runtime) if !call.short => call.updates.update_blocking(&runtime, result, call.stopped()),
            // In place nothing consumes updates until the call returns: one with no room is dropped.
            _ => {
                call.updates.update(result);
                true
            }
        };
        match sent {
            true => Ok(()),
            // Cancelled while waiting for room: the update is dropped and the plugin may wind down.
            false if call.cancel.is_cancelled() => Ok(()),
            false => Err(call.interrupted()),
        }
    }

    fn is_cancelled(&mut self) -> wasmtime::Result<bool> {
        Ok(self.call.should_stop())
    }

    fn log(&mut self, level: types::LogLevel, message: String) -> wasmtime::Result<()> {
        use toolwright_core::tool::LogLevel;
        let plugin = &self.call.plugin;
        let level = match level {
            types::LogLevel::Debug => {
                tracing::debug!(plugin, "{message}");
                LogLevel::Debug
            }
            types::LogLevel::Info => {
                tracing::info!(plugin, "{message}");
                LogLevel::Info
            }
            types::LogLevel::Warn => {
                tracing::warn!(plugin, "{message}");
                LogLevel::Warn
            }
            types::LogLevel::Error => {
                tracing::error!(plugin, "{message}");
                LogLevel::Error
            }
        };
        // The message is the plugin's: bounded like everything it sends.
        self.call.updates.log(level, message);
        if toolwright_core::pipeline::runs_here()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            toolwright_core::pipeline::flush_owed(&runtime);
        }
        Ok(())
    }

    fn cwd(&mut self) -> wasmtime::Result<String> {
        Ok(self.call.cwd.clone())
    }

    fn home(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(self.call.home.clone())
    }

    fn temp_dir(&mut self) -> wasmtime::Result<Option<String>> {
        Ok(self.call.temp_dir.clone())
    }

    fn refusal(&mut self, path: String, write: bool) -> wasmtime::Result<Option<String>> {
        use toolwright_native::grants::{covers, refusal_text};
        let path = toolwright_sdk::paths::resolve_to_cwd(&path, &self.call.cwd, self.call.home.as_deref());
        let access = if write {
            toolwright_sdk::Access::Write
        } else {
            toolwright_sdk::Access::Read
        };
        let roots = || {
            self.call
                .roots
                .iter()
                .map(|(root, write)| (root.as_str(), *write))
        };
        if covers(roots(), &path, access) {
            return Ok(None);
        }
        let text = refusal_text(roots(), &path, access);
        let refused = match access {
            toolwright_sdk::Access::Read => toolwright_core::ask::Refused::Read {
                dir: std::path::Path::new(&path).is_dir(),
                path,
            },
            toolwright_sdk::Access::Write => toolwright_core::ask::Refused::Write { path },
        };
        self.note_refused(refused);
        Ok(Some(text))
    }

    fn ask(&mut self, requests: Vec<types::InputRequest>) -> wasmtime::Result<Result<Vec<String>, String>> {
        use toolwright_core::client::AskError;
        // What the questions carry into the host counts against the plugin's per-call cap.
        let bytes = requests
            .iter()
            .map(|r| r.key.len() + r.method.len() + r.params.len())
            .sum::<usize>();
        self.carried.add(bytes).map_err(wasmtime::Error::new)?;
        if self.call.client.is_none() {
            self.asked_nobody = true;
        }
        // The audit log keeps what was asked and what came of it (never an answer's content).
        let asked: Vec<(String, String)> = requests
            .iter()
            .map(|r| (r.method.clone(), r.key.clone()))
            .collect();
        let answered = self.put_to_client(requests);
        for (n, (method, key)) in asked.iter().enumerate() {
            let outcome = match &answered {
                Ok(Some(answers)) => answers
                    .get(n)
                    .and_then(|a| a.get("action"))
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("answered")
                    .to_owned(),
                Ok(None) => "stopped: the call was cancelled or ran out of time".to_owned(),
                Err(AskError::Pending) => "asked: answered with the call's next round".to_owned(),
                Err(why) => format!("refused: {why}"),
            };
            self.call.updates.asked(method, key, &outcome);
        }
        match answered {
            Ok(None) => Err(self.call.interrupted()),
            Ok(Some(answers)) => {
                let answers: Vec<String> = answers.iter().map(serde_json::Value::to_string).collect();
                self.carried
                    .add(answers.iter().map(String::len).sum())
                    .map_err(wasmtime::Error::new)?;
                Ok(Ok(answers))
            }
            // The call stops here: the server answers its client with the questions (or the missing capability).
            Err(stop @ (AskError::Pending | AskError::MissingCapability(_))) => {
                Err(wasmtime::Error::new(crate::state::AskedClient(stop)))
            }
            Err(AskError::Failed(why)) => Ok(Err(why)),
        }
    }

    fn client_answers(&mut self) -> wasmtime::Result<Vec<String>> {
        let Some(client) = &self.call.client else {
            return Ok(Vec::new());
        };
        let Some(input) = client.desk.find(&client.call_id) else {
            return Ok(Vec::new());
        };
        Ok(input
            .answers()
            .into_iter()
            .filter(|method| client.sampling || *method != "sampling/createMessage")
            .map(str::to_owned)
            .collect())
    }

    fn call_tool(&mut self, name: String, arguments: String) -> wasmtime::Result<types::CallOutcome> {
        let mut outcomes = self.run_nested(vec![(name, arguments)]);
        self.count_nested(&mut outcomes);
        Ok(outcomes.pop().unwrap_or_else(unavailable))
    }

    fn call_tools(&mut self, calls: Vec<(String, String)>) -> wasmtime::Result<Vec<types::CallOutcome>> {
        let mut outcomes = self.run_nested(calls);
        self.count_nested(&mut outcomes);
        Ok(outcomes)
    }

    fn start_call(&mut self, name: String, arguments: String) -> wasmtime::Result<u64> {
        if self.call.should_stop() {
            return Err(self.call.interrupted());
        }
        // What the call carries into the host counts against the plugin's per-call cap, as its results do.
        self.carried
            .add(name.len() + arguments.len())
            .map_err(wasmtime::Error::new)?;
        let started = self.started.get_or_insert_with(|| {
            let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
            let cancel = self
                .call
                .session
                .as_ref()
                .map_or_else(CancellationToken::new, |s| s.cancel.child_token());
            Started {
                next: 1,
                running: 0,
                sender,
                receiver,
                _cancel: cancel.clone().drop_guard(),
                cancel,
                session: self.call.session.clone(),
            }
        });
        let number = started.next;
        started.next += 1;
        started.running += 1;
        let sender = started.sender.clone();
        // A plugin that keeps starting past the bound without collecting is stopped, not queued without end.
        if started.running > 2 * MAX_STARTED_CALLS {
            return Err(wasmtime::format_err!(
                "the plugin {} started more than {} nested calls without taking their outcomes",
                self.call.plugin,
                2 * MAX_STARTED_CALLS
            ));
        }
        if started.running > MAX_STARTED_CALLS {
            let text = format!(
                "The plugin {} has {MAX_STARTED_CALLS} nested calls running: it must take their outcomes \
                 (next-outcomes) before it starts more",
                self.call.plugin
            );
            let _ = sender.send((number, error_outcome(&text)));
            return Ok(number);
        }
        let (Some(session), Ok(runtime)) = (&self.call.session, tokio::runtime::Handle::try_current()) else {
            let _ = sender.send((number, unavailable()));
            return Ok(number);
        };
        let args = match serde_json::from_str::<serde_json::Value>(&arguments) {
            Ok(args) => args,
            Err(e) => {
                let text = format!(
                    "The plugin {} passed arguments for {name} that are not JSON: {e}",
                    self.call.plugin
                );
                let _ = sender.send((number, error_outcome(&text)));
                return Ok(number);
            }
        };
        let mut scoped = session.clone();
        scoped.cancel = started.cancel.clone();
        // Beside its caller: a nested call is never placed here, even polled on the caller's thread.
        let mut run = Box::pin(toolwright_core::pipeline::beside(async move {
            let outcome = scoped.execute_tool(&name, args, CallSink::discard()).await;
            // Only what the plugin will see waits for it (the arguments go with the call).
            let _ = sender.send((number, outcome_to_wit(outcome)));
        }));
        // Polled once here, so the call takes its id (`<call>/<n>`) and emits its start now, in start order; then it
        // runs on its own while the plugin goes on (its events served meanwhile if the plugin is placed here).
        toolwright_core::pipeline::serve_others(&runtime);
        if runtime
            .block_on(async { futures::poll!(run.as_mut()) })
            .is_pending()
        {
            runtime.spawn(run);
        }
        Ok(number)
    }

    fn next_outcomes(&mut self, wait: bool) -> wasmtime::Result<Vec<(u64, types::CallOutcome)>> {
        let Some(started) = self.started.as_mut().filter(|s| s.running > 0) else {
            return Ok(Vec::new());
        };
        let mut done = Vec::new();
        if wait {
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return Ok(Vec::new());
            };
            let first = {
                let call = &self.call;
                let receiver = &mut started.receiver;
                toolwright_core::pipeline::block_on_nested(&runtime, async {
                    tokio::select! {
                        // An outcome that is ready wins over a deadline passing at the same moment.
                        biased;
                        first = receiver.recv() => first,
                        () = call.stopped() => None,
                    }
                })
            };
            let Some(first) = first else {
                return Err(self.call.interrupted());
            };
            done.push(first);
        }
        while let Ok(next) = started.receiver.try_recv() {
            done.push(next);
        }
        started.running -= done.len();
        let mut outcomes = done;
        for (_, outcome) in &mut outcomes {
            self.count_nested(std::slice::from_mut(outcome));
        }
        Ok(outcomes)
    }

    fn search_tools(
        &mut self,
        query: String,
        among: Option<Vec<String>>,
        limit: u32,
    ) -> wasmtime::Result<Vec<String>> {
        use toolwright_core::registry::search::{SearchDocument, rank};
        let sent = query.len() + among.iter().flatten().map(String::len).sum::<usize>();
        self.carried.add(sent).map_err(wasmtime::Error::new)?;
        let query: String = query.chars().take(MAX_SEARCH_QUERY_CHARS).collect();
        let among: Option<std::collections::HashSet<String>> = among.map(|names| names.into_iter().collect());
        let tools = self.call.callable_tools();
        let documents: Vec<SearchDocument> = tools
            .iter()
            .filter(|t| among.as_ref().is_none_or(|names| names.contains(&t.name)))
            .map(|t| {
                let parameters = t.parameters.clone().unwrap_or(serde_json::Value::Null);
                SearchDocument::new(&t.name, &t.description, &parameters, t.namespace.as_ref())
            })
            .collect();
        Ok(rank(&query, &documents, limit as usize)
            .into_iter()
            .map(|r| r.name)
            .collect())
    }

    fn callable_tools(&mut self) -> wasmtime::Result<Vec<types::ToolInfo>> {
        let tools = self.call.callable_tools();
        Ok(tools.iter().map(convert::tool_info_to_wit).collect())
    }
}

/// How long nested calls get to end after their caller's deadline cancelled them.
const NESTED_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// What a plugin's nested calls answer when they were abandoned at its deadline (the plugin, stopped, never
/// sees it; the records say `cancelled`).
const NESTED_ABANDONED: &str = "The nested call was abandoned at its caller's deadline";

/// An error outcome of a nested call that never reached the pipeline.
fn error_outcome(text: &str) -> types::CallOutcome {
    types::CallOutcome {
        result: convert::result_to_wit(&toolwright_core::types::ToolResult::error(text)),
        is_error: true,
        duration_ms: None,
    }
}

/// pi's answer when no nested-call runner is bound.
fn unavailable() -> types::CallOutcome {
    error_outcome(toolwright_sdk::NESTED_CALLS_UNAVAILABLE)
}

fn outcome_to_wit(outcome: AgentToolCallOutcome) -> types::CallOutcome {
    types::CallOutcome {
        result: convert::result_to_wit(&outcome.result),
        is_error: outcome.is_error,
        duration_ms: outcome.duration_ms,
    }
}

impl PluginState {
    /// Count nested results against the call's cap; one past it reaches the plugin as an error outcome naming the
    /// cap instead (the plugin may still answer with what it has).
    fn count_nested(&mut self, outcomes: &mut [types::CallOutcome]) {
        for outcome in outcomes {
            if let Err(over) = self.carried.add(convert::result_bytes(&outcome.result)) {
                *outcome = error_outcome(&format!("The nested call's result was dropped: {over}"));
            }
        }
    }

    /// Run nested calls for the plugin, blocking its (blocking-pool) thread until all settle. Arguments that are
    /// not JSON become error outcomes naming the tool. When the calling plugin's deadline passes, its nested
    /// calls are cancelled, so a plugin waiting on them is stopped like one that loops.
    fn run_nested(&self, calls: Vec<(String, String)>) -> Vec<types::CallOutcome> {
        let (Some(session), Ok(runtime)) = (&self.call.session, tokio::runtime::Handle::try_current()) else {
            return calls.iter().map(|_| unavailable()).collect();
        };
        let cancel = session.cancel.child_token();
        let mut scoped = session.clone();
        scoped.cancel = cancel.clone();
        let deadline = self
            .call
            .deadline
            .map(|(at, _)| tokio::time::Instant::from_std(at));
        let plugin = self.call.plugin.clone();
        let count = calls.len();
        toolwright_core::pipeline::block_on_nested(&runtime, async move {
            let runs = futures::future::join_all(calls.into_iter().map(|(name, arguments)| {
                let (scoped, plugin) = (&scoped, &plugin);
                async move {
                    match serde_json::from_str::<serde_json::Value>(&arguments) {
                        Ok(args) => {
                            outcome_to_wit(scoped.execute_tool(&name, args, CallSink::discard()).await)
                        }
                        Err(e) => error_outcome(&format!(
                            "The plugin {plugin} passed arguments for {name} that are not JSON: {e}"
                        )),
                    }
                }
            }));
            tokio::pin!(runs);
            match deadline {
                Some(at) => tokio::select! {
                    outcomes = &mut runs => outcomes,
                    () = tokio::time::sleep_until(at) => {
                        // The plugin is stopped with them: they stay unfinished in its record.
                        scoped.seal();
                        cancel.cancel();
                        // A nested call that cannot see its cancellation (a thread inside a system call) is
                        // abandoned after a grace: dropped, it records itself as cancelled, and the caller's
                        // own record is written as it stops.
                        match tokio::time::timeout(NESTED_GRACE, &mut runs).await {
                            Ok(outcomes) => outcomes,
                            Err(_) => (0..count).map(|_| error_outcome(NESTED_ABANDONED)).collect(),
                        }
                    }
                },
                None => runs.await,
            }
        })
    }
}

/// The texts `ask` answers a plugin with when nobody can answer.
pub mod texts {
    /// The call has no client to ask.
    pub fn no_client(plugin: &str) -> String {
        format!(
            "The plugin {plugin} has nobody to ask: its call does not come from an MCP client that can answer \
             (toolwright exec without --ask, a hook)"
        )
    }

    /// The plugin may not ask the client's model.
    pub fn no_sampling(plugin: &str, key: &str) -> String {
        format!(
            "The plugin {plugin} may not ask the client's model ({key:?}): the user's policy does not list it in \
             `[ask] sampling`"
        )
    }
}
