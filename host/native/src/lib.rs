//! # toolwright-native
//!
//! Native tools: an [`sdk::Tool`](toolwright_sdk::Tool) linked into the host becomes a [`ToolDefinition`]
//! whose calls run where their [`Placement`] says, with a [`Ctx`] backed by cap-std grants and real processes.
//!
//! ## Map
//!
//! - this file: [`NativeEnv`] (what a native tool may touch) and [`tool_definition`], the adapter (what a tool's
//!   work may do, [`Work`], decides where its calls run: [`Placement::of`]).
//! - [`grants`]: directories as cap-std capabilities ([`grants::GrantedFiles`]), and the refusal texts that name
//!   the grant which would allow an access.
//! - [`builtins`]: the eight built-in tools, linked natively from their plugin crates.
//! - `programs`: which programs a tool may start, resolved from the host's `PATH` ([`Programs`],
//!   [`ProgramGrant`]), each start made a [`Launch`].
//! - [`sandbox`]: the one sandbox every process the host starts runs in: Landlock rules ([`Confinement`]),
//!   the seccomp filter, a network namespace of its own, the per-call cgroup with its limits ([`CallScope`]), the
//!   processes themselves ([`NativeProcess`], and [`without_forks`], which work that must not meet a fork runs
//!   in), the built-ins' modes ([`sandbox::BuiltinSandbox`]) and what a refusal tells the model
//!   ([`sandbox::explain`]).
//! - `mutation`: pi's file mutation queue ([`FileMutationQueue`]).
//! - [`reach`]: what a plugin may touch as its nested calls carry it ([`Reach`]), and the intersections that
//!   keep a built-in it calls within it ([`NativeEnv::narrowed`]).

pub mod builtins;
pub mod grants;
mod mutation;
mod programs;
pub mod reach;
pub mod sandbox;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright_sdk::{
    CallOutcome, Command, Ctx, Files, LogLevel, Process, TempFile, Tool, ToolError, ToolResult, paths,
};

pub use mutation::FileMutationQueue;
pub use programs::{GrantedProgram, ProgramGrant, Programs, Unresolved, steers_code};
pub use reach::Reach;
pub use sandbox::{
    CallScope, Confinement, Launch, NativeProcess, SYSTEM_DEVICES, SYSTEM_EXEC, SYSTEM_READ, Tcp,
    landlock_abi, without_forks,
};

use crate::grants::GrantedFiles;
use toolwright_core::definition::{ToolContext, ToolDefinition, ToolSource};
use toolwright_core::pipeline::{Blocked, Placement, Work};
use toolwright_core::tool::{CallSink, ToolExecution};

/// What grants are made from in the host's own process environment: read once, by whoever assembles a
/// session ([`HostEnv::current`]), and passed down, so nothing below reads `std::env` to decide a grant.
#[derive(Debug, Clone, Default)]
pub struct HostEnv {
    /// The host's `PATH`, where granted programs are looked up.
    pub path: String,
    /// The home directory.
    pub home: Option<String>,
    /// The temporary directory.
    pub temp_dir: PathBuf,
    /// Every variable, as `(name, value)`.
    pub vars: Vec<(String, String)>,
}

impl HostEnv {
    /// `PATH` when a host has none.
    pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

    /// This process's environment.
    pub fn current() -> Self {
        HostEnv {
            path: std::env::var("PATH").unwrap_or_else(|_| Self::DEFAULT_PATH.into()),
            home: std::env::var("HOME").ok(),
            temp_dir: std::env::temp_dir(),
            vars: std::env::vars().collect(),
        }
    }

    /// The variables named in `granted` (`*`: all), minus `denied` (`*`: all).
    pub fn vars_granted(&self, granted: &[String], denied: &[String]) -> Vec<(String, String)> {
        if denied.iter().any(|d| d == "*") {
            return Vec::new();
        }
        let all = granted.iter().any(|v| v == "*");
        self.vars
            .iter()
            .filter(|(k, _)| (all || granted.contains(k)) && !denied.contains(k))
            .cloned()
            .collect()
    }
}

/// What native tools run with: the workspace, the grants, the environment and the shared file queue.
#[derive(Debug, Clone)]
pub struct NativeEnv {
    /// The workspace (absolute).
    pub cwd: String,
    /// The user's home directory.
    pub home: Option<String>,
    /// The files the tools may touch.
    pub files: Arc<GrantedFiles>,
    /// The programs they may start.
    pub programs: ProgramGrant,
    /// The environment variables they see.
    pub env: Arc<Vec<(String, String)>>,
    /// Where temporary files go.
    pub temp_dir: PathBuf,
    /// Where what the sandbox's proxy refuses the programs of a call is recorded, by call id, to be asked about
    /// ([`toolwright_core::ask`]; `[ask] grants = true`): none, nothing is recorded. Never for a call a plugin
    /// made (its refusals are not the built-ins' to ask about).
    pub refusals: Option<toolwright_core::ask::RefusalBook>,
    /// pi's file mutation queue, shared by every tool of a session.
    pub mutations: Arc<FileMutationQueue>,
}

impl NativeEnv {
    /// The built-ins' default: read anywhere, write in `cwd`, start any program in the `workspace-write` sandbox
    /// ([`sandbox`]), this process's environment.
    pub fn builtin(cwd: &std::path::Path) -> io::Result<Self> {
        Self::builtin_in(cwd, &HostEnv::current())
    }

    /// The built-ins' default in the host environment `host`: read anywhere, write in `cwd`, start any program in
    /// the `workspace-write` sandbox, every variable.
    pub fn builtin_in(cwd: &std::path::Path, host: &HostEnv) -> io::Result<Self> {
        let files = GrantedFiles::open(&grants::builtin_default(cwd))?;
        Ok(NativeEnv {
            cwd: paths::normalize(&cwd.to_string_lossy()),
            home: host.home.clone(),
            files: Arc::new(files),
            programs: sandbox::BuiltinSandbox::default_for(cwd, host).programs(),
            env: Arc::new(host.vars.clone()),
            temp_dir: host.temp_dir.clone(),
            mutations: Arc::default(),
            refusals: None,
        })
    }
}

/// The [`Ctx`] of one native call.
struct NativeCtx {
    /// Its work is [placed here](Placement::Here), on the thread that polls its batch: it may not wait for the
    /// batch (updates, nested calls).
    here: bool,
    env: NativeEnv,
    cwd: String,
    cancel: CancellationToken,
    updates: CallSink,
    tool: String,
    /// Who starts its programs, as refusals name it: the tool, and the plugin whose authority it runs under.
    who: String,
    /// The session context: nested calls go through it.
    session: Option<ToolContext>,
    /// The runtime the call's blocking thread belongs to, for nested calls.
    runtime: tokio::runtime::Handle,
    /// The processes the call started: all killed when the call ends (this context is dropped).
    processes: CallScope,
    /// What their proxies refused each of its processes, while they run (when refusals are recorded).
    proxied: Option<Proxied>,
}

/// What the proxies of a call's processes refused them, one list per process (at most
/// [`toolwright_core::ask::MAX_REFUSALS_PER_CALL`] processes).
type Proxied = Arc<std::sync::Mutex<Vec<Arc<std::sync::Mutex<Vec<String>>>>>>;

/// What `proxied` holds, as refused connections.
fn proxy_refused(proxied: &Proxied) -> Vec<toolwright_core::ask::Refused> {
    let lists = proxied.lock().unwrap_or_else(|p| p.into_inner());
    let mut refused = Vec::new();
    for list in lists.iter() {
        for address in list.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            refused.push(toolwright_core::ask::Refused::Connect {
                address: address.clone(),
            });
        }
    }
    refused
}

impl NativeCtx {
    fn run_nested(&self, calls: &[(String, Value)]) -> Vec<CallOutcome> {
        let Some(session) = self.session.as_ref().filter(|_| !self.here) else {
            return calls
                .iter()
                .map(|_| CallOutcome::error(toolwright_sdk::NESTED_CALLS_UNAVAILABLE))
                .collect();
        };
        // The tool runs on a blocking thread of the runtime: waiting here blocks no async worker.
        self.runtime.block_on(futures::future::join_all(calls.iter().map(
            |(name, args)| async move {
                let outcome = session
                    .execute_tool(name, args.clone(), CallSink::discard())
                    .await;
                CallOutcome {
                    result: outcome.result,
                    is_error: outcome.is_error,
                    duration_ms: outcome.duration_ms,
                }
            },
        )))
    }
}

impl Ctx for NativeCtx {
    fn cwd(&self) -> &str {
        &self.cwd
    }

    fn home(&self) -> Option<String> {
        self.env.home.clone()
    }

    fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    fn update(&self, partial: ToolResult) {
        if self.here {
            // Nothing consumes updates until the call returns: one the queue has no room for is dropped, never
            // waited for. (The tools placed here send none.)
            self.updates.update(partial);
            return;
        }
        // On the call's blocking thread: a tool sending faster than its updates are consumed waits for room.
        self.updates
            .update_blocking(&self.runtime, partial, self.cancel.cancelled());
    }

    fn log(&self, level: LogLevel, message: &str) {
        let tool = &self.tool;
        match level {
            LogLevel::Debug => tracing::debug!(tool, "{message}"),
            LogLevel::Info => tracing::info!(tool, "{message}"),
            LogLevel::Warn => tracing::warn!(tool, "{message}"),
            LogLevel::Error => tracing::error!(tool, "{message}"),
        }
        self.updates.log(level, message);
    }

    fn files(&self) -> &dyn Files {
        &*self.env.files
    }

    fn spawn(&self, command: &Command) -> io::Result<Box<dyn Process>> {
        let launch = match self.env.programs.launch(command, &self.env.env, &self.who) {
            Ok(launch) => launch,
            Err(refusal) => {
                self.updates
                    .spawned(&command.program, &command.args, Some(&refusal));
                return Err(io::Error::new(io::ErrorKind::PermissionDenied, refusal));
            }
        };
        match NativeProcess::spawn_for(command, &launch, &self.processes, self.updates.clone()) {
            Ok(process) => {
                self.updates.spawned(&command.program, &command.args, None);
                if let (Some(proxied), Some(refused)) = (&self.proxied, process.proxy_refusals()) {
                    let mut lists = proxied.lock().unwrap_or_else(|p| p.into_inner());
                    if lists.len() < toolwright_core::ask::MAX_REFUSALS_PER_CALL {
                        lists.push(refused);
                    }
                }
                Ok(Box::new(process))
            }
            Err(e) => {
                let error = format!("cannot start {}: {e}", command.program);
                self.updates.spawn_failed(&command.program, &command.args, &error);
                Err(e)
            }
        }
    }

    fn temp_file(&self, prefix: &str, suffix: &str) -> io::Result<TempFile> {
        let name = format!("{prefix}-{:016x}{suffix}", random_u64());
        let path = self.env.temp_dir.join(name);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok(TempFile {
            path: path.to_string_lossy().into_owned(),
            writer: Box::new(file),
        })
    }

    fn env(&self) -> Vec<(String, String)> {
        self.env.env.as_ref().clone()
    }

    fn call_tool(&self, name: &str, arguments: &Value) -> CallOutcome {
        let calls = [(name.to_owned(), arguments.clone())];
        self.run_nested(&calls)
            .pop()
            .unwrap_or_else(|| CallOutcome::error(toolwright_sdk::NESTED_CALLS_UNAVAILABLE))
    }

    fn call_tools(&self, calls: &[(String, Value)]) -> Vec<CallOutcome> {
        self.run_nested(calls)
    }

    fn tools(&self) -> Vec<toolwright_sdk::LoadoutTool> {
        self.session.as_ref().map(ToolContext::tools).unwrap_or_default()
    }
}

/// 64 random bits from the standard library's per-process random hash keys.
fn random_u64() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(std::process::id().into());
    hasher.finish()
}

/// The [`ToolDefinition`] of a native tool: calls run on a thread of tokio's blocking pool ([`Work::Waiting`]);
/// calls modifying the same file wait for each other in call order.
pub fn tool_definition(tool: Arc<dyn Tool>, env: NativeEnv, source: ToolSource) -> ToolDefinition {
    definition(tool, env, source, Work::Waiting)
}

/// [`tool_definition`] for a tool whose work is [short](Work::Short): brief, and never sends updates, makes
/// nested calls nor waits for another call (as the built-ins but `bash`). A call that runs alone is placed on
/// the thread that polls its batch (under a pipeline
/// [`with_work_here`](toolwright_core::Pipeline::with_work_here)), and beside others on one of a few short-work
/// threads, instead of a thread of tokio's blocking pool and back.
pub fn short_tool_definition(tool: Arc<dyn Tool>, env: NativeEnv, source: ToolSource) -> ToolDefinition {
    definition(tool, env, source, Work::Short)
}

/// The [`ToolDefinition`] of a native tool whose work may do what `work` says (never [`Work::Relaying`]: a
/// native tool's context hands nothing on by itself).
pub(crate) fn definition(
    tool: Arc<dyn Tool>,
    env: NativeEnv,
    source: ToolSource,
    work: Work,
) -> ToolDefinition {
    // Native code has the host's authority: the audit log keeps out what looks like a secret in its environment.
    let origin = Arc::new(toolwright_core::audit::Origin {
        secrets: Arc::new(toolwright_core::audit::secret_looking(&env.env)),
        ..source.origin()
    });
    let spec = toolwright_sdk::declaration(tool.as_ref());
    let mutates = spec.mutates_files;
    let name = spec.name.clone();
    let runner = tool.clone();
    let execute = move |run: ToolExecution, ctx: Option<ToolContext>| {
        let (tool, env, name) = (runner.clone(), env.clone(), name.clone());
        async move {
            // Called by a plugin: within the plugin's grants as well as its own.
            let authority = ctx.as_ref().and_then(|c| c.authority.clone());
            let (env, name) = match authority.as_deref().and_then(Reach::of) {
                Some(reach) => match env.narrowed(reach) {
                    Ok(narrowed) => (narrowed, name),
                    Err(e) => {
                        return Err(ToolError::new(format!(
                            "cannot open the grants {name} runs under for {}: {e}",
                            authority.as_deref().map_or("", |a| a.principal())
                        )));
                    }
                },
                None => (env, name),
            };
            // pi's built-ins resolve against the context's cwd when one is given.
            let cwd = ctx
                .as_ref()
                .map_or_else(|| env.cwd.clone(), |c| paths::normalize(&c.cwd.to_string_lossy()));
            let target = if mutates {
                tool.file_mutations().and_then(|m| m.mutated_path(&run.params))
            } else {
                None
            };
            let _turn = match target {
                Some(path) => Some(
                    env.mutations
                        .lock(&paths::resolve_to_cwd(&path, &cwd, env.home.as_deref()))
                        .await,
                ),
                None => None,
            };
            // Placed here (no thread hop there and back), a short tool is refused updates that wait and nested
            // calls; it makes neither.
            let placement = Placement::of(work);
            let cancel = run.cancel;
            let who = match &authority {
                Some(a) => format!("{name}, called by {}", a.principal()),
                None => name.clone(),
            };
            // Asked about only when the model called the tool: a plugin calling it gets nothing asked for the
            // built-ins.
            let book = env.refusals.clone().filter(|_| authority.is_none());
            let proxied = book.as_ref().map(|_| Proxied::default());
            let ctx = NativeCtx {
                here: placement == Placement::Here,
                tool: name,
                who,
                env,
                cwd,
                cancel: cancel.clone(),
                updates: run.updates,
                session: ctx,
                runtime: tokio::runtime::Handle::current(),
                processes: CallScope::new(),
                proxied: proxied.clone(),
            };
            let call_id = run.call_id;
            let params = run.params;
            let recorded_as = call_id.clone();
            let job = move || tool.execute(&call_id, params, &ctx);
            let ran = placement.run(&cancel, job).await;
            if let (Some(book), Some(proxied)) = (book, proxied) {
                let subject = toolwright_core::ask::Subject::Builtins;
                book.record(&recorded_as, subject, proxy_refused(&proxied));
            }
            match ran {
                Ok(result) => result,
                Err(Blocked::Panicked(payload)) => Err(ToolError::new(format!(
                    "execute of a native tool panicked: {}",
                    panic_message(payload)
                ))),
                Err(Blocked::Aborted) => Err(ToolError::new("Operation aborted")),
            }
        }
    };
    let mut definition = ToolDefinition::from_spec(&spec, source, execute);
    // pi's renderCall / renderResult: the tool's own, when it renders (a `None` leaves it to the UI).
    let renderer = tool.clone();
    definition.render_call = Some(Arc::new(move |args: &Value| renderer.render_call(args)));
    let renderer = tool.clone();
    definition.render_result = Some(Arc::new(move |result: &ToolResult, expanded, partial| {
        renderer.render_result(result, expanded, partial)
    }));
    if spec.prepares_loadout {
        let hook = tool.clone();
        definition.prepare_loadout = Some(Arc::new(
            move |loadout: &toolwright_core::definition::ToolLoadout| {
                hook.loadout_hook()
                    .map_or(Ok(None), |h| h.prepare_loadout(&loadout.to_sdk()))
            },
        ));
    }
    if spec.prepares_arguments {
        let shim = tool;
        definition.prepare_arguments = Some(Arc::new(move |args: &Value| {
            let prepared = match shim.arguments_shim() {
                Some(s) => s.prepare_arguments(args)?,
                None => None,
            };
            Ok(prepared.unwrap_or_else(|| args.clone()))
        }));
    }
    definition.origin = Some(origin);
    definition
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Condvar, Mutex};
    use toolwright_sdk::ToolSpec;

    /// Waits until all `.1` calls are running at once, for at most 20 s (then fails, so that a failure cannot
    /// leave blocking threads waiting for ever).
    struct Meet(Arc<(Mutex<usize>, Condvar)>, usize);

    impl Tool for Meet {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "meet".into(),
                ..Default::default()
            }
        }

        fn execute(&self, _: &str, _: Value, _: &dyn Ctx) -> Result<ToolResult, ToolError> {
            let (arrived, all_here) = &*self.0;
            let mut count = arrived.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *count += 1;
            all_here.notify_all();
            let (count, waited) = all_here
                .wait_timeout_while(count, std::time::Duration::from_secs(20), |n| *n < self.1)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if waited.timed_out() {
                return Err(ToolError::new(format!(
                    "only {} of {} calls ran at once",
                    *count, self.1
                )));
            }
            Ok(ToolResult::text("met"))
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_beside_others_share_a_few_threads_but_calls_that_wait_for_each_other_all_run() {
        // More calls than there are short-work threads, each waiting for all the others (as `read`s of a FIFO wait
        // for the `write` that opens it): a bound that made them wait for a thread for ever would never end.
        let calls = toolwright_core::pipeline::short_threads() * 3;
        let meet = Arc::new(Meet(Arc::default(), calls));
        let env = NativeEnv::builtin(&std::env::temp_dir()).unwrap();
        let definition = definition(meet, env, ToolSource::Builtin, Work::Short);
        let runs = (0..calls).map(|i| {
            definition.execute.execute(
                ToolExecution {
                    call_id: format!("c{i}"),
                    params: serde_json::json!({}),
                    cancel: CancellationToken::new(),
                    updates: CallSink::discard(),
                },
                None,
            )
        });
        for outcome in futures::future::join_all(runs).await {
            let text = outcome
                .map(|r| r.text_content())
                .map_err(|e| e.message().to_owned());
            assert_eq!(text, Ok("met".to_owned()));
        }
    }
}
