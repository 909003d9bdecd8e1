//! # toolwright-mcp
//!
//! Serving the registry's tools over the Model Context Protocol, with the official Rust SDK (`rmcp`), on stdio
//! and streamable HTTP.
//!
//! ## Map
//!
//! - [`McpServer`] (this file) over a session's [`Dispatcher`]: `tools/list`, `tools/call`, `logging/setLevel`,
//!   [`Watch`] ([`Reload`], [`Pending`]) for plugin directories that change while it serves, [`McpServeError`].
//! - [`result`]: tools and results in the shape each protocol revision asks for (structured output); [`texts`]:
//!   what the server itself answers a call with.
//! - [`ask`]: grants asked through the client ([`ask::Asking`], [`ask::GrantAsker`]): a plugin's call refused a
//!   directory or a program it requested asks the user with `elicitation/create` and runs again on approval.
//! - `input`: plugins' questions for the client (`host.ask`, [`toolwright_core::client`]): a session's client is
//!   asked while the call waits; a 2026-07-28 request gets `input_required` rounds with a sealed request state,
//!   or -32021 for a capability it did not declare.
//! - [`resources`]: resources and prompts ([`resources::Served`]): the workspace's files
//!   ([`resources::Workspace`], [`McpServer::serve_resources`]), read through the `read` built-in's grants cut to
//!   the workspace, and the plugins' resources, prompts and completions ([`resources::Offerings`],
//!   [`McpServer::serve_offerings`]).
//! - [`subscriptions`]: resource subscriptions (`resources/subscribe`, a listen stream's `resourceSubscriptions`):
//!   workspace files watched by their directory (inotify), plugins' resources updated on reloads; bounded.
//! - `sink`: a call's partial results as `notifications/progress`, its log lines as `notifications/message`.
//! - `headers`: the `x-mcp-header` marks of a tool's parameters, checked before the tool is listed to a
//!   2026-07-28 client (one that breaks SEP-2243's rules is left out, with a warning).
//! - [`tasks`]: long calls as tasks (the `io.modelcontextprotocol/tasks` extension): the store the server owns,
//!   who sees a task, and what is kept for how long ([`TaskLimits`]).
//! - [`client`]: MCP servers as tools (the client side): their configuration files and tool names, as pi reads
//!   and names them.
//! - [`http`]: the streamable-HTTP transport ([`HttpOptions`], bearer token, `Host`/`Origin` allow-lists, timeouts,
//!   bounds on connections and sessions).
//!
//! What the server does:
//!
//! - `tools/list` lists the declared tools after the loadout, in the registry's order: name, title (the label),
//!   description, input schema, output schema (see [`result`]) and annotations.
//! - `tools/call` runs the full pipeline (validation, hooks, handler plugins) on one active tool, under a call id
//!   of the server's (`mcp-<n>`, unique in the process, whatever JSON-RPC id the client sent). Content blocks
//!   map one to one (images as MCP images); `structuredContent` as the revision allows; `isError` is the final
//!   error flag. Partial results become `notifications/progress` when the client sent a progress token; what a
//!   tool logs becomes `notifications/message` at or above the client's level (a 2026-07-28 request's own, from
//!   its `_meta`: none without one); `notifications/cancelled` (or,
//!   for a stateless HTTP request, closing its stream) aborts the call (a bash call's process group is killed).
//! - A 2026-07-28 client that declared the tasks extension gets a task for a call of a long-running tool (`bash`,
//!   `codemode`, a plugin's or an MCP server's tool): `tasks/get` polls it, `tasks/cancel` cancels its call.
//! - Calls run concurrently, except that a tool whose execution mode is sequential runs alone, as pi runs a batch
//!   that contains one.
//! - A call that must wait for plugins still compiling in the background ([`Pending`]: a handler, one of them
//!   offers its tool, or the tool may call others) waits for them and for the reload that takes them in, then
//!   runs; after [`Watch::call_wait`] it is answered with an error result naming them instead.
//! - `initialize` never waits for a compile. While plugins whose tools are not known yet compile in the
//!   background ([`Watch::listing`]), `tools/list` waits for them until [`Watch::list_wait`] after the server
//!   started, then lists what is loaded; the rest join with `notifications/tools/list_changed`.
//! - When the declared tools change (`tool_search` activating a deferred tool, plugins reloaded), every connected
//!   client is sent `notifications/tools/list_changed`.
//!
//! Nothing but protocol messages goes to stdout: logs go to stderr through `tracing`.

pub mod ask;
pub mod client;
mod headers;
pub mod http;
mod input;
pub mod resources;
pub mod result;
mod sink;
pub mod subscriptions;
pub mod tasks;

use std::sync::{Arc, Mutex};
use std::time::Duration;

// MCP logging (`logging/setLevel`, `notifications/message`) is deprecated by SEP-2577 in rmcp, yet it is how
// 2025-11-25 clients, still the majority, hear a tool's logs; 2026-07-28 clients send a level per request.
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
#[allow(deprecated)]
use rmcp::model::{LoggingLevel, SetLevelRequestParams};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use toolwright_sdk::ExecutionMode;

use toolwright_core::dispatch::Dispatcher;
use toolwright_core::registry::transcript::ToolDeclaration;
use toolwright_core::types::{AssistantMessage, ToolCall};

pub use http::HttpOptions;
pub use result::Structured;
pub use sink::DEFAULT_LOG_LEVEL;
pub use tasks::TaskLimits;

use result::Revision;
use tasks::{Ending, Owner, Tasks};

/// An offer's request, for `McpServer::settle_offer`: its method and target (the audit record's), the request
/// it is bound to and its arguments (a round's state), when it started, and why a stopped round is recorded.
struct Asked<'a> {
    method: &'static str,
    target: &'a str,
    bound: &'a str,
    arguments: &'a Value,
    started: std::time::SystemTime,
    why: &'static str,
}

/// An MCP server over a session's [`Dispatcher`]: its registry's declared tools, run through its pipeline.
///
/// Clones share everything but the client's log level: over HTTP each session (and each stateless request) is
/// served by a clone.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
    /// The level this client chose with `logging/setLevel`.
    #[allow(deprecated)]
    level: Arc<Mutex<LoggingLevel>>,
    /// Which client this clone serves: the owner of its tasks.
    client: Arc<Client>,
}

/// The client a clone of the server serves.
struct Client {
    /// A number of the server's, unique in the process.
    number: u64,
    /// Whether it completed the handshake (a 2025-11-25 session, or stdio): its tasks are then its own; else
    /// each request is stateless and a task is anyone's who knows its id.
    session: std::sync::atomic::AtomicBool,
    /// The server's subscriptions: the session's end with it (when its last clone is dropped).
    subscriptions: Arc<subscriptions::Subscriptions>,
}

impl Drop for Client {
    fn drop(&mut self) {
        self.subscriptions.end(subscriptions::Key::Session(self.number));
    }
}

impl Client {
    fn new(number: u64, subscriptions: Arc<subscriptions::Subscriptions>) -> Arc<Self> {
        Arc::new(Client {
            number,
            session: std::sync::atomic::AtomicBool::new(false),
            subscriptions,
        })
    }

    fn owner(&self) -> Owner {
        if self.session.load(std::sync::atomic::Ordering::Relaxed) {
            Owner::Session(self.number)
        } else {
            Owner::Stateless
        }
    }
}

struct Inner {
    dispatcher: Dispatcher,
    structured: Structured,
    /// Parallel calls share it; a sequential tool takes it alone.
    exclusive: tokio::sync::RwLock<()>,
    /// The registry's revision and declarations when they were last compared: a call that leaves the revision
    /// unchanged costs no comparison.
    announced: Mutex<(u64, Vec<ToolDeclaration>)>,
    /// The clients that completed the handshake, told when the declared tools change.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// The `subscriptions/listen` streams of 2026-07-28 clients (stateless: no handshake), told the same.
    /// Each with a number of the server's (request ids are the clients' and collide).
    listeners: Mutex<Vec<(u64, rmcp::service::SubscriptionSink)>>,
    /// The number of the next listener.
    next_listener: std::sync::atomic::AtomicU64,
    /// The number of the next call: its id is `mcp-<n>` ([`McpServer::call_id`]).
    next_call: std::sync::atomic::AtomicU64,
    /// Cancels every running call (shutdown).
    shutdown: CancellationToken,
    /// The calls run as tasks, and their results.
    tasks: Tasks,
    /// The number of the next client ([`Client`]).
    next_client: std::sync::atomic::AtomicU64,
    /// The running calls, awaited at shutdown.
    calls: TaskTracker,
    /// What calls and listings wait for first, from the plugin watcher ([`Watch`]).
    waits: std::sync::OnceLock<Waits>,
    /// When the server was made: `tools/list` waits for compiles until [`Watch::list_wait`] after it.
    started: std::time::Instant,
    /// Wakes the plugin watcher for a pass at once.
    wake: tokio::sync::Notify,
    /// The plugin watcher's passes: (started, finished); finished is `u64::MAX` once it has stopped.
    passes: tokio::sync::watch::Sender<(u64, u64)>,
    /// Asking the user for grants a call was refused, when the policy asks ([`ask`]).
    asking: std::sync::OnceLock<ask::Asking>,
    /// The questions put to 2026-07-28 clients as `input_required` results, by request state.
    awaiting: ask::AwaitingAnswers,
    /// The grants allowed once for 2026-07-28 calls that go on in another round.
    once: ask::OnceGrants,
    /// Where the server registers each call's client, for plugins' questions ([`input`]); shared with the
    /// toolset that loaded the plugins (none: plugins have nobody to ask).
    desk: std::sync::OnceLock<toolwright_core::client::ClientDesk>,
    /// The sealed request states of plugins' questions to 2026-07-28 clients.
    rounds: input::Rounds,
    /// The workspace's files and the plugins' resources and prompts, as far as the server offers them
    /// ([`McpServer::serve_resources`], [`McpServer::serve_offerings`]).
    served: std::sync::RwLock<Arc<resources::Served>>,
    /// The clients' resource subscriptions ([`subscriptions`]).
    subscriptions: Arc<subscriptions::Subscriptions>,
}

/// A list the clients are told of when it changes.
#[derive(Debug, Clone, Copy)]
enum List {
    Tools,
    Resources,
    Prompts,
}

impl List {
    fn method(self) -> &'static str {
        match self {
            List::Tools => "notifications/tools/list_changed",
            List::Resources => "notifications/resources/list_changed",
            List::Prompts => "notifications/prompts/list_changed",
        }
    }
}

/// How an offer's plugin asks its client: the request's round (2026-07-28), the id the client is registered
/// under at the plugins' desk (none without a desk), and the registration, kept while the plugin runs.
type OfferClient = (
    Option<Arc<input::RoundInput>>,
    Option<String>,
    Option<toolwright_core::client::Opened>,
);

/// Watching the plugin directories while serving: every `interval` (or at once when a call needs it), ask
/// `reload` (on a blocking thread) for the plugins' tools.
pub struct Watch {
    /// Asked for the plugins' tools.
    pub reload: Reload,
    /// How long between two passes.
    pub interval: Duration,
    /// Asked before every call, for plugins that are still compiling.
    pub pending: Option<Pending>,
    /// How long a call waits for them before it is answered with an error result that names them.
    pub call_wait: Duration,
    /// Asked before every `tools/list`, for plugins compiling whose tools are not listed yet.
    pub listing: Option<Listing>,
    /// Until how long after the server started a `tools/list` waits for them.
    pub list_wait: Duration,
}

/// Plugins being compiled that something waits for: their names (for people), and a future that ends once they
/// are compiled (it holds no thread: a call cancelled meanwhile drops it).
pub struct Compiling {
    /// Their names, joined.
    pub plugins: String,
    /// Ends once they are compiled.
    pub ended: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
}

/// Asked before a call of the tool it is given: `Some` when the call must wait for plugins being compiled (a
/// handler, the plugin of the tool, plugins not loaded yet); the server then has `reload` take them in before the
/// call runs.
pub type Pending = Box<dyn Fn(&str) -> Option<Compiling> + Send + Sync>;

/// Asked before a `tools/list`: `Some` while plugins whose tools are not in the list yet are compiling.
pub type Listing = Box<dyn Fn() -> Option<Compiling> + Send + Sync>;

/// What calls and listings wait for, and how long ([`Watch`]).
struct Waits {
    pending: Option<Pending>,
    call_wait: Duration,
    listing: Option<Listing>,
    list_wait: Duration,
}

/// How waiting for plugins before a call ended.
enum Waited {
    /// They are loaded (or there were none to wait for).
    Ready,
    /// The client or the shutdown cancelled the call.
    Cancelled,
    /// [`Watch::call_wait`] passed: the plugins still compiling.
    TooLong(String),
}

/// What a call needs from its request to run and to be answered.
struct PreparedCall {
    /// The tool runs alone (its execution mode is sequential).
    sequential: bool,
    /// The tool is an MCP server's, whose own `structuredContent` is relayed.
    relayed: bool,
    revision: Revision,
    /// The request's revision has audio blocks.
    audio: bool,
    message: AssistantMessage,
    sink: sink::CallSink,
    /// What the request declared it answers (a task's plugins ask with `input_required` rounds of the task).
    declared: rmcp::model::ClientCapabilities,
}

/// Polled for the plugins' tools: `Some` with all of them when the plugin directories changed, else `None`.
pub type Reload = Box<dyn FnMut() -> Option<Vec<toolwright_core::ToolDefinition>> + Send>;

/// Why the server stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum McpServeError {
    /// The client never completed the initialization.
    #[error("the MCP session did not start: {0}")]
    Initialize(String),
    /// The service task failed.
    #[error("the MCP service failed: {0}")]
    Service(String),
}

/// `result` as a 2026-07-28 client is answered: complete, and fresh no longer than the answer (`ttlMs: 0`), for
/// this client only (`cacheScope: "private"`: SEP-2549's caching hints). Other revisions get it as it is.
fn fresh_for(revision: Revision, mut result: Value) -> Value {
    if revision == Revision::AnyValue {
        result["resultType"] = json!("complete");
        result["ttlMs"] = json!(0);
        result["cacheScope"] = json!("private");
    }
    result
}

/// `value` as the result type `T`; `what` names the request for the error (which would be the server's bug).
fn from_json<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(format!("cannot {what}: {e}"), None))
}

/// The protocol revision of a request: its own (2026-07-28 carries it in `_meta`), else the session's.
fn revision_of(context: &RequestContext<RoleServer>) -> Revision {
    Revision::of(&protocol_version_of(context))
}

/// The revision a request is served at: its own (2026-07-28's `_meta`), else its session's.
fn protocol_version_of(context: &RequestContext<RoleServer>) -> ProtocolVersion {
    context
        .meta
        .protocol_version()
        .or_else(|| context.peer.peer_info().map(|info| info.protocol_version.clone()))
        .unwrap_or(ProtocolVersion::V_2025_03_26)
}

/// Whether a request's revision has audio content blocks (2025-03-26 on): an older client gets an audio block as
/// the model sees it, text.
fn knows_audio(context: &RequestContext<RoleServer>) -> bool {
    protocol_version_of(context).as_str() >= ProtocolVersion::V_2025_03_26.as_str()
}

impl McpServer {
    /// A server for `dispatcher`'s tools, structured results as [`Structured::default`].
    pub fn new(dispatcher: Dispatcher) -> Self {
        Self::with_structured(dispatcher, Structured::default())
    }

    /// A server for `dispatcher`'s tools, structured results as `structured` says.
    pub fn with_structured(dispatcher: Dispatcher, structured: Structured) -> Self {
        Self::with_limits(dispatcher, structured, TaskLimits::default())
    }

    /// A server for `dispatcher`'s tools, structured results as `structured` says, tasks kept as `tasks` says.
    pub fn with_limits(dispatcher: Dispatcher, structured: Structured, tasks: TaskLimits) -> Self {
        let announced = dispatcher.registry().read(|r| (r.revision(), r.declarations()));
        let subscriptions = Arc::new(subscriptions::Subscriptions::default());
        McpServer {
            inner: Arc::new(Inner {
                dispatcher,
                structured,
                exclusive: tokio::sync::RwLock::new(()),
                announced: Mutex::new(announced),
                peers: Mutex::new(Vec::new()),
                listeners: Mutex::new(Vec::new()),
                next_listener: std::sync::atomic::AtomicU64::new(1),
                next_call: std::sync::atomic::AtomicU64::new(1),
                shutdown: CancellationToken::new(),
                tasks: Tasks::new(tasks),
                next_client: std::sync::atomic::AtomicU64::new(1),
                calls: TaskTracker::new(),
                waits: std::sync::OnceLock::new(),
                started: std::time::Instant::now(),
                wake: tokio::sync::Notify::new(),
                passes: tokio::sync::watch::Sender::new((0, 0)),
                asking: std::sync::OnceLock::new(),
                served: Default::default(),
                awaiting: ask::AwaitingAnswers::default(),
                once: ask::OnceGrants::default(),
                desk: std::sync::OnceLock::new(),
                rounds: input::Rounds::new(),
                subscriptions: subscriptions.clone(),
            }),
            level: Arc::new(Mutex::new(DEFAULT_LOG_LEVEL)),
            client: Client::new(0, subscriptions),
        }
    }

    /// A clone for another client: the same tools and calls, its own log level and tasks.
    fn session(&self) -> Self {
        let number = self
            .inner
            .next_client
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        McpServer {
            inner: self.inner.clone(),
            level: Arc::new(Mutex::new(DEFAULT_LOG_LEVEL)),
            client: Client::new(number, self.inner.subscriptions.clone()),
        }
    }

    #[allow(deprecated)]
    fn level(&self) -> LoggingLevel {
        *self.level.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lowest level a call's client hears its log lines at: a 2026-07-28 request's own
    /// (`io.modelcontextprotocol/logLevel` in `_meta`), and none without one (the revision forbids
    /// `notifications/message` for a request that set no level); an older client's from `logging/setLevel`, else
    /// [`DEFAULT_LOG_LEVEL`].
    #[allow(deprecated)]
    fn log_level(&self, context: &RequestContext<RoleServer>, revision: Revision) -> Option<LoggingLevel> {
        match (context.meta.log_level(), revision) {
            (Some(level), _) => Some(level),
            (None, Revision::AnyValue) => None,
            (None, _) => Some(self.level()),
        }
    }

    /// Send `notifications/tools/list_changed` to every connected client when the declared tools differ from
    /// the last ones compared.
    async fn announce_changes(&self) {
        let changed = self.inner.dispatcher.registry().read(|registry| {
            let mut announced = self.inner.announced.lock().unwrap_or_else(|p| p.into_inner());
            if registry.revision() == announced.0 {
                return false;
            }
            let declarations = registry.declarations();
            let changed = declarations != announced.1;
            *announced = (registry.revision(), declarations);
            changed
        });
        if !changed {
            return;
        }
        self.lists_changed(&[List::Tools]).await;
    }

    /// The plugins were loaded again: when they may offer resources and prompts, tell every client that those
    /// lists may have changed, and every subscriber of a plugin's resource that it may have.
    async fn offers_changed(&self) {
        let offered = self.served_now().offerings.is_some();
        if offered {
            self.lists_changed(&[List::Resources, List::Prompts]).await;
            self.inner.subscriptions.plugins_reloaded();
        }
    }

    /// Tell the clients in a session, and the listen streams that accepted it, that the lists `changed` changed.
    async fn lists_changed(&self, changed: &[List]) {
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = self.inner.peers.lock().unwrap_or_else(|p| p.into_inner());
            peers.retain(|peer| !peer.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            for list in changed {
                let sent = match list {
                    List::Tools => peer.notify_tool_list_changed().await,
                    List::Resources => peer.notify_resource_list_changed().await,
                    List::Prompts => peer.notify_prompt_list_changed().await,
                };
                if let Err(error) = sent {
                    tracing::debug!("cannot send {}: {error}", list.method());
                }
            }
        }
        let listeners: Vec<(u64, rmcp::service::SubscriptionSink)> = self
            .inner
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut closed = Vec::new();
        for (number, listener) in listeners {
            for list in changed {
                let accepted = listener.accepted();
                let (wanted, notification) = match list {
                    List::Tools => (
                        accepted.tools_list_changed,
                        rmcp::model::ServerNotification::ToolListChangedNotification(Default::default()),
                    ),
                    List::Resources => (
                        accepted.resources_list_changed,
                        rmcp::model::ServerNotification::ResourceListChangedNotification(Default::default()),
                    ),
                    List::Prompts => (
                        accepted.prompts_list_changed,
                        rmcp::model::ServerNotification::PromptListChangedNotification(Default::default()),
                    ),
                };
                if wanted != Some(true) {
                    continue;
                }
                // A client that stops reading its stream must not hold up the others (or the call that changed
                // the list): it is given up on.
                match tokio::time::timeout(Duration::from_secs(1), listener.send(notification)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        tracing::debug!("cannot send {} to a listener: {error}", list.method());
                        closed.push(number);
                        break;
                    }
                    Err(_) => {
                        tracing::debug!("a listener did not take {} within 1 s", list.method());
                        closed.push(number);
                        break;
                    }
                }
            }
        }
        if !closed.is_empty() {
            let mut listeners = self.inner.listeners.lock().unwrap_or_else(|p| p.into_inner());
            listeners.retain(|(n, _)| !closed.contains(n));
            drop(listeners);
            for number in closed {
                self.inner.subscriptions.end(subscriptions::Key::Stream(number));
            }
        }
    }

    /// Serve on stdin and stdout until the client disconnects.
    pub async fn serve_stdio(self) -> Result<(), McpServeError> {
        self.serve_stdio_until(None, CancellationToken::new()).await
    }

    /// Serve on stdin and stdout until the client disconnects or `shutdown` is cancelled (then the running
    /// calls are cancelled and awaited), watching the plugins as `watch` says ([`McpServer::watch_plugins`]).
    pub async fn serve_stdio_until(
        self,
        reload: Option<Watch>,
        shutdown: CancellationToken,
    ) -> Result<(), McpServeError> {
        // Watching before serving: the first call already finds what it must wait for ([`Watch::pending`]).
        let watcher = self.watch_plugins(reload);
        let running = match self.clone().serve(rmcp::transport::io::stdio()).await {
            Ok(running) => running,
            Err(e) => {
                if let Some(watcher) = watcher {
                    watcher.abort();
                }
                return Err(McpServeError::Initialize(e.to_string()));
            }
        };
        let stop = running.cancellation_token();
        let outcome = tokio::select! {
            outcome = running.waiting() => {
                // The client went away: its running calls are cancelled and awaited, so their processes die
                // with them before the server returns.
                self.finish_calls().await;
                outcome.map(|_| ()).map_err(|e| McpServeError::Service(e.to_string()))
            }
            () = shutdown.cancelled() => {
                self.finish_calls().await;
                stop.cancel();
                Ok(())
            }
        };
        if let Some(watcher) = watcher {
            watcher.abort();
        }
        outcome
    }

    /// Watch the plugin directories while serving, when asked to: every `interval`, or at once when a call
    /// waited for a plugin ([`Watch::pending`]), ask `reload` for the plugins' tools, and when it returns new ones,
    /// put them in the registry and tell the clients if the declared tools changed
    /// (`notifications/tools/list_changed`).
    pub fn watch_plugins(&self, watch: Option<Watch>) -> Option<tokio::task::JoinHandle<()>> {
        let Watch {
            reload,
            interval,
            pending,
            call_wait,
            listing,
            list_wait,
        } = watch?;
        let waits = Waits {
            pending,
            call_wait,
            listing,
            list_wait,
        };
        if self.inner.waits.set(waits).is_err() {
            tracing::warn!("the plugins are already watched: the second watch's pending plugins are ignored");
        }
        Some(tokio::spawn(self.clone().watch(reload, interval)))
    }

    /// Cancel every running call and wait until they have finished.
    async fn finish_calls(&self) {
        self.inner.shutdown.cancel();
        self.inner.calls.close();
        self.inner.calls.wait().await;
    }

    async fn watch(self, mut reload: Reload, interval: Duration) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = self.inner.wake.notified() => {}
            }
            self.inner.passes.send_modify(|(started, _)| *started += 1);
            let Ok((back, tools)) = tokio::task::spawn_blocking(move || {
                let tools = reload();
                (reload, tools)
            })
            .await
            else {
                // No more passes: a call waiting for one goes on without it.
                self.inner
                    .passes
                    .send_modify(|(_, finished)| *finished = u64::MAX);
                return;
            };
            reload = back;
            if let Some(tools) = tools {
                self.inner
                    .dispatcher
                    .registry()
                    .update(|r| r.set_plugin_tools(tools));
                self.announce_changes().await;
                self.offers_changed().await;
            }
            self.inner
                .passes
                .send_modify(|(started, finished)| *finished = *started);
        }
    }

    /// Before a call of `name`: wait for the plugins it must wait for ([`Pending`]), then for a pass of the
    /// watcher begun after they were done; or, with none to wait for, for the pass under way, if any (it may be
    /// taking in a plugin this call needs: the pending plugins and the registry change together only at its
    /// end). At most [`Watch::call_wait`].
    async fn wait_for_plugins(&self, name: &str, client: &CancellationToken) -> Waited {
        let Some(Waits {
            pending: Some(pending),
            call_wait,
            ..
        }) = self.inner.waits.get()
        else {
            return Waited::Ready;
        };
        let cancelled = async {
            tokio::select! {
                () = client.cancelled() => {}
                () = self.inner.shutdown.cancelled() => {}
            }
        };
        let waiting_for = Mutex::new(String::new());
        let waited = async {
            let mut passes = self.inner.passes.subscribe();
            loop {
                if let Some(compiling) = pending(name) {
                    tracing::info!(
                        tool = name,
                        plugins = %compiling.plugins,
                        "the call waits for the plugins compiling in the background"
                    );
                    *waiting_for.lock().unwrap_or_else(|p| p.into_inner()) = compiling.plugins;
                    // A compile that panicked ended all the same: the reload reports its plugin.
                    compiling.ended.await;
                    self.taken_in(&mut passes).await;
                    return;
                }
                let (started, finished) = *passes.borrow_and_update();
                if finished >= started {
                    return;
                }
                let _ = passes.wait_for(|&(_, done)| done >= started).await;
            }
        };
        tokio::select! {
            () = waited => Waited::Ready,
            () = cancelled => Waited::Cancelled,
            () = tokio::time::sleep(*call_wait) => {
                Waited::TooLong(waiting_for.into_inner().unwrap_or_else(|p| p.into_inner()))
            }
        }
    }

    /// Wake the watcher and wait for a pass of it begun now: what ended compiling is then in the registry.
    async fn taken_in(&self, passes: &mut tokio::sync::watch::Receiver<(u64, u64)>) {
        let begun = passes.borrow_and_update().0;
        self.inner.wake.notify_one();
        let _ = passes.wait_for(|&(_, finished)| finished > begun).await;
    }

    /// Before a `tools/list`: while plugins whose tools are not listed yet compile ([`Listing`]), wait for them
    /// and the pass that takes them in, until [`Watch::list_wait`] after the server started.
    async fn wait_for_listing(&self) {
        let Some(Waits {
            listing: Some(listing),
            list_wait,
            ..
        }) = self.inner.waits.get()
        else {
            return;
        };
        let Some(left) = list_wait.checked_sub(self.inner.started.elapsed()) else {
            return;
        };
        let Some(compiling) = listing() else {
            return;
        };
        tracing::info!(plugins = %compiling.plugins, "tools/list waits for the plugins compiling in the background");
        let mut passes = self.inner.passes.subscribe();
        let waited = async {
            compiling.ended.await;
            self.taken_in(&mut passes).await;
        };
        tokio::select! {
            () = waited => {}
            () = tokio::time::sleep(left) => {}
            () = self.inner.shutdown.cancelled() => {}
        }
    }

    /// The declared tools as MCP tools, for a client of the newest revision.
    pub fn tools(&self) -> Vec<Tool> {
        self.tools_for(Revision::AnyValue)
    }

    fn tools_for(&self, revision: Revision) -> Vec<Tool> {
        self.inner.dispatcher.registry().read(|registry| {
            registry
                .declarations()
                .into_iter()
                .filter_map(|declaration| {
                    let definition = registry.definition(&declaration.name)?;
                    if revision == Revision::AnyValue
                        && let Err(reason) = headers::check(&declaration.parameters)
                    {
                        tracing::warn!(tool = %declaration.name, "not listed to 2026-07-28 clients: {reason}");
                        return None;
                    }
                    let mut tool = json!({
                        "name": declaration.name,
                        "title": definition.label,
                        "description": declaration.description,
                        "inputSchema": declaration.parameters,
                    });
                    let own = result::served_schema(definition);
                    if let Some(schema) = result::output_schema(own.as_ref(), revision) {
                        tool["outputSchema"] = schema;
                    }
                    if let Some(annotations) = &definition.annotations {
                        tool["annotations"] = serde_json::to_value(annotations).unwrap_or(Value::Null);
                    }
                    match serde_json::from_value(tool) {
                        Ok(tool) => Some(tool),
                        Err(error) => {
                            tracing::warn!(tool = %declaration.name, "cannot describe the tool over MCP: {error}");
                            None
                        }
                    }
                })
                .collect()
        })
    }

    /// The id of the next call: `mcp-<n>`, numbered by this server, never the client's JSON-RPC id. Nested
    /// calls' scopes and records, the routing of their events and logs, and audit records key on it; clients
    /// choose their ids freely (every 2026-07-28 client counts from 1, two HTTP sessions both send 7), so an id
    /// of theirs would let one client's call take another's nested record and log lines.
    fn call_id(&self) -> String {
        let n = self
            .inner
            .next_call
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("mcp-{n}")
    }

    /// Run one call through the pipeline: as a task ([`tasks`]) when the client accepts tasks and the tool is
    /// a long-running one, else answered when it ends; a call refused a grant the user may give is asked about
    /// first ([`ask`]).
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        match self.wait_for_plugins(&name, &context.ct).await {
            Waited::Ready => {}
            Waited::Cancelled => {
                return Err(ErrorData::internal_error(
                    "the call was cancelled while it waited for the plugins compiling in the background",
                    None,
                ));
            }
            Waited::TooLong(plugins) => {
                let waited = self.inner.waits.get().map_or(0, |w| w.call_wait.as_secs());
                return Ok(CallToolResponse::from(CallToolResult::error(vec![
                    rmcp::model::ContentBlock::text(texts::still_compiling(&name, &plugins, waited)),
                ])));
            }
        }
        let tools = self.inner.dispatcher.active_tools();
        let Some(tool) = tools.iter().find(|t| t.name() == name).cloned() else {
            return Err(ErrorData::invalid_params(
                toolwright_core::pipeline::texts::not_found(&name),
                None,
            ));
        };
        let revision = revision_of(&context);
        let audio = knows_audio(&context);
        let (relayed, long) = self.inner.dispatcher.registry().read(|registry| {
            registry.definition(&name).map_or((false, false), |d| {
                (
                    matches!(d.source, toolwright_core::definition::ToolSource::Mcp { .. }),
                    tasks::runs_as_task(d),
                )
            })
        });
        let sequential = tool.execution_mode() == Some(ExecutionMode::Sequential);
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let progress = context
            .meta
            .get_progress_token()
            .or_else(|| request.meta.as_ref().and_then(|m| m.get_progress_token()));
        let level = self.log_level(&context, revision);
        // A 2026-07-28 client answering a question of ours (`input_required`): its answer decides first.
        let mut answered = match self.answered(&request, &name, &arguments) {
            ask::Answered::Result(result) => return Ok(CallToolResponse::from(*result)),
            ask::Answered::Rerun(rerun, known, once) => Some((rerun, known, once)),
            ask::Answered::Nothing => None,
        };
        // How the call's plugins ask the client: a session's at once, a 2026-07-28 request's with the next round
        // (its answers so far in the request state and `inputResponses`).
        let round = match revision {
            Revision::AnyValue => {
                let mut known = match &answered {
                    // The answers the plugins had before the question of ours.
                    Some((_, known, _)) => known.clone(),
                    None => self.inner.rounds.known(
                        &name,
                        &arguments,
                        request.request_state.as_deref(),
                        request.input_responses.as_ref(),
                    )?,
                };
                // The grants allowed once in earlier rounds of this call hold for this one too.
                if let Some(handle) = known.once.take()
                    && answered.is_none()
                    && let Some(questions) = self.inner.once.take(&handle, &name, &arguments)
                    && let Some(tools) = self.inner.asking.get().and_then(|a| a.asker.once(&questions))
                {
                    let rerun = self.call_id();
                    // The call run again with them is recorded beside the answers it rests on.
                    let audit = self.inner.dispatcher.pipeline().audit.clone();
                    let answer = toolwright_core::ask::Answer::Allow(toolwright_core::ask::Scope::Once);
                    let by = "the MCP client, in an earlier round of the call";
                    for question in &questions {
                        ask::record(audit.as_ref(), by, &rerun, &name, question, answer, Some(&rerun));
                    }
                    answered = Some(((rerun, Some(tools)), known.clone(), questions));
                }
                let declared = context.client_capabilities().unwrap_or_default();
                Some(Arc::new(input::RoundInput::new(declared, known)))
            }
            _ => None,
        };
        // The grants allowed once in this call, which its runs again and its next round must have too.
        let mut once = answered
            .as_ref()
            .map(|(_, _, once)| once.clone())
            .unwrap_or_default();
        let input: Arc<dyn toolwright_core::client::ClientInput> = match &round {
            Some(round) => round.clone(),
            None => Arc::new(input::SessionInput {
                peer: context.peer.clone(),
            }),
        };
        let sink = || sink::CallSink {
            peer: context.peer.clone(),
            token: progress.clone(),
            level,
            count: Mutex::new(0),
            input: Some(input.clone()),
        };
        // The extension is 2026-07-28's: a 2025-11-25 client that declares it ignores it (the MCP Inspector and
        // the official TypeScript `ext-tasks` declare it on every connection and expect a plain result there).
        // A task answers at once: a call run as a task is not asked about.
        let accepts_tasks = revision == Revision::AnyValue
            && context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks());
        if answered.is_none() && accepts_tasks && long {
            let id = self.call_id();
            tracing::debug!(call = %id, request = ?context.id, tool = %name, "tools/call as a task");
            let message = AssistantMessage {
                tool_calls: vec![ToolCall::new(id, name, arguments)],
                ..Default::default()
            };
            // A task answers at once: its plugins ask through the task (`input_required`, `tasks/update`).
            let call = PreparedCall {
                sequential,
                relayed,
                revision,
                audio,
                message,
                sink: sink::CallSink {
                    input: None,
                    ..sink()
                },
                declared: context.client_capabilities().unwrap_or_default(),
            };
            return self.start_task(call).map(CallToolResponse::Task);
        }
        let (mut id, mut outcome) = match answered {
            Some((rerun, _, _)) => {
                let id = rerun.0.clone();
                (
                    id,
                    self.rerun(rerun, &name, &arguments, sequential, sink(), &context)
                        .await?,
                )
            }
            None => {
                let id = self.call_id();
                tracing::debug!(call = %id, request = ?context.id, tool = %name, "tools/call");
                let message = AssistantMessage {
                    tool_calls: vec![ToolCall::new(id.clone(), name.clone(), arguments.clone())],
                    ..Default::default()
                };
                let cancel = self.inner.shutdown.child_token();
                let client = Some(context.ct.clone());
                (
                    id,
                    self.run_batch(message, sequential, sink(), cancel, client)
                        .await?,
                )
            }
        };
        let mut allowed = None;
        for _ in 0..ask::MAX_QUESTIONS_PER_CALL {
            if let Some(stopped) = self.stopped_to_ask(round.as_deref(), &name, &arguments, &once) {
                return stopped;
            }
            match self.ask_grant(&id, &name, &outcome, &context, &mut once).await {
                None => break,
                Some(ask::Asked::Allowed(line)) => {
                    allowed = Some(line);
                    break;
                }
                Some(ask::Asked::InputRequired(question)) => {
                    let refused = self.result_of(outcome, relayed, revision, audio)?;
                    let known = round.as_deref().map(|r| r.known().clone()).unwrap_or_default();
                    let asked = ask::Awaiting {
                        question: *question,
                        call_id: id,
                        refused,
                        known,
                        once,
                    };
                    return Ok(self.input_required(&name, &arguments, asked));
                }
                Some(ask::Asked::Rerun(rerun)) => {
                    id = rerun.0.clone();
                    outcome = self
                        .rerun(rerun, &name, &arguments, sequential, sink(), &context)
                        .await?;
                }
            }
        }
        if let Some(stopped) = self.stopped_to_ask(round.as_deref(), &name, &arguments, &once) {
            return stopped;
        }
        let mut result = self.result_of(outcome, relayed, revision, audio)?;
        if let Some(line) = allowed {
            result.content.push(rmcp::model::ContentBlock::text(line));
        }
        Ok(CallToolResponse::from(result))
    }

    /// When a 2026-07-28 call of `tool` with `arguments` stopped at a question for its client ([`input`]): the
    /// `input_required` result asking it (the answers so far in the request state), or the error of a capability
    /// the request did not declare.
    /// `once`: the questions of the grants allowed once the call ran with, kept for its next round.
    fn stopped_to_ask(
        &self,
        round: Option<&input::RoundInput>,
        tool: &str,
        arguments: &Value,
        once: &[toolwright_core::ask::Question],
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let keep_once = |known: &mut input::Known| {
            known.once = (!once.is_empty()).then(|| self.inner.once.keep(tool, arguments, once.to_vec()));
        };
        let stopped = self.stopped_round_with(round?, tool, arguments, keep_once)?;
        Some(stopped.map(CallToolResponse::from))
    }

    /// When the 2026-07-28 request `round` of `bound` (a tool's name, or `prompts/get NAME`) with `arguments`
    /// stopped at a question for its client: the `input_required` result asking it, the answers so far sealed in
    /// its request state; or the error of a capability the request did not declare.
    fn stopped_round(
        &self,
        round: &input::RoundInput,
        bound: &str,
        arguments: &Value,
    ) -> Option<Result<rmcp::model::InputRequiredResult, ErrorData>> {
        self.stopped_round_with(round, bound, arguments, |_| {})
    }

    /// Likewise, `carry` adding to what the state carries.
    fn stopped_round_with(
        &self,
        round: &input::RoundInput,
        bound: &str,
        arguments: &Value,
        carry: impl FnOnce(&mut input::Known),
    ) -> Option<Result<rmcp::model::InputRequiredResult, ErrorData>> {
        let (stop, mut known) = round.take_stop()?;
        Some(match stop {
            input::Stop::Missing(capability) => Err(input::missing(&capability)),
            input::Stop::Questions(questions) => {
                tracing::debug!(bound, questions = questions.len(), "the request asks its client");
                carry(&mut known);
                self.inner
                    .rounds
                    .seal(bound, arguments, &known)
                    .and_then(|state| input::input_required(&questions, state))
                    .and_then(|body| {
                        serde_json::from_value::<rmcp::model::InputRequiredResult>(body).map_err(|e| {
                            ErrorData::internal_error(format!("cannot encode the questions: {e}"), None)
                        })
                    })
            }
        })
    }

    /// Run the call of `tool` with `arguments` again under the id of `rerun`, with the tools it carries (a grant
    /// for this call only) or those in the registry.
    async fn rerun(
        &self,
        rerun: ask::Rerun,
        tool: &str,
        arguments: &Value,
        sequential: bool,
        sink: sink::CallSink,
        context: &RequestContext<RoleServer>,
    ) -> Result<toolwright_core::pipeline::BatchOutcome, ErrorData> {
        let (id, once) = rerun;
        let message = AssistantMessage {
            tool_calls: vec![ToolCall::new(id, tool, arguments.clone())],
            ..Default::default()
        };
        // The call is cancelled by the client (`notifications/cancelled`, a closed stateless stream) or by
        // shutdown.
        let cancel = self.inner.shutdown.child_token();
        let client = Some(context.ct.clone());
        match once {
            // Allowed once: the call runs alone with the plugin's widened tools, then they go back.
            Some(tools) => {
                let _alone = self.inner.exclusive.write().await;
                let registry = self.inner.dispatcher.registry();
                let replaced = registry.update(|r| r.replace_extension_tools(tools));
                let outcome = self.run_unlocked(message, sink, cancel, client).await;
                registry.update(|r| r.replace_extension_tools(replaced));
                outcome
            }
            None => self.run_batch(message, sequential, sink, cancel, client).await,
        }
    }

    /// Run the call of task `task` until it ends or `cancel` is cancelled, and answer it. When its plugins stop at
    /// questions for the client ([`input`]), the task is `input_required` until `tasks/update` answers them all,
    /// then the call runs again from the start with every answer so far.
    async fn execute(
        &self,
        task: &str,
        call: PreparedCall,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        let PreparedCall {
            sequential,
            relayed,
            revision,
            audio,
            message,
            sink,
            declared,
        } = call;
        let mut known = input::Known::default();
        loop {
            let round = Arc::new(input::RoundInput::new(declared.clone(), known));
            let sink = sink::CallSink {
                peer: sink.peer.clone(),
                token: sink.token.clone(),
                level: sink.level,
                count: Mutex::new(0),
                input: Some(round.clone()),
            };
            let outcome = self
                .run_batch(message.clone(), sequential, sink, cancel.clone(), None)
                .await?;
            let Some((stop, next)) = round.take_stop() else {
                return self.result_of(outcome, relayed, revision, audio);
            };
            let questions = match stop {
                input::Stop::Questions(questions) => questions,
                input::Stop::Missing(capability) => return Err(input::missing(&capability)),
            };
            tracing::debug!(task, questions = questions.len(), "the task asks its client");
            let answered = self.inner.tasks.await_input(task, questions);
            let answers = tokio::select! {
                answers = answered => answers.map_err(|_| {
                    ErrorData::internal_error("the task was cancelled while it waited for answers", None)
                })?,
                () = cancel.cancelled() => {
                    return Err(ErrorData::internal_error("the task was cancelled while it waited for answers", None));
                }
            };
            known = next;
            known.answers.extend(answers);
        }
    }

    /// Run a batch of one call in its turn: alone when `sequential`, else beside other calls.
    async fn run_batch(
        &self,
        message: AssistantMessage,
        sequential: bool,
        sink: sink::CallSink,
        cancel: CancellationToken,
        client: Option<CancellationToken>,
    ) -> Result<toolwright_core::pipeline::BatchOutcome, ErrorData> {
        let _turn = if sequential {
            (None, Some(self.inner.exclusive.write().await))
        } else {
            (Some(self.inner.exclusive.read().await), None)
        };
        self.run_unlocked(message, sink, cancel, client).await
    }

    /// Run a batch of one call, its turn taken by the caller, until it ends or `cancel` (or `client`, the
    /// request's own token) is cancelled.
    async fn run_unlocked(
        &self,
        message: AssistantMessage,
        sink: sink::CallSink,
        cancel: CancellationToken,
        client: Option<CancellationToken>,
    ) -> Result<toolwright_core::pipeline::BatchOutcome, ErrorData> {
        // The call's plugins (and those of its nested calls) ask its client while it runs.
        let _asking = match (self.inner.desk.get(), &sink.input, message.tool_calls.first()) {
            (Some(desk), Some(input), Some(call)) => Some(desk.open(&call.id, input.clone())),
            _ => None,
        };
        let outcome = {
            // On a task of its own: a client that cancels or goes away does not leave the call half-run; the
            // cancellation reaches it through the token.
            let dispatcher = self.inner.dispatcher.clone();
            let Some(task) = self.spawn_call(async move {
                // The client's cancellation reaches the token from a task of its own: a call whose work is placed
                // here (see `Pipeline::with_work_here`) keeps this task from polling anything else.
                let bridge = client.map(|client| {
                    let cancel = cancel.clone();
                    tokio::spawn(async move {
                        client.cancelled().await;
                        cancel.cancel();
                    })
                });
                let outcome = dispatcher.run(&message, &sink, &cancel).await;
                if let Some(bridge) = bridge {
                    bridge.abort();
                }
                outcome
            }) else {
                return Err(ErrorData::internal_error("the server is shutting down", None));
            };
            task.await
                .map_err(|e| ErrorData::internal_error(format!("the call did not finish: {e}"), None))?
        };
        self.announce_changes().await;
        Ok(outcome)
    }

    /// When the call `id` of `tool` ended refused a grant the user may give ([`ask`]): ask through the client,
    /// record the question and the answer, and on approval put the plugin's widened tools in place (for a grant
    /// of this call only, return them instead). The id to run the call again under; none: the refusal stands.
    /// `once`: the grants allowed once in the call so far, which a grant allowed once joins.
    async fn ask_grant(
        &self,
        id: &str,
        tool: &str,
        outcome: &toolwright_core::pipeline::BatchOutcome,
        context: &RequestContext<RoleServer>,
        once: &mut Vec<toolwright_core::ask::Question>,
    ) -> Option<ask::Asked> {
        let asking = self.inner.asking.get()?;
        // Whatever happens next, this call's refusals are not kept.
        let (subject, refused) = asking.refusals.take(id)?;
        let stateless = revision_of(context) == Revision::AnyValue;
        let elicits = if stateless {
            ask::request_elicits(&context.meta)
        } else {
            ask::client_elicits(&context.peer)
        };
        if !outcome.messages.first().is_some_and(|m| m.is_error) || !elicits {
            return None;
        }
        // Only about the called tool's own plugin (or the built-ins): a refusal of a tool it called is that call's
        // business.
        let own =
            (self.inner.dispatcher.registry()).read(|r| r.definition(tool).is_some_and(|d| subject.owns(d)));
        if !own {
            return None;
        }
        let question = asking.asker.question(&subject, &refused)?;
        if stateless {
            // 2026-07-28 forbids requests to the client: the question goes back as the result.
            return Some(ask::Asked::InputRequired(Box::new(question)));
        }
        let answer = tokio::select! {
            answer = ask::ask(&context.peer, &question) => answer,
            () = context.ct.cancelled() => toolwright_core::ask::Answer::Unanswered,
        };
        let asker = asking.asker.clone();
        let approved = {
            let question = question.clone();
            let earlier = once.clone();
            tokio::task::spawn_blocking(move || ask::approved(&*asker, &question, answer, &earlier))
                .await
                .ok()
                .flatten()
        };
        if question.subject == toolwright_core::ask::Subject::Builtins {
            return self
                .settle_builtins(id, tool, &question, answer, approved)
                .map(ask::Asked::Allowed);
        }
        let rerun = self.settle_answer(id, tool, &question, answer, approved, once)?;
        if answer == toolwright_core::ask::Answer::Allow(toolwright_core::ask::Scope::Once) {
            once.push(question);
        }
        Some(ask::Asked::Rerun(rerun))
    }

    /// Record the answer to `question` about the call `id` of `tool`, and put the approved tools in place: the id
    /// to run the call again under, with the tools for that call alone when allowed once, now or before (`once`:
    /// the grants allowed once in the call before); none: the refusal stands.
    fn settle_answer(
        &self,
        id: &str,
        tool: &str,
        question: &toolwright_core::ask::Question,
        answer: toolwright_core::ask::Answer,
        approved: Option<Vec<toolwright_core::ToolDefinition>>,
        once: &[toolwright_core::ask::Question],
    ) -> Option<ask::Rerun> {
        let audit = self.inner.dispatcher.pipeline().audit.clone();
        let by = ask::ASKED_THROUGH_CLIENT;
        let Some(tools) = approved else {
            ask::record(audit.as_ref(), by, id, tool, question, answer, None);
            return None;
        };
        let rerun = self.call_id();
        ask::record(audit.as_ref(), by, id, tool, question, answer, Some(&rerun));
        // The grants allowed once before in the call go with the run again too: recorded beside it.
        let once_before = toolwright_core::ask::Answer::Allow(toolwright_core::ask::Scope::Once);
        for earlier in once {
            let by = "the MCP client, earlier in the call";
            ask::record(
                audit.as_ref(),
                by,
                &rerun,
                tool,
                earlier,
                once_before,
                Some(&rerun),
            );
        }
        if answer == toolwright_core::ask::Answer::Allow(toolwright_core::ask::Scope::Once) {
            return Some((rerun, Some(tools)));
        }
        self.inner
            .dispatcher
            .registry()
            .update(|r| r.replace_extension_tools(tools));
        // The grants allowed once before still hold for this call, beside the one kept now.
        let earlier = (!once.is_empty())
            .then(|| self.inner.asking.get().and_then(|a| a.asker.once(once)))
            .flatten();
        Some((rerun, earlier))
    }

    /// Record the answer to `question` about the built-ins' call `id` of `tool`, and put their widened tools in
    /// place: the line the call's result ends with; none: the refusal stands. The call is not run again.
    fn settle_builtins(
        &self,
        id: &str,
        tool: &str,
        question: &toolwright_core::ask::Question,
        answer: toolwright_core::ask::Answer,
        approved: Option<Vec<toolwright_core::ToolDefinition>>,
    ) -> Option<String> {
        let audit = self.inner.dispatcher.pipeline().audit.clone();
        ask::record(
            audit.as_ref(),
            ask::ASKED_THROUGH_CLIENT,
            id,
            tool,
            question,
            answer,
            None,
        );
        let tools = approved?;
        self.inner
            .dispatcher
            .registry()
            .update(|r| r.replace_builtin_tools(tools));
        Some(ask::builtins_allowed(question, answer))
    }

    /// The `input_required` result asking the question of `asked` about a call of `tool` with `arguments` (a
    /// 2026-07-28 client): kept under an unguessable request state, with the refusal to answer if it is denied and
    /// the answers the call's plugins had.
    fn input_required(&self, tool: &str, arguments: &Value, asked: ask::Awaiting) -> CallToolResponse {
        let Some(request) = ask::input_request(&asked.question) else {
            return CallToolResponse::from(asked.refused);
        };
        let state = self.inner.awaiting.keep(tool, arguments, asked);
        let mut requests = rmcp::model::InputRequests::new();
        requests.insert(ask::INPUT_KEY.to_owned(), request);
        CallToolResponse::from(rmcp::model::InputRequiredResult::new(Some(requests), Some(state)))
    }

    /// A retried 2026-07-28 call that carries the request state of a question of ours and the answer: the refusal
    /// (denied), the call to run again (allowed), or nothing (no such question, or another call's: the call runs as
    /// any other).
    fn answered(&self, request: &CallToolRequestParams, tool: &str, arguments: &Value) -> ask::Answered {
        let Some(state) = request.request_state.as_deref() else {
            return ask::Answered::Nothing;
        };
        let Some(awaiting) = self.inner.awaiting.take(state, tool, arguments) else {
            return ask::Answered::Nothing;
        };
        let answer = request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(ask::INPUT_KEY))
            .map_or(toolwright_core::ask::Answer::Unanswered, |response| {
                ask::answer_of(&awaiting.question, response)
            });
        let approved = self
            .inner
            .asking
            .get()
            .and_then(|asking| ask::approved(&*asking.asker, &awaiting.question, answer, &awaiting.once));
        let ask::Awaiting {
            question,
            call_id,
            refused,
            known,
            mut once,
        } = awaiting;
        if question.subject == toolwright_core::ask::Subject::Builtins {
            let mut result = refused;
            if let Some(line) = self.settle_builtins(&call_id, tool, &question, answer, approved) {
                result.content.push(rmcp::model::ContentBlock::text(line));
            }
            return ask::Answered::Result(Box::new(result));
        }
        match self.settle_answer(&call_id, tool, &question, answer, approved, &once) {
            Some(rerun) => {
                if answer == toolwright_core::ask::Answer::Allow(toolwright_core::ask::Scope::Once) {
                    once.push(question);
                }
                ask::Answered::Rerun(rerun, known, once)
            }
            None => ask::Answered::Result(Box::new(refused)),
        }
    }

    /// Let plugins ask the clients of their calls (a form for the user, the client's model, its roots): each
    /// call's client is registered at `desk`, the one the plugins' grants were given
    /// ([`toolwright_core::client`]). Only the first setting counts.
    pub fn answer_plugins_at(&self, desk: toolwright_core::client::ClientDesk) {
        if self.inner.desk.set(desk).is_err() {
            tracing::warn!("plugins' questions already have a desk: the second is ignored");
        }
    }

    /// Offer the workspace's files as resources ([`resources`]): to every client from now on (set before
    /// serving: the capability is in `initialize`'s answer).
    pub fn serve_resources(&self, workspace: resources::Workspace) {
        self.change_served(|served| served.workspace = Some(workspace));
    }

    /// Offer the plugins' resources and prompts ([`resources::Offerings`]), likewise.
    pub fn serve_offerings(&self, offerings: Arc<dyn resources::Offerings>) {
        self.change_served(|served| served.offerings = Some(offerings));
    }

    fn change_served(&self, change: impl FnOnce(&mut resources::Served)) {
        let mut served = self.inner.served.write().unwrap_or_else(|p| p.into_inner());
        let mut changed = resources::Served::clone(&served);
        change(&mut changed);
        *served = Arc::new(changed);
    }

    /// How an offer's plugin asks the client of the request bound to `bound` (a prompt's, a resource's read) with
    /// `arguments`, as a tool's call asks: a session's client at once, a 2026-07-28 request's in rounds (the
    /// answers so far from its request state and input responses).
    fn offer_client(
        &self,
        context: &RequestContext<RoleServer>,
        bound: &str,
        arguments: &Value,
        state: Option<&str>,
        responses: Option<&rmcp::model::InputResponses>,
    ) -> Result<OfferClient, ErrorData> {
        let round = match revision_of(context) {
            Revision::AnyValue => {
                let known = self.inner.rounds.known(bound, arguments, state, responses)?;
                let declared = context.client_capabilities().unwrap_or_default();
                Some(Arc::new(input::RoundInput::new(declared, known)))
            }
            _ => None,
        };
        let input: Arc<dyn toolwright_core::client::ClientInput> = match &round {
            Some(round) => round.clone(),
            None => Arc::new(input::SessionInput {
                peer: context.peer.clone(),
            }),
        };
        let id = format!("{}-offer", self.call_id());
        let opened = self.inner.desk.get().map(|desk| desk.open(&id, input));
        let client = self.inner.desk.get().map(|_| id);
        Ok((round, client, opened))
    }

    /// The end of an offer's request (`asked`) whose plugin may have asked its client: a 2026-07-28 round it
    /// stopped (its `input_required` result, or the missing capability), audited as stopped; else `None`, the
    /// answer audited.
    fn settle_offer<T>(
        &self,
        round: Option<&input::RoundInput>,
        asked: &Asked<'_>,
        answer: &Result<T, ErrorData>,
    ) -> Option<Result<rmcp::model::InputRequiredResult, ErrorData>> {
        if let Some(stopped) = round.and_then(|round| self.stopped_round(round, asked.bound, asked.arguments))
        {
            self.audit_access_as(
                asked.method,
                asked.target,
                asked.started,
                true,
                Some(asked.why.to_owned()),
            );
            return Some(stopped);
        }
        self.audit_access(
            asked.method,
            asked.target,
            asked.started,
            answer.as_ref().map(|_| ()),
        );
        None
    }

    /// What is served besides the tools now.
    fn served_now(&self) -> Arc<resources::Served> {
        self.inner
            .served
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// What is served besides the tools, for one request; `-32601` when `wanted` says it is not offered.
    fn served(
        &self,
        method: &str,
        wanted: impl Fn(&resources::Served) -> bool,
    ) -> Result<Arc<resources::Served>, ErrorData> {
        let served = self.served_now();
        if wanted(&served) {
            Ok(served)
        } else {
            Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("{method}: this server offers none"),
                None,
            ))
        }
    }

    /// Write what a client read (`resources/read` of a URI) or asked for (`prompts/get` of a prompt) to the
    /// audit log, as a record of its own under a call id of the server's: `method` is the record's tool, `target`
    /// its step's reason, and an error its outcome.
    fn audit_access(
        &self,
        method: &str,
        target: &str,
        started: std::time::SystemTime,
        outcome: Result<(), &ErrorData>,
    ) {
        self.audit_access_as(
            method,
            target,
            started,
            outcome.is_ok(),
            outcome.err().map(|e| e.message.to_string()),
        );
    }

    /// Likewise, `allowed` or refused, with `error` when it did not end with its result.
    fn audit_access_as(
        &self,
        method: &str,
        target: &str,
        started: std::time::SystemTime,
        allowed: bool,
        error: Option<String>,
    ) {
        use toolwright_core::audit::{AuditRecord, Outcome, Stage, Step, Verdict};
        let Some(audit) = self.inner.dispatcher.pipeline().audit.clone() else {
            return;
        };
        let verdict = if allowed {
            Verdict::Allowed
        } else {
            Verdict::Refused
        };
        let record = AuditRecord {
            prev: None,
            time: toolwright_core::audit::rfc3339(started),
            id: self.call_id(),
            parent: None,
            tool: method.to_owned(),
            authority: None,
            source: None,
            decision: vec![Step::new("the MCP client", Stage::Preflight, verdict).with_reason(target)],
            spawns: Vec::new(),
            connections: Vec::new(),
            questions: Vec::new(),
            omitted: 0,
            duration_ms: u64::try_from(started.elapsed().unwrap_or_default().as_millis()).unwrap_or(u64::MAX),
            outcome: if error.is_none() {
                Outcome::Ok
            } else {
                Outcome::Error
            },
            error,
        };
        audit.record(&record);
    }

    /// Run `work` on what is served, off the async threads.
    async fn blocking<T: Send + 'static>(
        served: Arc<resources::Served>,
        what: &str,
        work: impl FnOnce(&resources::Served) -> T + Send + 'static,
    ) -> Result<T, ErrorData> {
        tokio::task::spawn_blocking(move || work(&served))
            .await
            .map_err(|e| ErrorData::internal_error(format!("cannot {what}: {e}"), None))
    }

    /// Ask the user for grants a plugin's call was refused, as `asking` says ([`ask`]); only the first setting
    /// counts.
    pub fn ask_grants(&self, asking: ask::Asking) {
        if self.inner.asking.set(asking).is_err() {
            tracing::warn!("grants are already asked for: the second setting is ignored");
        }
    }

    /// The MCP result of a call's batch.
    fn result_of(
        &self,
        outcome: toolwright_core::pipeline::BatchOutcome,
        relayed: bool,
        revision: Revision,
        audio: bool,
    ) -> Result<CallToolResult, ErrorData> {
        let (Some(result), Some(message)) = (outcome.results.first(), outcome.messages.first()) else {
            return Err(ErrorData::internal_error("the pipeline returned no result", None));
        };
        let content: Vec<toolwright_sdk::Content> = result
            .content
            .iter()
            .map(|block| match block {
                toolwright_sdk::Content::Audio { .. } if !audio => toolwright_core::model_view::shown(block),
                other => other.clone(),
            })
            .collect();
        // `resultType` is 2026-07-28's (rmcp drops it for older clients). The content is the result's own, not
        // the model's view of it in the message: MCP carries audio and embedded resources.
        let mut body = json!({
            "resultType": "complete",
            "content": content,
            "isError": message.is_error,
        });
        // An MCP server's tool relays that server's own `structuredContent` (what scripts get is its whole result).
        let structured = match (&result.structured_content, relayed) {
            (Some(whole), true) => whole.get("structuredContent"),
            (structured, false) => structured.as_ref(),
            (None, true) => None,
        };
        result::add_structured(&mut body, structured, revision, self.inner.structured);
        // The record of the nested calls the tool made (pi's `nestedCalls`), where MCP keeps extensions.
        if let Some(nested) = &message.nested_calls {
            body["_meta"] = json!({ NESTED_CALLS_META: nested });
        }
        serde_json::from_value(body)
            .map_err(|e| ErrorData::internal_error(format!("cannot encode the result: {e}"), None))
    }

    /// Start `call` as a task of this client: it runs on after the answer, until it ends, is cancelled
    /// (`tasks/cancel`, shutdown) or outlives the tasks' TTL.
    fn start_task(&self, call: PreparedCall) -> Result<rmcp::model::CreateTaskResult, ErrorData> {
        let cancel = self.inner.shutdown.child_token();
        let task = self.inner.tasks.create(self.client.owner(), cancel.clone())?;
        let id = task.task_id.clone();
        let ttl = self.inner.tasks.limits().ttl;
        let server = self.clone();
        tracing::debug!(task = %id, "tools/call runs as a task");
        let started = self.spawn_call(async move {
            let run = server.execute(&id, call, cancel.clone());
            tokio::pin!(run);
            let outcome = tokio::select! {
                outcome = &mut run => outcome,
                () = tokio::time::sleep(ttl) => {
                    cancel.cancel();
                    run.await
                }
            };
            let ending = match outcome.map(|result| serde_json::to_value(&result)) {
                Ok(Ok(result)) => Ending::Result(result),
                Ok(Err(error)) => Ending::Error(ErrorData::internal_error(
                    format!("cannot encode the result: {error}"),
                    None,
                )),
                Err(error) => Ending::Error(error),
            };
            server.inner.tasks.finish(&id, ending);
        });
        if started.is_none() {
            return Err(ErrorData::internal_error("the server is shutting down", None));
        }
        Ok(rmcp::model::CreateTaskResult::new(task))
    }

    /// Run a call on a task the shutdown waits for; `None` once shutting down.
    fn spawn_call<F>(&self, call: F) -> Option<tokio::task::JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if self.inner.shutdown.is_cancelled() {
            return None;
        }
        Some(self.inner.calls.spawn(call))
    }
}

/// The texts the server itself answers a call with.
pub mod texts {
    /// A call that waited `waited` seconds for plugins still compiling (`plugins`) and did not run.
    pub fn still_compiling(tool: &str, plugins: &str, waited: u64) -> String {
        format!(
            "The call of {tool} did not run: the plugins it waits for are still compiling after {waited} s \
             ({plugins}; a plugin is compiled once, then loaded from the cache). Call it again in a moment."
        )
    }
}

/// The `_meta` key of a `tools/call` result that carries the record of the nested calls the tool made (pi's
/// `nestedCalls`: ids, names, arguments, status, errors, durations; `complete` false when the record was cut).
pub const NESTED_CALLS_META: &str = "toolwright/nestedCalls";

impl ServerHandler for McpServer {
    #[allow(deprecated)] // logging: see the imports
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .enable_tasks()
            .build();
        let served = self.served_now();
        // Lists change when watched plugins are loaded again (the workspace's new files are not announced: the
        // template reaches them); any resource may be subscribed to ([`subscriptions`]).
        let reloads = (served.offerings.is_some() && self.inner.waits.get().is_some()).then_some(true);
        if served.has_resources() {
            let mut resources = rmcp::model::ResourcesCapability::default();
            resources.subscribe = Some(true);
            resources.list_changed = reloads;
            capabilities.resources = Some(resources);
        }
        if served.has_prompts() {
            let mut prompts = rmcp::model::PromptsCapability::default();
            prompts.list_changed = reloads;
            capabilities.prompts = Some(prompts);
        }
        if served.has_resources() || served.has_prompts() {
            capabilities.completions = Some(Default::default());
        }
        ServerConfig::new(capabilities)
        .with_server_info(Implementation::new("toolwright", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Toolwright's tools: pi 1.6.0's built-in tools and sandboxed WebAssembly plugins, run through pi's pipeline.",
        )
    }

    /// A client that shakes hands (2025-11-25 over HTTP, or stdio) is a session from its `initialize` on: its
    /// tasks are its own. (Not from `notifications/initialized`: a notification is handled apart from the
    /// requests that follow it, which could be served as stateless before it.)
    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        self.client
            .session
            .store(true, std::sync::atomic::Ordering::Relaxed);
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut peers = self.inner.peers.lock().unwrap_or_else(|p| p.into_inner());
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(context.peer);
    }

    /// 2026-07-28 clients ask for list changes and resource updates with `subscriptions/listen` (they never
    /// complete a handshake): the tool list always; the resource and prompt lists when plugins may offer some;
    /// the resources asked for that may be watched ([`subscriptions`]).
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let served = self.served_now();
        let mut accepted = rmcp::model::SubscriptionFilter::builder()
            .tools_list_changed()
            .build();
        if served.offerings.is_some() && self.inner.waits.get().is_some() {
            accepted.resources_list_changed = Some(true);
            accepted.prompts_list_changed = Some(true);
        }
        let wanted: Vec<String> = requested
            .resource_subscriptions
            .iter()
            .flatten()
            .take(subscriptions::MAX_PER_SUBSCRIBER)
            .cloned()
            .collect();
        // What may be watched is what may be read now: files are opened, plugins asked (off the async threads
        // where the runtime has others); each check recorded as a subscription's is.
        let admit = move || -> Vec<String> {
            wanted
                .into_iter()
                .filter(|uri| {
                    let started = std::time::SystemTime::now();
                    let watched = served.watched(uri);
                    self.audit_access("subscriptions/listen", uri, started, watched.as_ref().map(|_| ()));
                    watched.is_ok()
                })
                .collect()
        };
        let watched = match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(admit),
            _ => admit(),
        };
        accepted.resource_subscriptions = Some(watched);
        Some(accepted)
    }

    /// Keep the stream until the client closes it (or the server shuts down), told of every change of the
    /// declared tools, of the resource and prompt lists, and of the resources it subscribed to.
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        let sink = context.sink().clone();
        let number = self
            .inner
            .next_listener
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((number, sink.clone()));
        let key = subscriptions::Key::Stream(number);
        let served = self.served_now();
        let uris = sink.accepted().resource_subscriptions.clone().unwrap_or_default();
        let admitted = Self::blocking(served, "subscribe", move |served| {
            uris.into_iter()
                .map(|uri| {
                    let watched = served.watched_again(&uri);
                    (uri, watched)
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (uri, watched) in admitted {
            let subscribed = watched.map_err(|e| e.message.to_string()).and_then(|watched| {
                let to = subscriptions::Subscriber::Stream(sink.clone());
                self.inner
                    .subscriptions
                    .subscribe(key, to, &uri, watched, &self.inner.shutdown)
            });
            if let Err(error) = subscribed {
                tracing::debug!(uri, "a listen stream's subscription did not hold: {error}");
            }
        }
        tokio::select! {
            () = context.cancelled() => {}
            () = self.inner.shutdown.cancelled() => {}
        }
        self.inner.subscriptions.end(key);
        self.inner
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(n, _)| *n != number);
        Ok(())
    }

    /// `resources/subscribe` (2025-11-25): to a resource that may be watched ([`subscriptions`]).
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let served = self.served("resources/subscribe", resources::Served::has_resources)?;
        let uri = request.uri.clone();
        let started = std::time::SystemTime::now();
        let watched = Self::blocking(served, "subscribe", move |s| s.watched(&uri)).await?;
        let key = subscriptions::Key::Session(self.client.number);
        let to = subscriptions::Subscriber::Session(context.peer.clone());
        let subscribed = watched.and_then(|watched| {
            self.inner
                .subscriptions
                .subscribe(key, to, &request.uri, watched, &self.inner.shutdown)
                .map_err(|error| ErrorData::invalid_params(error, Some(json!({ "uri": request.uri }))))
        });
        // What a subscription checked (a file opened, a plugin's resource read) is recorded as a read is.
        self.audit_access(
            "resources/subscribe",
            &request.uri,
            started,
            subscribed.as_ref().map(|_| ()),
        );
        subscribed
    }

    /// `resources/unsubscribe` (2025-11-25): a URI not subscribed to is no error.
    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.served("resources/unsubscribe", resources::Served::has_resources)?;
        let key = subscriptions::Key::Session(self.client.number);
        self.inner.subscriptions.unsubscribe(key, &request.uri);
        Ok(())
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.level.lock().unwrap_or_else(|p| p.into_inner()) = request.level;
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.wait_for_listing().await;
        let revision = revision_of(&context);
        // The list follows `tool_search` and plugin reloads, so it is never fresh for longer than the answer;
        // `private` because what one client activates is not another deployment's list.
        let listed = json!({ "tools": self.tools_for(revision) });
        from_json(fresh_for(revision, listed), "list the tools")
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        let served = self.served("resources/list", resources::Served::has_resources)?;
        let cursor = request.and_then(|r| r.cursor);
        let listed =
            Self::blocking(served, "list the resources", move |s| s.list(cursor.as_deref())).await??;
        from_json(fresh_for(revision_of(&context), listed), "list the resources")
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        let served = self.served("resources/templates/list", resources::Served::has_resources)?;
        let templates = Self::blocking(served, "list the resource templates", |s| s.templates()).await?;
        from_json(
            fresh_for(revision_of(&context), templates),
            "list the resource templates",
        )
    }

    /// `resources/read`: a workspace file, or a plugin's resource, whose plugin may ask the client that reads it
    /// as a prompt's does ([`get_prompt`](ServerHandler::get_prompt)): the state of a 2026-07-28 request's rounds
    /// is bound to `resources/read URI`.
    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        let uri = request.uri.clone();
        let revision = revision_of(&context);
        let bound = format!("resources/read {uri}");
        let served = self.served("resources/read", resources::Served::has_resources)?;
        // The workspace's files never ask.
        let is_file = uri.get(..5).is_some_and(|s| s.eq_ignore_ascii_case("file:"));
        let (round, client, _asking) = if is_file {
            (None, None, None)
        } else {
            self.offer_client(
                &context,
                &bound,
                &Value::Null,
                request.request_state.as_deref(),
                request.input_responses.as_ref(),
            )?
        };
        let started = std::time::SystemTime::now();
        let read = Self::blocking(served, "answer resources/read", move |s| {
            s.read(&request.uri, client.as_deref())
        })
        .await?;
        let asked = Asked {
            method: "resources/read",
            target: &uri,
            bound: &bound,
            arguments: &Value::Null,
            started,
            why: "stopped: the resource's plugin asked its client (input_required); it is read again with the answers",
        };
        if let Some(stopped) = self.settle_offer(round.as_deref(), &asked, &read) {
            return stopped.map(rmcp::model::ReadResourceResponse::from);
        }
        let result: rmcp::model::ReadResourceResult =
            from_json(fresh_for(revision, read?), "read the resource")?;
        Ok(result.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        let served = self.served("prompts/list", resources::Served::has_prompts)?;
        let prompts = Self::blocking(served, "list the prompts", |s| s.prompts()).await?;
        from_json(fresh_for(revision_of(&context), prompts), "list the prompts")
    }

    /// `prompts/get`: the plugin that offers the prompt fills it in, and may ask the client that wants it, as a
    /// tool's call asks (`input`): a session's client at once, a 2026-07-28 request's with an `input_required`
    /// result (the prompt is filled in again from the start with the answers of the next round).
    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        let name = request.name.clone();
        let revision = revision_of(&context);
        let bound = format!("prompts/get {name}");
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let (round, client, _asking) = self.offer_client(
            &context,
            &bound,
            &arguments,
            request.request_state.as_deref(),
            request.input_responses.as_ref(),
        )?;
        let served = self.served("prompts/get", resources::Served::has_prompts)?;
        let started = std::time::SystemTime::now();
        let filled = Self::blocking(served, "answer prompts/get", move |s| {
            s.prompt(&request.name, request.arguments.as_ref(), client.as_deref())
        })
        .await?;
        let asked = Asked {
            method: "prompts/get",
            target: &name,
            bound: &bound,
            arguments: &arguments,
            started,
            why: "stopped: the prompt asked its client (input_required); it is filled in again with the answers",
        };
        if let Some(stopped) = self.settle_offer(round.as_deref(), &asked, &filled) {
            return stopped.map(rmcp::model::GetPromptResponse::from);
        }
        // The plugin's content blocks are checked here, against MCP's types.
        let result: rmcp::model::GetPromptResult = serde_json::from_value(fresh_for(revision, filled?))
            .map_err(|e| {
                ErrorData::internal_error(
                    format!("the prompt's plugin answered a malformed prompt: {e}"),
                    None,
                )
            })?;
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, ErrorData> {
        let served = self.served("completion/complete", |s| s.has_resources() || s.has_prompts())?;
        let (prompt, name) = match request.r#ref {
            rmcp::model::Reference::Prompt(p) => (true, p.name),
            rmcp::model::Reference::Resource(r) => (false, r.uri),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("cannot complete for {other:?}"),
                    None,
                ));
            }
        };
        let argument = request.argument;
        let completed = Self::blocking(served, "complete", move |s| {
            s.complete(prompt, &name, &argument.name, &argument.value)
        })
        .await?;
        from_json(fresh_for(revision_of(&context), completed), "complete")
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let task = self.inner.tasks.get(self.client.owner(), &request.task_id)?;
        Ok(rmcp::model::GetTaskResult::new(task))
    }

    /// No call of this server asks for input while it runs: there is never a request to answer.
    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Unknown keys are ignored (SEP-2663); an unknown task is not.
        self.inner.tasks.update(
            self.client.owner(),
            &request.task_id,
            Some(&request.input_responses),
        )
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.inner.tasks.cancel(self.client.owner(), &request.task_id)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }
}
