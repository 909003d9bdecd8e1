//! `toolwright mcp`: the active, declared tools served over the Model Context Protocol on stdio, or on
//! streamable HTTP with `--http`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::Args;
use toolwright::mcp::http::{DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SESSIONS};
use toolwright::toolset::{Deferred, Linking, Toolset, ToolsetOptions};

/// Arguments of `toolwright mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The workspace the tools work in (default: the current directory).
    #[arg(long)]
    pub(super) cwd: Option<PathBuf>,
    /// How often to look for plugin files added, changed or removed, in milliseconds (0: never; then nothing
    /// compiles in the background: every plugin is loaded before the server answers, those described in the
    /// cache compiled at their first calls).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    watch_plugins: u64,
    /// How long a call waits for the plugins it needs (its own, every handler) while they compile in the
    /// background, in seconds; then it is answered with an error result naming them.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    call_wait: u64,
    /// Until how long after the start `tools/list` waits for plugins whose tools are not known yet (neither
    /// loaded nor described in the cache) to compile, in milliseconds; later ones join with
    /// `notifications/tools/list_changed`.
    #[arg(long, value_name = "MS", default_value_t = 3000)]
    list_wait: u64,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (port 0 picks a free one; the address is
    /// printed on stdout). Only loopback addresses, unless a token is set.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// A file holding the bearer token every HTTP request must carry (`Authorization: Bearer …`); required to
    /// listen beyond loopback.
    #[arg(long, value_name = "FILE", requires = "http")]
    token_file: Option<PathBuf>,
    /// At most this many HTTP connections at once (fewer if the open-file limit leaves less room); beyond it, the
    /// oldest connection that never sent the token is closed, or the new one when all have.
    #[arg(long, value_name = "N", requires = "http", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// At most this many live MCP sessions (2025-11-25 clients over HTTP); beyond it, the least recently used
    /// session with no request running is closed.
    #[arg(long, value_name = "N", requires = "http", default_value_t = DEFAULT_MAX_SESSIONS)]
    max_sessions: usize,
    /// Seconds an HTTP client has to send a request's headers (and to start its next request on a kept-alive
    /// connection) before the connection is closed.
    #[arg(long, value_name = "SECS", requires = "http", default_value_t = DEFAULT_HEADER_TIMEOUT.as_secs())]
    header_timeout: u64,
    /// End a session's event stream when its request is still unanswered after SECS, for the client to
    /// reconnect with `Last-Event-ID` and get the rest (2025-11-25's polling): a long call then holds a
    /// connection at most SECS at a time. Clients that do not reconnect lose such answers, so it is off unless
    /// given.
    #[arg(long, value_name = "SECS", requires = "http", value_parser = clap::value_parser!(u64).range(1..))]
    poll_after: Option<u64>,
    /// Also accept this `Host` header (`name` or `name:port`) over HTTP; loopback names always pass.
    #[arg(long = "allow-host", value_name = "HOST", requires = "http")]
    allow_hosts: Vec<String>,
    /// Also accept requests from this browser `Origin` (`https://app.example:443`, `:*` for any port);
    /// loopback origins always pass, and requests without an `Origin` are not browsers'.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    allow_origins: Vec<String>,
    /// Do not repeat `structuredContent` as a serialized JSON text block for 2025-06-18 and 2025-11-25 clients
    /// (which the spec asks for; it makes the model read a structured result twice).
    #[arg(long)]
    no_structured_text: bool,
    /// How long a call run as a task (and its result) is kept after it started, in seconds; a call still
    /// running then is cancelled.
    #[arg(long, value_name = "SECS", default_value_t = toolwright::mcp::tasks::DEFAULT_TASK_TTL.as_secs())]
    task_ttl: u64,
    /// At most this many tasks kept, running or finished: the oldest finished one makes room; while all run, a
    /// new task is refused.
    #[arg(long, value_name = "N", default_value_t = toolwright::mcp::tasks::DEFAULT_MAX_TASKS)]
    max_tasks: usize,
    /// Offer no MCP resources and prompts: neither the workspace's files (offered while the built-in `read` is
    /// served, and read under its grants) nor the plugins' (their `offers` export).
    #[arg(long)]
    no_resources: bool,
    /// Append one JSON line per tool call and nested call to FILE (besides the log the user's policy names with
    /// `audit = "FILE"`); `toolwright audit` prints it.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    #[command(flatten)]
    pub(super) tools: super::ToolArgs,
}

/// How often `toolwright dev`'s server looks for a new build, in milliseconds.
const DEV_WATCH_MS: u64 = 200;

/// The plugin files, the policy files and the lockfiles beside them (an approval, a changed grant), the user's
/// trusted projects and the MCP configuration files, with their sizes and modification times: a change of any is a reason to reload.
fn fingerprint(options: &ToolsetOptions) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let policies = options.policy_files.iter().chain(&options.project_policy);
    let files = options
        .plugin_files()
        .into_iter()
        .map(|(path, _)| path)
        .chain(policies.clone().cloned())
        .chain(policies.map(|p| toolwright::trust::lock::beside(p)))
        // Trusting the project (or taking the trust back) while serving.
        .chain(toolwright::trust::project::trust_file())
        // The MCP servers' configuration.
        .chain(options.mcp_files.iter().cloned())
        .chain(toolwright::toolset::project_mcp_files(&options.cwd));
    files
        .map(|path| {
            let meta = std::fs::metadata(&path).ok();
            let size = meta.as_ref().map_or(0, |m| m.len());
            let modified = meta.and_then(|m| m.modified().ok());
            (path, size, modified)
        })
        .collect()
}

/// The HTTP options, after checking the address and reading the token.
fn http_options(args: &McpArgs, addr: SocketAddr) -> anyhow::Result<toolwright::mcp::HttpOptions> {
    let token = match &args.token_file {
        None => None,
        Some(path) => {
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(path)
                    .with_context(|| format!("cannot read the token file {}", path.display()))?
                    .permissions()
                    .mode();
                anyhow::ensure!(
                    mode & 0o077 == 0,
                    "the token file {} is open to other users (mode {:04o}): `chmod 600` it",
                    path.display(),
                    mode & 0o777
                );
            }
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the token file {}", path.display()))?;
            let token = text.trim().to_owned();
            anyhow::ensure!(
                token.len() >= 16 && token.bytes().all(|b| b.is_ascii_graphic()),
                "the token in {} must be at least 16 printable ASCII characters without spaces",
                path.display()
            );
            Some(token)
        }
    };
    anyhow::ensure!(
        addr.ip().is_loopback() || token.is_some(),
        "--http {addr} listens beyond loopback: give --token-file, so only clients holding the token get in"
    );
    Ok(toolwright::mcp::HttpOptions {
        allowed_hosts: args.allow_hosts.clone(),
        allowed_origins: args.allow_origins.clone(),
        token,
        max_connections: args.max_connections,
        max_sessions: args.max_sessions,
        header_timeout: Duration::from_secs(args.header_timeout.max(1)),
        poll_after: args.poll_after.map(Duration::from_secs),
        ..Default::default()
    })
}

/// The plugins compiling in the background, locked (briefly: a call's `pending` reads them on the runtime).
fn lock<T>(compiling: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    compiling.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a call of `name` waits for: the plugins left out while they compile, when it must wait for them
/// (`must_wait`), and of the plugins loaded from their descriptions whose code still compiles, every handler
/// and the one offering `name` (a plugin it calls in turn compiles at that call).
fn pending_for(
    name: &str,
    compiling: &Mutex<Vec<Deferred>>,
    linking: &Mutex<Vec<Linking>>,
    registry: &toolwright::registry::SharedRegistry,
) -> Option<toolwright::mcp::Compiling> {
    let deferred = {
        let compiling = lock(compiling);
        if toolwright::toolset::must_wait(&compiling, registry, name) {
            compiling.clone()
        } else {
            Vec::new()
        }
    };
    let linking: Vec<Linking> = lock(linking)
        .iter()
        .filter(|l| !l.is_done() && (l.handler || l.tools.iter().any(|t| t == name)))
        .cloned()
        .collect();
    waiting_for(deferred, linking)
}

/// Waiting for `deferred` and `linking` (none when both are empty).
fn waiting_for(deferred: Vec<Deferred>, linking: Vec<Linking>) -> Option<toolwright::mcp::Compiling> {
    if deferred.is_empty() && linking.is_empty() {
        return None;
    }
    let names: Vec<&str> = deferred
        .iter()
        .map(|d| d.name.as_str())
        .chain(linking.iter().map(|l| l.name.as_str()))
        .collect();
    Some(toolwright::mcp::Compiling {
        plugins: names.join(", "),
        ended: Box::pin(async move {
            for plugin in &deferred {
                plugin.ended().await;
            }
            for plugin in &linking {
                plugin.ended().await;
            }
        }),
    })
}

/// Cancelled on SIGINT or SIGTERM.
fn shutdown_on_signals(
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<tokio_util::sync::CancellationToken> {
    use tokio::signal::unix::{SignalKind, signal};
    let token = tokio_util::sync::CancellationToken::new();
    let _guard = runtime.enter();
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let cancel = token.clone();
    runtime.spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down: cancelling the running calls");
        cancel.cancel();
    });
    Ok(token)
}

pub fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    serve(args, None)
}

/// Serve as `toolwright mcp` does; with `dev` (`toolwright dev`), its latest build is loaded ahead of the plugin
/// directories and a new one reloads the plugins, whatever `--watch-plugins` says.
pub fn serve(mut args: McpArgs, dev: Option<super::dev::Builds>) -> anyhow::Result<ExitCode> {
    if dev.is_some() {
        args.watch_plugins = DEV_WATCH_MS;
    }
    args.tools.dev = dev.as_ref().map(super::dev::Builds::current);
    let http = match args.http {
        Some(addr) => Some((addr, http_options(&args, addr)?)),
        None => None,
    };
    let cwd = super::workspace(args.cwd)?;
    // Nested calls (from plugin tools and codemode) run through the same pipeline; their events are not part of
    // the MCP conversation.
    // While the server watches its plugins, no compile delays `initialize`: plugins whose descriptions are cached
    // are listed at once and compile in the background; installed plugins (handlers too) that are not described
    // compile in the background, and their tools join the list (`tools/list_changed`) when they are compiled.
    let mode = toolwright::ExecutionMode::Parallel;
    let audit_log = args.audit_log.as_deref();
    let session = if args.watch_plugins > 0 {
        args.tools.session_in_background(&cwd, mode, audit_log)?
    } else {
        args.tools.session(&cwd, mode, audit_log)?
    };
    let mut options = session.options().clone();
    let exposures = args.tools.expose.clone();
    let mut seen = fingerprint(&options);
    // The plugins compiling in the background, as of the last load: a call that must wait for them
    // (`toolwright::toolset::must_wait`) waits, and the watcher's next pass takes them in.
    let compiling = Arc::new(Mutex::new(session.toolset().deferred.clone()));
    // The plugins loaded from their cached descriptions compile ahead of their first calls, smallest first.
    let linking = Arc::new(Mutex::new(if args.watch_plugins > 0 {
        toolwright::toolset::link_in_background(session.toolset())
    } else {
        Vec::new()
    }));
    let pending: toolwright::mcp::Pending = {
        let (compiling, linking) = (compiling.clone(), linking.clone());
        let registry = session.dispatcher().registry().clone();
        Box::new(move |name: &str| pending_for(name, &compiling, &linking, &registry))
    };
    // A listing waits (a while) for the plugins whose tools it does not know yet.
    let listing: toolwright::mcp::Listing = {
        let compiling = compiling.clone();
        Box::new(move || {
            let left: Vec<Deferred> = lock(&compiling)
                .iter()
                .filter(|d| !d.is_done())
                .cloned()
                .collect();
            waiting_for(left, Vec::new())
        })
    };
    // Grants asked for while serving ([`super::ask`]): those kept for the session outlive a reload.
    let kept = super::ask::Kept::new(session.toolset().regrants(session.options()));
    let kept_on_reload = kept.clone();
    // The plugins' resources and prompts: those of the latest reload.
    let offerings = toolwright::toolset::PluginOfferings::new(session.toolset());
    let offerings_on_reload = offerings.clone();
    // A handler that was still compiling when the session was built joins its hooks with the reload that loads it.
    let handlers = session.handlers().cloned();
    // The loaded plugins must outlive their tools: the latest reloaded toolset is kept here (the first stays in
    // the session).
    let mut current: Option<Toolset> = None;
    // A server that connects late, lists its tools again (`tools/list_changed`) or drops: the MCP servers' state
    // changed, and their tools with it.
    let mut servers_changed = session.toolset().mcp.servers.as_ref().map(|s| s.changes());
    let reload: toolwright::mcp::Reload = Box::new(move || {
        // A new dev build is a new file: the fingerprint changes with it.
        if let Some(dev) = &dev {
            options.dev = Some(dev.current());
        }
        let now = fingerprint(&options);
        let compiled = lock(&compiling).iter().any(Deferred::is_done);
        let servers = servers_changed
            .as_mut()
            .is_some_and(|c| c.has_changed().unwrap_or(false));
        if now == seen && !compiled && !servers {
            return None;
        }
        if let Some(changes) = servers_changed.as_mut() {
            changes.mark_unchanged();
        }
        seen = now;
        let mut toolset = match Toolset::load(&options) {
            Ok(toolset) => toolset,
            Err(error) => {
                tracing::warn!("the plugin directories changed but cannot be loaded: {error}");
                // Tried again when a file changes, not at every tick.
                lock(&compiling).retain(|d| !d.is_done());
                return None;
            }
        };
        for error in &toolset.errors {
            match super::error_head(error) {
                // The dev build runs in its place, as asked.
                "" => tracing::debug!("{error}"),
                head => tracing::warn!("{head}{error}"),
            }
        }
        *lock(&compiling) = toolset.deferred.clone();
        if let Some(handlers) = &handlers {
            handlers.take_from(&toolset);
        }
        // The new toolset's plugins are other objects: those loaded from descriptions link again (mapped from the
        // cache once the first compile of each is done).
        *lock(&linking) = toolwright::toolset::link_in_background(&toolset);
        // A tool named by --expose may be gone with its plugin: nothing to do for it then.
        for (tool, exposure) in &exposures {
            toolset.set_exposure(tool, *exposure);
        }
        tracing::info!(
            "plugin directories changed: reloaded {} plugin tools",
            toolset.extension_tools.len()
        );
        let mut plugin_tools = toolset.extension_tools.clone();
        kept_on_reload.reloaded(toolset.regrants(&options), &mut plugin_tools);
        offerings_on_reload.replace(&toolset);
        plugin_tools.extend(toolset.mcp_tools().iter().cloned());
        if let Some(servers) = &toolset.mcp.servers {
            servers_changed = Some(servers.changes());
        }
        // The old plugins go once their tools are out of the registry (calls in flight hold their own references).
        drop(current.replace(toolset));
        Some(plugin_tools)
    });
    let watch = (args.watch_plugins > 0).then(|| toolwright::mcp::Watch {
        reload,
        interval: Duration::from_millis(args.watch_plugins),
        pending: Some(pending),
        call_wait: Duration::from_secs(args.call_wait),
        listing: Some(listing),
        list_wait: Duration::from_millis(args.list_wait),
    });
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let structured = toolwright::mcp::Structured {
        text: !args.no_structured_text,
    };
    let tasks = toolwright::mcp::TaskLimits {
        ttl: Duration::from_secs(args.task_ttl.max(1)),
        max_tasks: args.max_tasks.max(1),
        ..Default::default()
    };
    let server = toolwright::mcp::McpServer::with_limits(session.dispatcher().clone(), structured, tasks);
    // Whether anything is asked is the user's policy's (`[ask] grants`), read again with every reload.
    server.ask_grants(toolwright::mcp::ask::Asking {
        refusals: session.options().refusals.clone(),
        asker: Arc::new(super::ask::CliAsker {
            kept,
            policy_file: toolwright::policy::default_files().into_iter().next(),
        }),
    });
    // Plugins ask the clients of their calls at the desk their grants were given.
    server.answer_plugins_at(session.options().client.clone());
    // The workspace as resources: what the built-in `read` serves, under its grants.
    let reads = session.dispatcher().registry().read(|registry| {
        registry
            .definition("read")
            .is_some_and(|d| matches!(d.source, toolwright::definition::ToolSource::Builtin))
    });
    if !args.no_resources {
        server.serve_offerings(offerings);
    }
    if reads && !args.no_resources {
        match toolwright::toolset::builtin_read_files(session.options(), session.toolset().policy()) {
            Ok(files) => {
                server.serve_resources(toolwright::mcp::resources::Workspace::new(&cwd, Arc::new(files)))
            }
            Err(error) => tracing::warn!("the workspace is not offered as resources: {error}"),
        }
    }
    let shutdown = shutdown_on_signals(&runtime)?;
    match http {
        None => runtime.block_on(server.serve_stdio_until(watch, shutdown))?,
        Some((addr, options)) => runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            let local = listener.local_addr().context("the listener has no address")?;
            {
                use std::io::Write;
                let mut stdout = std::io::stdout().lock();
                writeln!(
                    stdout,
                    "Listening on http://{local}{}",
                    toolwright::mcp::http::MCP_PATH
                )?;
                stdout.flush()?;
            }
            let watcher = server.watch_plugins(watch);
            let served = server.serve_http(listener, options, shutdown).await;
            if let Some(watcher) = watcher {
                watcher.abort();
            }
            served.map_err(anyhow::Error::from)
        })?,
    }
    // The calls have finished; plugins and their processes go with the session. The runtime is not waited for
    // in full: on a signal, its blocking read of stdin never returns (the client may keep stdin open).
    runtime.shutdown_timeout(Duration::from_secs(1));
    drop(session);
    Ok(ExitCode::SUCCESS)
}
