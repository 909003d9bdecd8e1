//! Grants asked for while serving (`[ask] grants = true`, [`toolwright::ask`]): what an approval does for
//! `toolwright mcp`. A grant for once or for the session is the plugin's grants decided again with it added to the
//! user's policy in memory; one for always is also written to the user's policy file with the editor
//! `toolwright plugins add` uses, pinning the plugin's digest, so the plugin stays bound to what was approved. A
//! host for the built-ins' programs goes to `[builtins] network` likewise (for the session or always, never once:
//! their call is not run again).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use toolwright::ask::{Grant, Question, Refused, Subject};
use toolwright::definition::ToolDefinition;
use toolwright::mcp::ask::GrantAsker;
use toolwright::sdk::Capability;
use toolwright::toolset::Regrants;

/// The grants kept for this server's lifetime, by plugin (and the built-ins), and the latest loaded toolset's
/// [`Regrants`].
#[derive(Clone)]
pub struct Kept {
    regrants: Arc<Mutex<Regrants>>,
    /// The first toolset's, which the built-ins in the registry were made from: a reload never changes them (a
    /// policy file rewritten while serving — by a command of `bash`, say — must not reach them through an
    /// approval), so their hosts are added to that policy only.
    builtins: Arc<Regrants>,
    grants: Arc<Mutex<BTreeMap<Subject, Vec<Grant>>>>,
}

impl Kept {
    /// Grants asked from `regrants` (a loaded toolset's), none kept yet.
    pub fn new(regrants: Regrants) -> Self {
        Kept {
            builtins: Arc::new(regrants.clone()),
            regrants: Arc::new(Mutex::new(regrants)),
            grants: Arc::default(),
        }
    }

    /// A toolset was loaded again: ask from it, and give its plugins the grants kept — `tools` (its plugin tools)
    /// with each such plugin's tools in their place. (The built-ins are not reloaded: theirs stay in place.)
    pub fn reloaded(&self, regrants: Regrants, tools: &mut [ToolDefinition]) {
        let kept = self.grants.lock().unwrap_or_else(PoisonError::into_inner).clone();
        for (subject, grants) in &kept {
            let Subject::Plugin(plugin) = subject else {
                continue;
            };
            for mut widened in regrants.tools_with(plugin, grants).unwrap_or_default() {
                if let Some(slot) = tools.iter_mut().find(|t| t.name == widened.name) {
                    // The exposure the server gave it (`--expose`, applied to `tools` already) stays.
                    widened.exposure = slot.exposure;
                    *slot = widened;
                }
            }
        }
        *self.regrants.lock().unwrap_or_else(PoisonError::into_inner) = regrants;
    }

    fn regrants(&self) -> Regrants {
        self.regrants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What `subject`'s grants are decided again from: the latest toolset's for a plugin, the first one's for the
    /// built-ins.
    fn regrants_for(&self, subject: &Subject) -> Regrants {
        match subject {
            Subject::Plugin(_) => self.regrants(),
            Subject::Builtins => Regrants::clone(&self.builtins),
        }
    }

    /// The grants kept for `subject`, with `extra`.
    fn with<'a>(&self, subject: &Subject, extra: impl IntoIterator<Item = &'a Grant>) -> Vec<Grant> {
        let mut grants = self
            .grants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(subject)
            .cloned()
            .unwrap_or_default();
        for grant in extra {
            if !grants.contains(grant) {
                grants.push(grant.clone());
            }
        }
        grants
    }

    fn keep(&self, question: &Question) {
        let mut kept = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        let grants = kept.entry(question.subject.clone()).or_default();
        if !grants.contains(&question.grant) {
            grants.push(question.grant.clone());
        }
    }
}

/// What `toolwright mcp` answers for: the kept grants, and the user's policy file that `always` writes.
pub struct CliAsker {
    /// The grants kept and the toolset they apply to.
    pub kept: Kept,
    /// The user's policy file (none: `always` is refused).
    pub policy_file: Option<PathBuf>,
}

impl GrantAsker for CliAsker {
    fn question(&self, subject: &Subject, refused: &[Refused]) -> Option<Question> {
        let question = self.kept.regrants_for(subject).question(subject, refused)?;
        // The built-ins' tools are made from the first toolset, but whether to ask, and what the policy denies, is
        // the latest one's: `[ask] grants = false` or a `[builtins] deny` written while serving holds.
        if *subject == Subject::Builtins {
            let latest = self.kept.regrants();
            latest.question(subject, std::slice::from_ref(&question.refused))?;
        }
        Some(question)
    }

    fn once(&self, questions: &[Question]) -> Option<Vec<ToolDefinition>> {
        let subject = &questions.last()?.subject;
        // The built-ins' calls are not run again: nothing is granted once.
        let Subject::Plugin(plugin) = subject else {
            return None;
        };
        let own = questions.iter().filter(|q| &q.subject == subject);
        let grants = self.kept.with(subject, own.map(|q| &q.grant));
        self.kept.regrants().tools_with(plugin, &grants)
    }

    fn session(&self, question: &Question) -> Option<Vec<ToolDefinition>> {
        self.kept.keep(question);
        let grants = self.kept.with(&question.subject, []);
        (self.kept.regrants_for(&question.subject)).subject_tools_with(&question.subject, &grants)
    }

    fn always(&self, question: &Question) -> Result<Vec<ToolDefinition>, String> {
        let path = self
            .policy_file
            .as_ref()
            .ok_or("there is no user policy file to write to (neither XDG_CONFIG_HOME nor HOME is set)")?;
        let capability = match &question.grant {
            Grant::Read(dir) => Capability::Read(dir.clone()),
            Grant::Write(dir) => Capability::Write(dir.clone()),
            Grant::Spawn(program) => Capability::Spawn(program.clone()),
            Grant::Network(address) => Capability::Network(address.clone()),
        };
        let mut document = super::install::policy_document(path).map_err(|e| format!("{e:#}"))?;
        match &question.subject {
            Subject::Plugin(plugin) => {
                let sha256 = self
                    .kept
                    .regrants()
                    .sha256(plugin)
                    .ok_or_else(|| format!("the plugin {plugin} is no longer loaded"))?;
                super::install::grant_and_pin(&mut document, plugin, &[capability], &sha256);
            }
            Subject::Builtins => {
                let Capability::Network(address) = capability else {
                    return Err("only hosts are asked for the built-ins".into());
                };
                super::install::grant_builtins_network(&mut document, &address)?;
            }
        }
        super::install::save_policy(path, &document).map_err(|e| format!("{e:#}"))?;
        tracing::info!(subject = ?question.subject, policy = %path.display(), "a grant asked for was written");
        self.session(question)
            .ok_or_else(|| format!("{:?} cannot be given the grant", question.subject))
    }
}

/// Who answers the questions of `toolwright exec --ask`, in the audit log.
const ASKED_ON_TERMINAL: &str = "the user, asked on the terminal";

/// `toolwright exec --ask`: after the batch, for each call of `message` that ended refused something its plugin
/// requested, ask on the terminal (the question on stderr, the answer from stdin) and, on approval, run the call
/// again (its events follow; its last `tool_execution_end` is its result). Returns the batch run again, if any.
/// A host refused the built-ins' programs is asked about likewise, always or deny only, and their call is not run
/// again: an approval is written to the policy file (a line on stderr says so).
pub async fn ask_on_terminal(
    session: &toolwright::Session,
    message: &toolwright::AssistantMessage,
    outcome: &toolwright::BatchOutcome,
    sink: &dyn toolwright::EventSink,
    cancel: &tokio_util::sync::CancellationToken,
) -> Option<toolwright::BatchOutcome> {
    let asker = CliAsker {
        kept: Kept::new(session.toolset().regrants(session.options())),
        policy_file: toolwright::policy::default_files().into_iter().next(),
    };
    let audit = session.dispatcher().pipeline().audit.clone();
    let registry = session.dispatcher().registry();
    let mut again = Vec::new();
    for (call, result) in message.tool_calls.iter().zip(&outcome.messages) {
        let Some((subject, refused)) = session.options().refusals.take(&call.id) else {
            continue;
        };
        let own = registry.read(|r| r.definition(&call.name).is_some_and(|d| subject.owns(d)));
        if !result.is_error || !own {
            continue;
        }
        let Some(question) = asker.question(&subject, &refused) else {
            continue;
        };
        let answer = prompt(&question);
        let tools = toolwright::mcp::ask::approved(&asker, &question, answer, &[]);
        let builtins = subject == Subject::Builtins;
        let rerun = tools.as_ref().filter(|_| !builtins).map(|_| call.id.as_str());
        toolwright::mcp::ask::record(
            audit.as_ref(),
            ASKED_ON_TERMINAL,
            &call.id,
            &call.name,
            &question,
            answer,
            rerun,
        );
        match tools {
            Some(tools) if builtins => {
                registry.update(|r| r.replace_builtin_tools(tools));
                let mut stderr = std::io::stderr().lock();
                let _ = writeln!(
                    stderr,
                    "{}",
                    toolwright::mcp::ask::builtins_allowed(&question, answer)
                );
            }
            Some(tools) => {
                registry.update(|r| r.replace_extension_tools(tools));
                again.push(call.clone());
            }
            None => {}
        }
    }
    if again.is_empty() {
        return None;
    }
    let message = toolwright::AssistantMessage {
        tool_calls: again,
        ..Default::default()
    };
    Some(session.run(&message, sink, cancel).await)
}

/// Ask `question` on the terminal: the question on stderr, one line of answer from stdin. About the built-ins,
/// only always or deny: their call is not run again, and `exec` runs one batch, so a grant for the session would
/// allow nothing.
fn prompt(question: &Question) -> toolwright::ask::Answer {
    use std::io::BufRead;
    let builtins = question.subject == Subject::Builtins;
    let mut stderr = std::io::stderr().lock();
    let choices = if builtins {
        "[a]lways (written to your policy file), [d]eny"
    } else {
        "[o]nce, [s]ession, [a]lways (written to your policy file), [d]eny"
    };
    let _ = write!(stderr, "{}\n  {choices}? ", question.text());
    let _ = stderr.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return toolwright::ask::Answer::Unanswered;
    }
    let choice = match line.trim() {
        "o" | "once" if !builtins => "once",
        "s" | "session" if !builtins => "session",
        "a" | "always" => "always",
        "d" | "deny" | "n" | "no" => "deny",
        _ => "",
    };
    question.answer(choice)
}

/// A plugin's questions answered on the terminal (`toolwright exec --ask`, [`toolwright::client`]): a form field by
/// field on stderr, read from stdin; the roots are the workspace; there is no model to ask. One question at a
/// time, whichever call of the batch asks.
pub struct TerminalInput {
    /// The workspace: the one root.
    pub cwd: PathBuf,
    /// Taken while a question is on the terminal.
    pub turn: tokio::sync::Mutex<()>,
}

impl toolwright::client::ClientInput for TerminalInput {
    fn ask<'a>(
        &'a self,
        _plugin: &'a str,
        requests: Vec<toolwright::client::InputRequest>,
    ) -> toolwright::BoxFuture<'a, Result<Vec<serde_json::Value>, toolwright::client::AskError>> {
        use toolwright::client::AskError;
        Box::pin(async move {
            let _turn = self.turn.lock().await;
            let mut answers = Vec::with_capacity(requests.len());
            for request in requests {
                let answer = match request.method.as_str() {
                    "elicitation/create" => {
                        let params = request.params.clone();
                        tokio::task::spawn_blocking(move || fill_in(&params))
                            .await
                            .map_err(|e| AskError::Failed(format!("the terminal's question failed: {e}")))?
                    }
                    "roots/list" => {
                        let uri = format!("file://{}", self.cwd.display());
                        serde_json::json!({ "roots": [{ "uri": uri, "name": "workspace" }] })
                    }
                    method => {
                        return Err(AskError::Failed(format!(
                            "There is no model to ask on the terminal ({method} of {:?})",
                            request.key
                        )));
                    }
                };
                answers.push(answer);
            }
            Ok(answers)
        })
    }

    fn answers(&self) -> Vec<&'static str> {
        vec!["elicitation/create", "roots/list"]
    }
}

/// A form (`elicitation/create`'s parameters) filled in on the terminal: its message, then each field of its
/// schema in turn (an empty line takes the default; `!decline` declines, the end of input cancels). The
/// `ElicitResult`.
fn fill_in(params: &serde_json::Value) -> serde_json::Value {
    use std::io::BufRead;
    use toolwright::text::escape;
    let mut stderr = std::io::stderr().lock();
    let message = params["message"].as_str().unwrap_or_default();
    let _ = writeln!(stderr, "{}  (!decline to decline)", escape(message));
    let schema = &params["requestedSchema"];
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let mut content = serde_json::Map::new();
    let empty = serde_json::Map::new();
    for (name, field) in schema["properties"].as_object().unwrap_or(&empty) {
        let kind = field["type"].as_str().unwrap_or("string");
        let choices: Vec<String> = field["enum"]
            .as_array()
            .or_else(|| field["oneOf"].as_array())
            .map(|c| {
                c.iter()
                    .filter_map(|v| v.as_str().or_else(|| v["const"].as_str()).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        loop {
            let mut hint = kind.to_owned();
            if !choices.is_empty() {
                hint = format!(
                    "one of {}",
                    choices
                        .iter()
                        .map(|c| escape(c).into_owned())
                        .collect::<Vec<_>>()
                        .join("|")
                );
            }
            if let Some(default) = field.get("default") {
                hint.push_str(&format!(", default {}", escape(&default.to_string())));
            }
            let _ = write!(stderr, "  {} ({hint}): ", escape(name));
            let _ = stderr.flush();
            let mut line = String::new();
            match std::io::stdin().lock().read_line(&mut line) {
                Ok(0) | Err(_) => return serde_json::json!({ "action": "cancel" }),
                Ok(_) => {}
            }
            let line = line.trim();
            if line == "!decline" {
                return serde_json::json!({ "action": "decline" });
            }
            if line.is_empty() {
                match field.get("default") {
                    Some(default) => {
                        content.insert(name.clone(), default.clone());
                        break;
                    }
                    None if !required.contains(&name.as_str()) => break,
                    None => continue,
                }
            }
            let value = match kind {
                "boolean" => match line {
                    "y" | "yes" | "true" => Some(serde_json::Value::Bool(true)),
                    "n" | "no" | "false" => Some(serde_json::Value::Bool(false)),
                    _ => None,
                },
                "integer" => line.parse::<i64>().ok().map(Into::into),
                "number" => line.parse::<f64>().ok().map(Into::into),
                _ if !choices.is_empty() && !choices.iter().any(|c| c == line) => None,
                _ => Some(serde_json::Value::String(line.to_owned())),
            };
            match value {
                Some(value) => {
                    content.insert(name.clone(), value);
                    break;
                }
                None => {
                    let _ = writeln!(
                        stderr,
                        "  not a {kind}{}",
                        if choices.is_empty() { "" } else { " of the choices" }
                    );
                }
            }
        }
    }
    serde_json::json!({ "action": "accept", "content": content })
}
