//! Grants asked for while serving (`[ask] grants = true`, [`toolwright::ask`]): what an approval does for
//! `toolwright mcp`. A grant for once or for the session is the plugin's grants decided again with it added to the
//! user's policy in memory; one for always is also written to the user's policy file with the editor
//! `toolwright plugins add` uses, pinning the plugin's digest, so the plugin stays bound to what was approved.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use toolwright::ask::{Grant, Question, Refused};
use toolwright::definition::ToolDefinition;
use toolwright::mcp::ask::GrantAsker;
use toolwright::sdk::Capability;
use toolwright::toolset::Regrants;

/// The grants kept for this server's lifetime, by plugin, and the latest loaded toolset's [`Regrants`].
#[derive(Clone)]
pub struct Kept {
    regrants: Arc<Mutex<Regrants>>,
    grants: Arc<Mutex<BTreeMap<String, Vec<Grant>>>>,
}

impl Kept {
    /// Grants asked from `regrants` (a loaded toolset's), none kept yet.
    pub fn new(regrants: Regrants) -> Self {
        Kept {
            regrants: Arc::new(Mutex::new(regrants)),
            grants: Arc::default(),
        }
    }

    /// A toolset was loaded again: ask from it, and give its plugins the grants kept — `tools` (its plugin tools)
    /// with each such plugin's tools in their place.
    pub fn reloaded(&self, regrants: Regrants, tools: &mut [ToolDefinition]) {
        let kept = self.grants.lock().unwrap_or_else(PoisonError::into_inner).clone();
        for (plugin, grants) in &kept {
            for widened in regrants.tools_with(plugin, grants).unwrap_or_default() {
                if let Some(slot) = tools.iter_mut().find(|t| t.name == widened.name) {
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

    /// The grants kept for `plugin`, with `extra`.
    fn with(&self, plugin: &str, extra: Option<&Grant>) -> Vec<Grant> {
        let mut grants = self
            .grants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(plugin)
            .cloned()
            .unwrap_or_default();
        grants.extend(extra.cloned());
        grants
    }

    fn keep(&self, question: &Question) {
        let mut kept = self.grants.lock().unwrap_or_else(PoisonError::into_inner);
        let grants = kept.entry(question.plugin.clone()).or_default();
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
    fn question(&self, plugin: &str, refused: &[Refused]) -> Option<Question> {
        self.kept.regrants().question(plugin, refused)
    }

    fn once(&self, question: &Question) -> Option<Vec<ToolDefinition>> {
        let grants = self.kept.with(&question.plugin, Some(&question.grant));
        self.kept.regrants().tools_with(&question.plugin, &grants)
    }

    fn session(&self, question: &Question) -> Option<Vec<ToolDefinition>> {
        self.kept.keep(question);
        let grants = self.kept.with(&question.plugin, None);
        self.kept.regrants().tools_with(&question.plugin, &grants)
    }

    fn always(&self, question: &Question) -> Result<Vec<ToolDefinition>, String> {
        let path = self
            .policy_file
            .as_ref()
            .ok_or("there is no user policy file to write to (neither XDG_CONFIG_HOME nor HOME is set)")?;
        let regrants = self.kept.regrants();
        let sha256 = regrants
            .sha256(&question.plugin)
            .ok_or_else(|| format!("the plugin {} is no longer loaded", question.plugin))?;
        let capability = match &question.grant {
            Grant::Read(dir) => Capability::Read(dir.clone()),
            Grant::Write(dir) => Capability::Write(dir.clone()),
            Grant::Spawn(program) => Capability::Spawn(program.clone()),
        };
        let mut document = super::install::policy_document(path).map_err(|e| format!("{e:#}"))?;
        super::install::grant_and_pin(&mut document, &question.plugin, &[capability], &sha256);
        super::install::save_policy(path, &document).map_err(|e| format!("{e:#}"))?;
        tracing::info!(plugin = %question.plugin, policy = %path.display(), "a grant asked for was written");
        self.session(question)
            .ok_or_else(|| format!("the plugin {} cannot be given the grant", question.plugin))
    }
}

/// Who answers the questions of `toolwright exec --ask`, in the audit log.
const ASKED_ON_TERMINAL: &str = "the user, asked on the terminal";

/// `toolwright exec --ask`: after the batch, for each call of `message` that ended refused something its plugin
/// requested, ask on the terminal (the question on stderr, the answer from stdin) and, on approval, run the call
/// again (its events follow; its last `tool_execution_end` is its result). Returns the batch run again, if any.
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
        let Some((plugin, refused)) = session.options().refusals.take(&call.id) else {
            continue;
        };
        let own = registry.read(|r| {
            r.definition(&call.name)
                .and_then(|d| d.origin.as_ref())
                .and_then(|o| o.plugin.clone())
        });
        if !result.is_error || own.as_deref() != Some(plugin.as_str()) {
            continue;
        }
        let Some(question) = asker.question(&plugin, &refused) else {
            continue;
        };
        let answer = prompt(&question);
        let tools = toolwright::mcp::ask::approved(&asker, &question, answer);
        let rerun = tools.as_ref().map(|_| call.id.as_str());
        toolwright::mcp::ask::record(
            audit.as_ref(),
            ASKED_ON_TERMINAL,
            &call.id,
            &call.name,
            &question,
            answer,
            rerun,
        );
        if let Some(tools) = tools {
            registry.update(|r| r.replace_extension_tools(tools));
            again.push(call.clone());
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

/// Ask `question` on the terminal: the question on stderr, one line of answer from stdin.
fn prompt(question: &Question) -> toolwright::ask::Answer {
    use std::io::{BufRead, Write};
    let mut stderr = std::io::stderr().lock();
    let _ = write!(
        stderr,
        "{}\n  [o]nce, [s]ession, [a]lways (written to your policy file), [d]eny? ",
        question.text()
    );
    let _ = stderr.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return toolwright::ask::Answer::Unanswered;
    }
    let choice = match line.trim() {
        "o" | "once" => "once",
        "s" | "session" => "session",
        "a" | "always" => "always",
        "d" | "deny" | "n" | "no" => "deny",
        _ => "",
    };
    toolwright::ask::Answer::from_choice(choice)
}
