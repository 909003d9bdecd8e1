//! One live connection to one MCP server, with rmcp's client: started (a stdio server in its sandbox, or
//! streamable HTTP), initialised as pi initialises (protocol 2025-11-25, the `roots` capability), and its
//! requests sent with pi's timeout (re-armed by each progress notification), cancellation and error texts.

// pi's client declares the `roots` capability and answers `roots/list` with the workspace; rmcp marks roots
// deprecated by SEP-2577 (2026-07-28), yet 2025-11-25 servers ask for them.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities, ClientConfig,
    ClientRequest, Implementation, ListResourceTemplatesRequest, ListResourcesRequest, ListRootsResult,
    ListToolsRequest, PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    ReadResourceRequest, ReadResourceRequestParams, Root, ServerResult,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceError, ServiceExt as _};
use serde_json::Value;
use tokio::io::AsyncReadExt as _;
use tokio_util::sync::CancellationToken;

use super::config::{ServerConfig, Transport};
use super::raw::{RawLines, RawResults};
use super::sandbox::{SandboxBase, ServerGrant, Started};
use super::values;

/// pi's default request timeout, in seconds.
pub const DEFAULT_TIMEOUT_SECONDS: f64 = 60.0;
/// The longest timeout taken from a configuration (a day): a larger one is this.
pub const MAX_TIMEOUT_SECONDS: f64 = 86_400.0;
/// How much of a server's stderr is kept (its last bytes).
const STDERR_KEPT: usize = 64 * 1024;
/// How much of it a connection error quotes (its last characters, as pi).
const STDERR_TAIL_CHARS: usize = 2_000;
/// The protocol versions accepted from a server: pi's four, and 2026-07-28 (over HTTP).
pub const ACCEPTED_VERSIONS: &[&str] = &[
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];
/// How many pages a listing may take (pi's bound).
const MAX_PAGES: usize = 1000;

/// Called when the server says its tools changed.
pub type OnChange = Arc<dyn Fn() + Send + Sync>;

/// A request's progress, as the server reports it.
pub type OnProgress<'a> = &'a (dyn Fn(&ProgressNotificationParam) + Send + Sync);

type Routes =
    Arc<Mutex<HashMap<ProgressToken, tokio::sync::mpsc::UnboundedSender<ProgressNotificationParam>>>>;

#[derive(Clone)]
struct Handler {
    info: ClientConfig,
    progress: Routes,
    changed: OnChange,
    roots: Vec<Root>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        let routes = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(route) = routes.get(&params.progress_token) {
            let _ = route.send(params);
        }
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        (self.changed)();
    }

    async fn list_roots(&self, _: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::new(self.roots.clone()))
    }
}

/// What the server said of itself when it connected.
#[derive(Debug, Clone, Default)]
pub struct ServerInfo {
    /// The protocol revision it chose.
    pub protocol_version: String,
    /// Its `instructions`.
    pub instructions: Option<String>,
    /// Whether it offers tools.
    pub tools: bool,
    /// Whether it offers resources.
    pub resources: bool,
}

/// One live connection.
pub struct Connection {
    service: RunningService<RoleClient, Handler>,
    peer: Peer<RoleClient>,
    raw: RawResults,
    progress: Routes,
    /// What the server said of itself.
    pub info: ServerInfo,
    timeout: Duration,
    stderr: Arc<Mutex<Vec<u8>>>,
    started: Option<Started>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// The client's `initialize`: pi's revision and capabilities, under Toolwright's name.
fn client_config() -> ClientConfig {
    #[allow(deprecated)]
    let capabilities = ClientCapabilities::builder().enable_roots().build();
    ClientConfig::new(
        capabilities,
        Implementation::new("toolwright", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(ProtocolVersion::V_2025_11_25)
}

/// The workspace as the client's one root (pi's: its `file://` URL and its base name).
fn roots(cwd: &std::path::Path) -> Vec<Root> {
    let mut root = Root::new(format!("file://{}", cwd.display()));
    root.name = cwd.file_name().map(|n| n.to_string_lossy().into_owned());
    vec![root]
}

impl Connection {
    /// Connect to `server` (a stdio server started in its sandbox under `grant`), calling `changed` whenever it
    /// says its tools changed. The error is pi's text for the server's state (with the tail of its stderr).
    pub async fn open(
        server: &ServerConfig,
        grant: &ServerGrant,
        base: &SandboxBase,
        changed: OnChange,
    ) -> Result<Connection, String> {
        let timeout = Duration::from_secs_f64(
            server
                .timeout
                .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
                .clamp(0.001, MAX_TIMEOUT_SECONDS),
        );
        let progress = Routes::default();
        let handler_changed = changed.clone();
        let handler = Handler {
            info: client_config(),
            progress: progress.clone(),
            changed,
            roots: roots(&base.cwd),
        };
        let raw = RawResults::default();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (service, started) = match &server.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let env = env
                    .iter()
                    .map(|(key, value)| {
                        let what = format!("MCP server \"{}\" env \"{key}\"", server.name);
                        values::resolve(value, &what, &base.host.vars).map(|v| (key.clone(), v))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let mut started =
                    super::sandbox::start(&server.name, command, args, cwd.as_deref(), &env, grant, base)?;
                let child = &mut started.process.child;
                let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
                let (Some(stdin), Some(stdout), Some(err)) = pipes else {
                    return Err("the server's standard streams are not pipes".into());
                };
                let io = |e: std::io::Error| format!("cannot speak to the server: {e}");
                let stdin = tokio::net::unix::pipe::Sender::from_owned_fd(stdin.into()).map_err(io)?;
                let stdout = tokio::net::unix::pipe::Receiver::from_owned_fd(stdout.into()).map_err(io)?;
                let err = tokio::net::unix::pipe::Receiver::from_owned_fd(err.into()).map_err(io)?;
                tokio::spawn(keep_stderr(err, stderr.clone()));
                let transport = RawLines::new(stdout, stdin, raw.clone());
                let service = tokio::time::timeout(timeout, handler.serve(transport)).await;
                (service, Some(started))
            }
            Transport::Http { url, headers } => {
                let mut map = HashMap::new();
                for (key, value) in headers {
                    let what = format!("MCP server \"{}\" header \"{key}\"", server.name);
                    let value = values::resolve(value, &what, &base.host.vars)?;
                    let name = http::HeaderName::try_from(key.as_str())
                        .map_err(|e| format!("header \"{key}\" is not a header name: {e}"))?;
                    let value = http::HeaderValue::try_from(value.as_str())
                        .map_err(|e| format!("header \"{key}\" has a value no header may carry: {e}"))?;
                    map.insert(name, value);
                }
                let _ = rustls::crypto::ring::default_provider().install_default();
                let config =
                    rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                        url.clone(),
                    )
                    .custom_headers(map);
                let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config.clone());
                // Over HTTP both revisions: 2026-07-28's `server/discover` first, `initialize` (2025-11-25) for a
                // server that answers it with an error.
                let lifecycle = rmcp::ClientLifecycleMode::Auto {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25],
                    legacy_version: Some(ProtocolVersion::V_2025_11_25),
                };
                let serve =
                    rmcp::ClientServiceExt::serve_with_lifecycle(handler.clone(), transport, lifecycle);
                let mut service = tokio::time::timeout(timeout, serve).await;
                // A server that answers `server/discover` with something else than a discovery (an empty result,
                // as some answer any method they do not know) gets `initialize` on a connection of its own.
                if let Ok(Err(rmcp::service::ClientInitializeError::ExpectedInitResult(_))) = &service {
                    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
                    service = tokio::time::timeout(timeout, handler.serve(transport)).await;
                }
                (service, None)
            }
        };
        let tail = |message: String| with_stderr_tail(message, &stderr);
        let service = match service {
            Ok(Ok(service)) => service,
            failed => {
                // The server may still be writing its last words: give them a moment.
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Err(tail(match failed {
                    Err(_) => format!("MCP request timed out after {}ms", timeout.as_millis()),
                    Ok(Err(error)) => initialize_error(&error),
                    Ok(Ok(_)) => unreachable!("matched above"),
                }));
            }
        };
        let peer = service.peer().clone();
        let Some(peer_info) = peer.peer_info() else {
            return Err(tail("Invalid MCP initialize result".into()));
        };
        let version = peer_info.protocol_version.to_string();
        if !ACCEPTED_VERSIONS.contains(&version.as_str()) {
            return Err(format!(
                "MCP server selected unsupported protocol version {version}"
            ));
        }
        let info = ServerInfo {
            protocol_version: version,
            instructions: peer_info.instructions.clone(),
            tools: peer_info.capabilities.tools.is_some(),
            resources: peer_info.capabilities.resources.is_some(),
        };
        peer.set_response_cache_config(rmcp::ClientCacheConfig::disabled())
            .await;
        // 2026-07-28 sends list changes only on a `subscriptions/listen` stream the client opens.
        if info.protocol_version.as_str() >= "2026-07-28" && info.tools {
            let (peer, changed) = (peer.clone(), handler_changed);
            tokio::spawn(async move {
                let filter = rmcp::model::SubscriptionFilter::builder()
                    .tools_list_changed()
                    .build();
                let Ok(mut subscription) = peer.listen(filter).await else {
                    return;
                };
                while let Ok(Some(_)) = subscription.next().await {
                    changed();
                }
            });
        }
        Ok(Connection {
            service,
            peer,
            raw,
            progress,
            info,
            timeout,
            stderr,
            started,
        })
    }

    /// Whether the connection has ended (the server exited or closed its stdout).
    pub fn is_closed(&self) -> bool {
        self.peer.is_transport_closed() || self.service.is_closed()
    }

    /// What the sandbox lets the server do, in one line (none for an HTTP server).
    pub fn sandbox_summary(&self) -> Option<&str> {
        self.started.as_ref().map(|s| s.summary.as_str())
    }

    /// The last lines of the server's stderr (at most pi's 2000 characters), trimmed.
    pub fn stderr_tail(&self) -> String {
        stderr_tail(&self.stderr)
    }

    /// The server's tools, every page: each tool's own JSON.
    pub async fn list_tools(&self, cancel: &CancellationToken) -> Result<Vec<Value>, String> {
        self.list_all("tools/list", "tools", cancel, |cursor| {
            ClientRequest::ListToolsRequest(ListToolsRequest::with_param(
                PaginatedRequestParams::default().with_cursor(cursor),
            ))
        })
        .await
    }

    /// Every page of a listing, checked as pi checks it: a duplicate cursor, more than 1000 pages.
    async fn list_all(
        &self,
        method: &str,
        key: &str,
        cancel: &CancellationToken,
        request: impl Fn(Option<String>) -> ClientRequest,
    ) -> Result<Vec<Value>, String> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..MAX_PAGES {
            let page = self.request(request(cursor.clone()), cancel, &|_| {}).await?;
            let Some(list) = page.get(key).and_then(Value::as_array) else {
                return Err(format!("Invalid MCP {method} result"));
            };
            items.extend(list.iter().cloned());
            match page.get("nextCursor") {
                None | Some(Value::Null) => return Ok(items),
                Some(Value::String(next)) if next.is_empty() => return Ok(items),
                Some(Value::String(next)) => {
                    if !seen.insert(next.clone()) {
                        return Err(format!("MCP {method} returned duplicate cursor: {next}"));
                    }
                    cursor = Some(next.clone());
                }
                Some(_) => return Err(format!("Invalid MCP {method} cursor")),
            }
        }
        Err(format!("MCP {method} exceeded {MAX_PAGES} pages"))
    }

    /// Call the tool `name` with `arguments`: the server's result as it sent it.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
        cancel: &CancellationToken,
        on_progress: OnProgress<'_>,
    ) -> Result<Value, String> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(name.to_owned()).with_arguments(arguments),
        ));
        let result = self.request(request, cancel, on_progress).await?;
        if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
            return Err(
                "The MCP server asked for the user's input to go on (input_required), which Toolwright's \
                        client does not give yet"
                    .into(),
            );
        }
        match &result {
            Value::Object(o) if o.get("content").is_none_or(Value::is_array) => Ok(result),
            _ => Err("Invalid MCP tools/call result".into()),
        }
    }

    /// One page of the server's resources (`cursor`: the page after it).
    pub async fn list_resources(
        &self,
        cursor: Option<String>,
        cancel: &CancellationToken,
    ) -> Result<Value, String> {
        self.request(resources_page(cursor), cancel, &|_| {}).await
    }

    /// Every page of the server's resources.
    pub async fn all_resources(&self, cancel: &CancellationToken) -> Result<Vec<Value>, String> {
        self.list_all("resources/list", "resources", cancel, resources_page)
            .await
    }

    /// One page of the server's resource templates.
    pub async fn list_resource_templates(
        &self,
        cursor: Option<String>,
        cancel: &CancellationToken,
    ) -> Result<Value, String> {
        self.request(templates_page(cursor), cancel, &|_| {}).await
    }

    /// Every page of the server's resource templates.
    pub async fn all_resource_templates(&self, cancel: &CancellationToken) -> Result<Vec<Value>, String> {
        self.list_all(
            "resources/templates/list",
            "resourceTemplates",
            cancel,
            templates_page,
        )
        .await
    }

    /// Read the resource `uri`.
    pub async fn read_resource(&self, uri: &str, cancel: &CancellationToken) -> Result<Value, String> {
        let request =
            ClientRequest::ReadResourceRequest(ReadResourceRequest::new(ReadResourceRequestParams::new(uri)));
        self.request(request, cancel, &|_| {}).await
    }

    /// Send `request` with pi's timeout (re-armed by each progress notification), cancelled with `cancel`: the
    /// server's raw result (as rmcp re-encodes it where the transport kept none).
    async fn request(
        &self,
        request: ClientRequest,
        cancel: &CancellationToken,
        on_progress: OnProgress<'_>,
    ) -> Result<Value, String> {
        if cancel.is_cancelled() {
            return Err("MCP request aborted".into());
        }
        let options = PeerRequestOptions::with_timeout(self.timeout).reset_timeout_on_progress();
        let handle = self
            .peer
            .send_cancellable_request(request, options)
            .await
            .map_err(|e| self.service_error(&e))?;
        let id = handle.id.clone();
        let token = handle.progress_token.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        self.routes().insert(token.clone(), tx);
        let response = handle.await_response();
        tokio::pin!(response);
        let mut aborted = false;
        let outcome = loop {
            tokio::select! {
                outcome = &mut response => break outcome,
                Some(progress) = rx.recv() => on_progress(&progress),
                () = cancel.cancelled(), if !aborted => {
                    aborted = true;
                    let _ = self
                        .peer
                        .notify_cancelled(CancelledNotificationParam::new(Some(id.clone()), Some("Aborted".into())))
                        .await;
                }
            }
        };
        self.routes().remove(&token);
        while let Ok(progress) = rx.try_recv() {
            on_progress(&progress);
        }
        let raw = self.raw.take(&id);
        if aborted {
            return Err("MCP request aborted".into());
        }
        let result = outcome.map_err(|e| self.service_error(&e))?;
        Ok(match (raw, result) {
            (Some(raw), _) => raw,
            (None, ServerResult::CustomResult(value)) => value.0,
            (None, typed) => serde_json::to_value(&typed).unwrap_or(Value::Null),
        })
    }

    fn routes(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        HashMap<ProgressToken, tokio::sync::mpsc::UnboundedSender<ProgressNotificationParam>>,
    > {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn service_error(&self, error: &ServiceError) -> String {
        match error {
            ServiceError::McpError(e) => e.message.to_string(),
            ServiceError::Timeout { timeout } => {
                format!("MCP request timed out after {}ms", timeout.as_millis())
            }
            ServiceError::Cancelled { .. } => "MCP request aborted".into(),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => "MCP connection closed".into(),
            ServiceError::UnexpectedResponse => "Invalid MCP result".into(),
            other => other.to_string(),
        }
    }
}

/// The `resources/list` page after `cursor`.
fn resources_page(cursor: Option<String>) -> ClientRequest {
    ClientRequest::ListResourcesRequest(ListResourcesRequest::with_param(
        PaginatedRequestParams::default().with_cursor(cursor),
    ))
}

/// The `resources/templates/list` page after `cursor`.
fn templates_page(cursor: Option<String>) -> ClientRequest {
    ClientRequest::ListResourceTemplatesRequest(ListResourceTemplatesRequest::with_param(
        PaginatedRequestParams::default().with_cursor(cursor),
    ))
}

fn initialize_error(error: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    if error.is_authorization_required() {
        return "The MCP server requires authorization (HTTP 401). Toolwright does not sign in with OAuth: give the \
                server \"headers\": {\"Authorization\": \"Bearer ${TOKEN}\"} in its entry."
            .into();
    }
    match error {
        // A server that exits before it answers closes the pipe the request is written to (pi: `write EPIPE` or
        // `MCP connection closed`, whichever comes first).
        E::ConnectionClosed(_) | E::TransportError { .. } => "MCP connection closed".into(),
        E::JsonRpcError(e) => e.message.to_string(),
        E::ExpectedInitResult(_) => "Invalid MCP initialize result".into(),
        // Both phases failed: the second's error says why.
        E::LegacyFallbackFailed { fallback, .. } => initialize_error(fallback),
        other => other.to_string(),
    }
}

/// Read a server's stderr as it comes, keeping its last bytes.
async fn keep_stderr(mut pipe: tokio::net::unix::pipe::Receiver, kept: Arc<Mutex<Vec<u8>>>) {
    let mut buf = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > STDERR_KEPT {
                    let cut = kept.len() - STDERR_KEPT;
                    kept.drain(..cut);
                }
            }
        }
    }
}

fn stderr_tail(kept: &Mutex<Vec<u8>>) -> String {
    let kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
    let text = String::from_utf8_lossy(&kept);
    let text = text.trim();
    let chars: Vec<char> = text.chars().collect();
    let start = chars.len().saturating_sub(STDERR_TAIL_CHARS);
    chars[start..].iter().collect()
}

/// `message`, followed by the tail of the server's stderr when it wrote any (pi's connection errors).
fn with_stderr_tail(message: String, kept: &Mutex<Vec<u8>>) -> String {
    let tail = stderr_tail(kept);
    if tail.is_empty() {
        message
    } else {
        format!("{message}\n{tail}")
    }
}
