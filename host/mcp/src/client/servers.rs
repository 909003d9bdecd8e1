//! The configured MCP servers of a toolset, connected in the background on a runtime of their own, and their
//! tools as [`ToolDefinition`]s with pi 1.6.0's names, labels, descriptions, schemas, exposures and namespaces.
//!
//! - [`McpServers::start`] connects every enabled server at once; [`McpServers::settle`] waits (bounded) for
//!   each first attempt, as a toolset that lists the tools must.
//! - A call goes through the server's connection; one that dropped is opened again on the next call (pi's rule),
//!   and `notifications/tools/list_changed` lists the tools again ([`McpServers::changes`] counts it).
//! - The resource tools (`list_mcp_resources`, `list_mcp_resource_templates`, `read_mcp_resource`) are offered
//!   once a connected server offers resources.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use toolwright_core::definition::{ToolContext, ToolDefinition, ToolSource};
use toolwright_core::tool::{ToolError, ToolExecution};
use toolwright_sdk::{Content, Exposure as ToolExposure, ToolAnnotations, ToolNamespace, ToolResult};

use super::config::{Exposure, ServerConfig, Transport};
use super::connection::{Connection, ServerInfo};
use super::convert::{self, Source};
use super::naming;
use super::sandbox::{SandboxBase, ServerGrant};

/// A server's state, as `toolwright mcp-servers list` shows it.
#[derive(Debug, Clone)]
pub enum ServerState {
    /// `enabled: false`.
    Disabled,
    /// Its first connection is being made.
    Starting,
    /// Connected; its tools as it listed them (each tool's own JSON).
    Connected {
        /// What it said of itself.
        info: ServerInfo,
        /// Its tools.
        tools: Vec<Value>,
    },
    /// It could not be reached (pi's text, with its stderr's tail).
    Failed(String),
    /// It was connected and the connection ended; the next call connects again.
    Disconnected(String),
    /// Not started: it is another program than the one approved (why, for people).
    Held(String),
}

/// A server to start, with its identity computed once (see [`identity`]) and, when it is to be held rather than
/// started, why.
#[derive(Debug, Clone)]
pub struct Planned {
    /// Its configuration.
    pub config: ServerConfig,
    /// Its grant.
    pub grant: ServerGrant,
    /// The SHA-256 of its identity.
    pub identity: String,
    /// The identity's text (what `identity` is the digest of).
    pub described: String,
    /// Why it is not started, if it is held.
    pub held: Option<String>,
}

/// One configured server.
pub struct Server {
    /// Its configuration.
    pub config: ServerConfig,
    /// What its sandbox grants beyond the defaults.
    pub grant: ServerGrant,
    /// The SHA-256 of its identity (see [`identity`]), as it was when it was started.
    pub identity: String,
    /// The identity's text.
    pub described: String,
    state: Mutex<ServerState>,
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    /// Told when the state changes.
    changed: tokio::sync::watch::Sender<u64>,
    /// Told when the server says its tools changed (its refresher lists them again).
    refresh: Arc<tokio::sync::Notify>,
}

impl Server {
    /// Its state now.
    pub fn state(&self) -> ServerState {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn set_state(&self, state: ServerState) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
        self.changed.send_modify(|n| *n += 1);
    }

    /// What the sandbox lets it do, once it was started (stdio servers only).
    pub async fn sandbox_summary(&self) -> Option<String> {
        let connection = self.connection.lock().await;
        connection
            .as_ref()
            .and_then(|c| c.sandbox_summary().map(str::to_owned))
    }

    /// The connection, opened (again) when there is none or it ended.
    async fn connection(self: &Arc<Self>, base: &SandboxBase) -> Result<Arc<Connection>, String> {
        if !self.config.enabled {
            return Err(format!("MCP server \"{}\" is disabled.", self.config.name));
        }
        if let ServerState::Held(why) = self.state() {
            return Err(format!("the MCP server \"{}\" is held: {why}", self.config.name));
        }
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            if !connection.is_closed() {
                return Ok(connection.clone());
            }
            let tail = connection.stderr_tail();
            let error = if tail.is_empty() {
                "Connection closed".to_owned()
            } else {
                format!("Connection closed\n{tail}")
            };
            self.set_state(ServerState::Disconnected(error));
            // What the server left running dies with its cgroup now, not at the next successful start.
            slot.take();
        }
        let refresh = self.refresh.clone();
        let on_change: super::connection::OnChange = Arc::new(move || refresh.notify_one());
        let opened = Connection::open(&self.config, &self.grant, base, on_change).await;
        let connection = match opened {
            Ok(connection) => Arc::new(connection),
            Err(error) => {
                self.set_state(ServerState::Failed(error.clone()));
                return Err(error);
            }
        };
        let tools = if connection.info.tools {
            match connection.list_tools(&Default::default()).await {
                Ok(tools) => tools,
                Err(error) => {
                    self.set_state(ServerState::Failed(error.clone()));
                    return Err(error);
                }
            }
        } else {
            Vec::new()
        };
        let tools = match valid_tools(tools) {
            Ok(tools) => tools,
            Err(error) => {
                self.set_state(ServerState::Failed(error.clone()));
                return Err(error);
            }
        };
        *slot = Some(connection.clone());
        self.set_state(ServerState::Connected {
            info: connection.info.clone(),
            tools,
        });
        Ok(connection)
    }

    /// List the tools again (the server said they changed).
    async fn refresh(self: &Arc<Self>, base: &SandboxBase) {
        let Ok(connection) = self.connection(base).await else {
            return;
        };
        match connection
            .list_tools(&Default::default())
            .await
            .and_then(valid_tools)
        {
            Ok(tools) => self.set_state(ServerState::Connected {
                info: connection.info.clone(),
                tools,
            }),
            Err(error) => tracing::warn!(server = %self.config.name, "Failed to refresh tools: {error}"),
        }
    }
}

/// A listing's tools, each checked as pi checks it (a string `name`, an object `inputSchema`).
fn valid_tools(tools: Vec<Value>) -> Result<Vec<Value>, String> {
    if !tools.iter().all(|t| {
        t.get("name").is_some_and(Value::is_string) && t.get("inputSchema").is_some_and(Value::is_object)
    }) {
        return Err("Invalid entry in MCP tools/list result".into());
    }
    // One name listed twice would be two tools under one name: which of them was approved, which is served?
    let mut names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    names.sort_unstable();
    if let Some(twice) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "Invalid MCP tools/list result: the tool \"{}\" is listed twice",
            twice[0]
        ));
    }
    Ok(tools)
}

/// What identifies a server to the user who approved it: its command, arguments and the SHA-256 of the program
/// they resolve to, or its URL; as one SHA-256, lower-case hex, with the text it was made from.
pub fn identity(config: &ServerConfig, base: &SandboxBase) -> (String, String) {
    use sha2::Digest as _;
    let text = match &config.transport {
        Transport::Stdio { command, args, .. } => {
            let program = super::sandbox::resolve_program(command, base);
            let digest = program
                .as_ref()
                .and_then(|p| std::fs::read(p).ok())
                .map(|bytes| hex(&sha2::Sha256::digest(&bytes)))
                .unwrap_or_else(|| "missing".into());
            let program = program.map_or_else(|| command.clone(), |p| p.display().to_string());
            format!(
                "stdio {}\nprogram {program} sha256 {digest}",
                serde_json::to_string(&[command].into_iter().chain(args).collect::<Vec<_>>())
                    .unwrap_or_default()
            )
        }
        Transport::Http { url, .. } => format!("http {url}"),
    };
    (hex(&sha2::Sha256::digest(text.as_bytes())), text)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The configured servers, and the runtime their connections live on.
#[derive(Clone)]
pub struct McpServers {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    handle: tokio::runtime::Handle,
    servers: Vec<Arc<Server>>,
    base: SandboxBase,
    changes: tokio::sync::watch::Sender<u64>,
    /// The servers held whole since their approval: none of their tools or resources is reached.
    held: Mutex<Vec<String>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropped from inside another runtime, a runtime may not block: its tasks end with it in the
        // background, and each server's process group is killed as its process is dropped.
        if let Some(runtime) = self.runtime.lock().unwrap_or_else(PoisonError::into_inner).take() {
            runtime.shutdown_background();
        }
    }
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .inner
            .servers
            .iter()
            .map(|s| s.config.name.as_str())
            .collect();
        f.debug_struct("McpServers").field("servers", &names).finish()
    }
}

impl McpServers {
    /// Start connecting every enabled server of `configs` (each with its grant), in the background.
    pub fn start(configs: Vec<(ServerConfig, ServerGrant)>, base: SandboxBase) -> std::io::Result<Self> {
        let planned = configs
            .into_iter()
            .map(|(config, grant)| {
                let (identity, described) = identity(&config, &base);
                Planned {
                    config,
                    grant,
                    identity,
                    described,
                    held: None,
                }
            })
            .collect();
        Self::start_planned(planned, base)
    }

    /// Start connecting the servers of `planned`, but those it holds (they are not started at all).
    pub fn start_planned(planned: Vec<Planned>, base: SandboxBase) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("toolwright-mcp-client")
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let changes = tokio::sync::watch::Sender::new(0u64);
        let servers: Vec<Arc<Server>> = planned
            .into_iter()
            .map(
                |Planned {
                     config,
                     grant,
                     identity,
                     described,
                     held,
                 }| {
                    let state = match held {
                        Some(why) => ServerState::Held(why),
                        None if config.enabled => ServerState::Starting,
                        None => ServerState::Disabled,
                    };
                    Arc::new(Server {
                        config,
                        grant,
                        identity,
                        described,
                        state: Mutex::new(state),
                        connection: tokio::sync::Mutex::new(None),
                        changed: changes.clone(),
                        refresh: Arc::new(tokio::sync::Notify::new()),
                    })
                },
            )
            .collect();
        let startable = |s: &&Arc<Server>| s.config.enabled && !matches!(s.state(), ServerState::Held(_));
        for server in servers.iter().filter(startable) {
            let (server, base) = (server.clone(), base.clone());
            handle.spawn(async move {
                let _ = server.connection(&base).await;
                // Its refresher: while the servers live, each `tools/list_changed` lists the tools again.
                let weak = Arc::downgrade(&server);
                let refresh = server.refresh.clone();
                drop(server);
                loop {
                    refresh.notified().await;
                    let Some(server) = weak.upgrade() else { return };
                    server.refresh(&base).await;
                }
            });
        }
        Ok(McpServers {
            inner: Arc::new(Inner {
                runtime: Mutex::new(Some(runtime)),
                handle,
                servers,
                base,
                changes,
                held: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Hold the servers named in `names` whole: their resources are not listed nor read (their tools are left out
    /// of [`McpServers::definitions_of`] by the same names).
    pub fn hold(&self, names: Vec<String>) {
        *self.inner.held.lock().unwrap_or_else(PoisonError::into_inner) = names;
    }

    fn is_held(&self, name: &str) -> bool {
        self.inner
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|h| h == name)
    }

    /// What every stdio server's sandbox starts from.
    pub fn base(&self) -> &SandboxBase {
        &self.inner.base
    }

    /// The servers, in configuration order.
    pub fn servers(&self) -> &[Arc<Server>] {
        &self.inner.servers
    }

    /// Counts every change of a server's state (connected, failed, tools listed again).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Wait until no server is starting, or until `limit` has passed.
    pub fn settle(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut changes = self.changes();
        loop {
            if !self
                .servers()
                .iter()
                .any(|s| matches!(s.state(), ServerState::Starting))
            {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let waited = self
                .inner
                .handle
                .block_on_safe(async move { tokio::time::timeout(left, changes.changed()).await });
            match waited {
                Some(Ok(Ok(()))) => changes = self.changes(),
                _ => return,
            }
        }
    }

    /// Run `future` on the servers' runtime and wait for it from any thread or runtime.
    pub fn run<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static) -> T {
        self.inner
            .handle
            .block_on_safe(future)
            .expect("the MCP client's runtime runs as long as its servers")
    }

    /// The tool definitions of the connected servers, in configuration order, named as pi names them (a name
    /// `taken` by a tool loaded before them gets its hash), with the resource tools when a server offers
    /// resources.
    pub fn definitions(&self, taken: impl Fn(&str) -> bool) -> Vec<ToolDefinition> {
        self.definitions_of(&self.snapshot(), &[], taken)
    }

    /// Every server with its state at one moment: what a load checks and registers must be the same listing
    /// (a server that lists its tools again between two reads of its state would get past the check).
    pub fn snapshot(&self) -> Vec<(Arc<Server>, ServerState)> {
        self.servers().iter().map(|s| (s.clone(), s.state())).collect()
    }

    /// [`McpServers::definitions`] of the states of `snapshot`, leaving out the servers named in `held` (their
    /// tools and their resources).
    pub fn definitions_of(
        &self,
        snapshot: &[(Arc<Server>, ServerState)],
        held: &[String],
        taken: impl Fn(&str) -> bool,
    ) -> Vec<ToolDefinition> {
        let mut definitions: Vec<ToolDefinition> = Vec::new();
        let snapshot: Vec<&(Arc<Server>, ServerState)> = snapshot
            .iter()
            .filter(|(s, _)| !held.contains(&s.config.name))
            .collect();
        let resource_servers: Vec<Arc<Server>> = snapshot
            .iter()
            .filter(|(s, state)| reaches_resources(s, state))
            .map(|(s, _)| s.clone())
            .collect();
        for (server, state) in snapshot {
            let ServerState::Connected { info, tools } = state else {
                continue;
            };
            let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
            let assigned = naming::listing_names(&server.config.name, &names, |candidate, _| {
                taken(candidate) || definitions.iter().any(|d| d.name == candidate)
            });
            let reads = resource_servers
                .iter()
                .any(|s| s.config.name == server.config.name);
            for (tool, name) in tools.iter().zip(assigned) {
                definitions.push(self.definition(server, info, tool, name, reads));
            }
        }
        definitions.extend(self.resource_definitions(&resource_servers));
        definitions
    }

    /// The servers whose resources the resource tools reach: enabled, connected, offering resources, not hidden.
    fn resource_servers(&self) -> Vec<Arc<Server>> {
        self.servers()
            .iter()
            .filter(|s| !self.is_held(&s.config.name) && reaches_resources(s, &s.state()))
            .cloned()
            .collect()
    }

    fn definition(
        &self,
        server: &Arc<Server>,
        info: &ServerInfo,
        tool: &Value,
        name: String,
        reads_resources: bool,
    ) -> ToolDefinition {
        let raw_name = tool["name"].as_str().unwrap_or_default().to_owned();
        // pi's `tool.title ?? tool.annotations?.title`, then `description || title || fallback`: an empty title
        // falls back.
        let title = tool
            .get("title")
            .and_then(Value::as_str)
            .or_else(|| tool.pointer("/annotations/title").and_then(Value::as_str))
            .filter(|t| !t.is_empty());
        let description = tool
            .get("description")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .or(title)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("MCP tool {raw_name} from server {}", server.config.name));
        let server_name = server.config.name.clone();
        let exposure = tool_exposure(server.config.tool_exposure(&raw_name));
        let run = Runner {
            servers: self.clone(),
            server: server.clone(),
            tool: raw_name.clone(),
            reads_resources,
        };
        let mut definition = ToolDefinition::new(
            name,
            description,
            input_schema(tool.get("inputSchema")),
            move |execution: ToolExecution, ctx: Option<ToolContext>| {
                let refused = refused_under(ctx.as_ref(), &run.server.config.name);
                let run = run.clone();
                async move {
                    match refused {
                        Some(refusal) => Err(ToolError::new(refusal)),
                        None => run.call(execution).await,
                    }
                }
            },
        );
        definition.label = format!("{server_name}/{raw_name}");
        definition.annotations = annotations(tool.get("annotations"));
        definition.output_schema = Some(output_schema(tool.get("outputSchema")));
        definition.exposure = exposure;
        definition.namespace = Some(namespace(&server.config, info));
        definition.source = ToolSource::Mcp {
            server: server_name,
            identity: server.identity.clone(),
        };
        definition
    }
}

/// Why a call made under a plugin's authority (a nested call, or a codemode script a plugin runs) may not reach
/// an MCP server: the server runs with grants of its own, which cannot be narrowed to the caller's, so calling
/// it would give the plugin what the server was granted. None for the model's own calls.
fn refused_under(ctx: Option<&ToolContext>, server: &str) -> Option<String> {
    let authority = ctx?.authority.as_ref()?;
    let which = if server.is_empty() {
        "the MCP servers' resources".to_owned()
    } else {
        format!("the tools of the MCP server \"{server}\"")
    };
    Some(format!(
        "Permission denied: {} may not reach {which}: a server runs with grants of its own, which a nested call \
         cannot narrow to its caller's. Only the model calls MCP tools.",
        authority.principal()
    ))
}

/// Whether the resource tools reach `server` in `state`: connected, offering resources, not hidden (pi's rule).
fn reaches_resources(server: &Server, state: &ServerState) -> bool {
    server.config.exposure != Exposure::Hidden
        && matches!(state, ServerState::Connected { info, .. } if info.resources)
}

/// pi's registered exposure of an MCP tool: `codemode` registers as `deferred` (codemode scripts and
/// `tool_search` reach it).
fn tool_exposure(exposure: Exposure) -> ToolExposure {
    match exposure {
        Exposure::Codemode | Exposure::Deferred => ToolExposure::Deferred,
        Exposure::Direct => ToolExposure::Direct,
        Exposure::Hidden => ToolExposure::Hidden,
    }
}

/// A server's namespace: `mcp__<server>`, found by the server's own name too, with its description and
/// instructions.
fn namespace(config: &ServerConfig, info: &ServerInfo) -> ToolNamespace {
    ToolNamespace {
        name: naming::namespace(&config.name),
        aliases: vec![config.name.clone()],
        description: config
            .description
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_owned),
        instructions: info.instructions.clone(),
    }
}

/// The server's input schema as pi declares it: as sent, with `type: "object"` and `properties: {}` added at
/// the end where missing.
fn input_schema(schema: Option<&Value>) -> Value {
    let mut schema = schema.and_then(Value::as_object).cloned().unwrap_or_default();
    if !schema.contains_key("type") {
        schema.insert("type".into(), json!("object"));
    }
    if !schema.contains_key("properties") {
        schema.insert("properties".into(), json!({}));
    }
    Value::Object(schema)
}

/// The four boolean hints pi carries, in its order.
fn annotations(annotations: Option<&Value>) -> Option<ToolAnnotations> {
    let hint = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_bool);
    let carried = ToolAnnotations {
        read_only_hint: hint("readOnlyHint"),
        destructive_hint: hint("destructiveHint"),
        idempotent_hint: hint("idempotentHint"),
        open_world_hint: hint("openWorldHint"),
    };
    (carried != ToolAnnotations::default()).then_some(carried)
}

/// The schema of what a codemode script gets from an MCP tool: the result, its `structuredContent` typed by the
/// tool's output schema (its local `$ref`s moved below `structuredContent`).
fn output_schema(tool_schema: Option<&Value>) -> Value {
    let structured = tool_schema
        .filter(|s| s.is_object())
        .map(|s| rebase_refs(s.clone()))
        .unwrap_or_else(|| json!({}));
    json!({
        "type": "object",
        "properties": {
            "content": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "type": {"enum": ["text", "image", "audio", "resource_link", "resource"]},
                    "text": {"type": "string"},
                    "data": {"type": "string"},
                    "mimeType": {"type": "string"}
                },
                "required": ["type"],
                "additionalProperties": true
            }},
            "structuredContent": structured,
            "isError": {"type": "boolean"}
        },
        "required": ["content"],
        "additionalProperties": true
    })
}

/// Local `$ref`s (`#`, `#/…`) of a schema placed at `#/properties/structuredContent` (pi's rewrite: the values
/// of `const`, `enum`, `default` and `examples` are data, left alone).
fn rebase_refs(schema: Value) -> Value {
    const DATA: [&str; 4] = ["const", "enum", "default", "examples"];
    match schema {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, value)| {
                    let value = match (key.as_str(), value) {
                        ("$ref", Value::String(r)) if r == "#" || r.starts_with("#/") => {
                            Value::String(format!("#/properties/structuredContent{}", &r[1..]))
                        }
                        (k, v) if DATA.contains(&k) => v,
                        (_, v) => rebase_refs(v),
                    };
                    (key, value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(rebase_refs).collect()),
        other => other,
    }
}

/// A number as JavaScript prints it (`1`, not `1.0`).
fn js_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// The code of one MCP tool.
#[derive(Clone)]
struct Runner {
    servers: McpServers,
    server: Arc<Server>,
    tool: String,
    reads_resources: bool,
}

impl Runner {
    async fn call(self, execution: ToolExecution) -> Result<ToolResult, ToolError> {
        let ToolExecution {
            params,
            cancel,
            updates,
            ..
        } = execution;
        let handle = self.servers.inner.handle.clone();
        let joined = handle
            .spawn(async move {
                let Runner {
                    servers,
                    server,
                    tool,
                    reads_resources,
                } = self;
                let connection = server.connection(&servers.inner.base).await.map_err(|e| {
                    if e.starts_with("MCP server \"") && e.ends_with(" is disabled.") {
                        e
                    } else {
                        format!("MCP server \"{}\" failed to connect: {e}", server.config.name)
                    }
                })?;
                let listed = matches!(server.state(), ServerState::Connected { tools, .. }
                    if tools.iter().any(|t| t["name"] == tool.as_str()));
                if !listed {
                    return Err(format!(
                        "MCP tool \"{}/{tool}\" is no longer available.",
                        server.config.name
                    ));
                }
                let arguments = match params {
                    Value::Object(map) => map,
                    _ => Map::new(),
                };
                let source_server = server.config.name.clone();
                let source_tool = tool.clone();
                let progress = move |p: &rmcp::model::ProgressNotificationParam| {
                    let text = p.message.clone().unwrap_or_else(|| match p.total {
                        Some(total) => format!("Progress {}/{}", js_number(p.progress), js_number(total)),
                        None => format!("Progress {}", js_number(p.progress)),
                    });
                    updates.update(ToolResult {
                        content: vec![Content::text(text)],
                        details: Some(json!({"server": source_server, "tool": source_tool})),
                        ..Default::default()
                    });
                };
                let raw = connection.call_tool(&tool, arguments, &cancel, &progress).await?;
                Ok(convert::tool_result(
                    raw,
                    Source {
                        server: &server.config.name,
                        tool: &tool,
                        reads_resources,
                    },
                ))
            })
            .await;
        match joined {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(message)) => Err(ToolError::new(message)),
            Err(e) => Err(ToolError::new(format!("the MCP call ended abnormally: {e}"))),
        }
    }
}

/// Resource tools.
impl McpServers {
    fn resource_definitions(&self, servers: &[Arc<Server>]) -> Vec<ToolDefinition> {
        if servers.is_empty() {
            return Vec::new();
        }
        let present = |e: Exposure| servers.iter().any(|s| s.config.exposure == e);
        let exposure = [Exposure::Direct, Exposure::Codemode, Exposure::Deferred]
            .into_iter()
            .find(|e| present(*e))
            .map_or(ToolExposure::Hidden, tool_exposure);
        let list_params = json!({"type": "object", "properties": {
            "server": {"type": "string", "description": "MCP server name. Omit to list every server with resources."},
            "cursor": {"type": "string", "description": "Opaque cursor from a previous call with the same server; omit for the first page."}
        }, "additionalProperties": false});
        let read_params = json!({"type": "object", "properties": {
            "server": {"type": "string", "description": "MCP server name exactly as configured. Must match the 'server' field returned by list_mcp_resources."},
            "uri": {"type": "string", "description": "Resource URI to read. Must be one of the URIs returned by list_mcp_resources."}
        }, "required": ["server", "uri"], "additionalProperties": false});
        let errors = json!({"type": "array", "description": "Servers that could not be listed", "items": {
            "type": "object",
            "properties": {"server": {"type": "string"}, "error": {"type": "string"}},
            "required": ["server", "error"]}});
        let list_output = json!({"type": "object", "properties": {
            "server": {"type": "string"},
            "resources": {"type": "array", "items": {"type": "object", "properties": {
                "server": {"type": "string"}, "uri": {"type": "string"}, "name": {"type": "string"},
                "title": {"type": "string"}, "description": {"type": "string"}, "mimeType": {"type": "string"},
                "size": {"type": "number"}}, "required": ["server", "uri", "name"]}},
            "nextCursor": {"type": "string"},
            "errors": errors.clone()}, "required": ["resources"]});
        let templates_output = json!({"type": "object", "properties": {
            "server": {"type": "string"},
            "resourceTemplates": {"type": "array", "items": {"type": "object", "properties": {
                "server": {"type": "string"},
                "uriTemplate": {"type": "string", "description": "RFC 6570 URI template"},
                "name": {"type": "string"}, "title": {"type": "string"}, "description": {"type": "string"},
                "mimeType": {"type": "string"}}, "required": ["server", "uriTemplate", "name"]}},
            "nextCursor": {"type": "string"},
            "errors": errors}, "required": ["resourceTemplates"]});
        let read_output = json!({"type": "object", "properties": {
            "server": {"type": "string"}, "uri": {"type": "string"},
            "contents": {"type": "array", "items": {"anyOf": [
                {"type": "object", "properties": {"uri": {"type": "string"}, "mimeType": {"type": "string"},
                    "text": {"type": "string"}}, "required": ["uri", "text"]},
                {"type": "object", "properties": {"uri": {"type": "string"}, "mimeType": {"type": "string"},
                    "blob": {"type": "string", "description": "base64"}}, "required": ["uri", "blob"]}]}}},
            "required": ["server", "uri", "contents"]});
        let tools = [
            (
                "list_mcp_resources",
                "Lists resources provided by MCP servers. Resources allow servers to share data that provides context \
                 to language models, such as files, database schemas, or application-specific information. Prefer \
                 resources over web search when possible.",
                list_params.clone(),
                list_output,
            ),
            (
                "list_mcp_resource_templates",
                "Lists resource templates provided by MCP servers. Parameterized resource templates allow servers to \
                 share data that takes parameters and provides context to language models, such as files, database \
                 schemas, or application-specific information. Prefer resource templates over web search when \
                 possible.",
                list_params,
                templates_output,
            ),
            (
                "read_mcp_resource",
                "Read a specific resource from an MCP server given the server name and resource URI.",
                read_params,
                read_output,
            ),
        ];
        tools
            .into_iter()
            .map(|(name, description, parameters, output)| {
                let servers = self.clone();
                let mut definition = ToolDefinition::new(
                    name,
                    description,
                    parameters,
                    move |execution: ToolExecution, ctx: Option<ToolContext>| {
                        let servers = servers.clone();
                        let refused = refused_under(ctx.as_ref(), "");
                        async move {
                            match refused {
                                Some(refusal) => Err(ToolError::new(refusal)),
                                None => servers.resource_call(name, execution).await,
                            }
                        }
                    },
                );
                definition.exposure = exposure;
                definition.output_schema = Some(output);
                definition.annotations = Some(ToolAnnotations {
                    read_only_hint: Some(true),
                    ..Default::default()
                });
                definition.source = ToolSource::Mcp {
                    server: String::new(),
                    identity: String::new(),
                };
                definition
            })
            .collect()
    }

    async fn resource_call(
        &self,
        tool: &'static str,
        execution: ToolExecution,
    ) -> Result<ToolResult, ToolError> {
        let this = self.clone();
        let joined = self
            .inner
            .handle
            .spawn(async move {
                this.resource_call_here(tool, execution.params, execution.cancel)
                    .await
            })
            .await;
        match joined {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(message)) => Err(ToolError::new(message)),
            Err(e) => Err(ToolError::new(format!("the MCP call ended abnormally: {e}"))),
        }
    }

    async fn resource_call_here(
        &self,
        tool: &'static str,
        params: Value,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<ToolResult, String> {
        let arg = |key: &str| -> Result<Option<String>, String> {
            match params.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
                Some(_) => Err(format!("{key} must be a string")),
            }
        };
        let server_name = arg("server")?;
        let servers = self.resource_servers();
        let find = |name: &str| -> Result<Arc<Server>, String> {
            servers
                .iter()
                .find(|s| s.config.name == name)
                .cloned()
                .ok_or_else(|| {
                    let available: Vec<&str> = servers.iter().map(|s| s.config.name.as_str()).collect();
                    if available.is_empty() {
                        format!("MCP server \"{name}\" has no resources")
                    } else {
                        format!(
                            "MCP server \"{name}\" has no resources. Servers with resources: {}",
                            available.join(", ")
                        )
                    }
                })
        };
        let base = &self.inner.base;
        let mut details = json!({"server": server_name.clone().unwrap_or_default(), "tool": tool});
        let payload = match tool {
            "read_mcp_resource" => {
                let name = server_name.ok_or("server must be provided")?;
                let uri = arg("uri")?.ok_or("uri must be provided")?;
                let server = find(&name)?;
                let raw = server
                    .connection(base)
                    .await?
                    .read_resource(&uri, &cancel)
                    .await?;
                let contents = raw
                    .get("contents")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let mut content = Vec::new();
                if contents.is_empty() {
                    content.push(Content::text(format!("Resource {uri} is empty.")));
                }
                for item in &contents {
                    if contents.len() > 1 {
                        let item_uri = item.get("uri").and_then(Value::as_str).unwrap_or(&uri);
                        content.push(Content::text(format!("{item_uri}:")));
                    }
                    content.push(toolwright_core::model_view::embedded(item));
                }
                let content = convert::limited(content, &mut details);
                let contents: Vec<Value> = contents.into_iter().map(strip_meta).collect();
                return Ok(ToolResult {
                    content,
                    details: Some(details),
                    structured_content: Some(json!({"server": name, "uri": uri, "contents": contents})),
                    ..Default::default()
                });
            }
            _ => {
                let templates = tool == "list_mcp_resource_templates";
                let key = if templates {
                    "resourceTemplates"
                } else {
                    "resources"
                };
                let cursor = arg("cursor")?;
                match server_name {
                    Some(name) => {
                        let server = find(&name)?;
                        let connection = server.connection(base).await?;
                        let page = if templates {
                            connection.list_resource_templates(cursor, &cancel).await
                        } else {
                            connection.list_resources(cursor, &cancel).await
                        };
                        let page = match page {
                            Err(e) if templates && e.contains("Method not found") => json!({}),
                            other => other?,
                        };
                        let items = page
                            .get(key)
                            .and_then(Value::as_array)
                            .cloned()
                            .unwrap_or_default();
                        let mut payload = json!({"server": name, key: items_of(&name, items, templates)});
                        if let Some(next) = page
                            .get("nextCursor")
                            .and_then(Value::as_str)
                            .filter(|c| !c.is_empty())
                        {
                            payload["nextCursor"] = json!(next);
                        }
                        payload
                    }
                    None => {
                        if cursor.is_some() {
                            return Err("cursor can only be used when a server is specified".into());
                        }
                        let mut all = Vec::new();
                        let mut errors = Vec::new();
                        let mut sorted = servers.clone();
                        sorted.sort_by(|a, b| naming::locale_order(&a.config.name, &b.config.name));
                        for server in sorted {
                            let listed = match server.connection(base).await {
                                Ok(c) if templates => c.all_resource_templates(&cancel).await,
                                Ok(c) => c.all_resources(&cancel).await,
                                Err(e) => Err(e),
                            };
                            match listed {
                                Ok(items) => all.extend(items_of(&server.config.name, items, templates)),
                                Err(e) if templates && e.contains("Method not found") => {}
                                Err(e) => errors.push(json!({"server": server.config.name, "error": e})),
                            }
                        }
                        let mut payload = json!({ key: all });
                        if !errors.is_empty() {
                            payload["errors"] = Value::Array(errors);
                        }
                        payload
                    }
                }
            }
        };
        let content = convert::limited(vec![Content::text(payload.to_string())], &mut details);
        Ok(ToolResult {
            content,
            details: Some(details),
            structured_content: Some(payload),
            ..Default::default()
        })
    }
}

fn strip_meta(mut item: Value) -> Value {
    if let Some(map) = item.as_object_mut() {
        map.remove("_meta");
    }
    item
}

/// A listing's items as pi prints them: `server` first, then the server's fields but `_meta` and `icons`,
/// `name` defaulted to the URI; MCP-app resources (`ui://`, `profile=mcp-app`) left out.
fn items_of(server: &str, items: Vec<Value>, templates: bool) -> Vec<Value> {
    let uri_key = if templates { "uriTemplate" } else { "uri" };
    items
        .into_iter()
        .filter_map(|item| {
            let Value::Object(fields) = item else { return None };
            let uri = fields
                .get(uri_key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let app_mime = fields.get("mimeType").and_then(Value::as_str).is_some_and(|m| {
                m.to_ascii_lowercase()
                    .replace(' ', "")
                    .contains("profile=\"mcp-app\"")
                    || m.to_ascii_lowercase()
                        .replace(' ', "")
                        .contains("profile=mcp-app")
            });
            if uri.starts_with("ui://") || app_mime {
                return None;
            }
            let mut out = Map::new();
            out.insert("server".into(), json!(server));
            for (key, value) in fields {
                if key != "_meta" && key != "icons" {
                    out.insert(key, value);
                }
            }
            if !out.contains_key("name") {
                out.insert("name".into(), json!(uri));
            }
            Some(Value::Object(out))
        })
        .collect()
}

trait BlockOnSafe {
    /// Run `future` on this runtime and wait for it, from any thread: inside a runtime, the wait happens on a
    /// thread of its own (a runtime may not block its own workers); `None` when the runtime has shut down.
    fn block_on_safe<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static)
    -> Option<T>;
}

impl BlockOnSafe for tokio::runtime::Handle {
    fn block_on_safe<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let task = self.spawn(future);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let waiter = self.clone();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let _ = tx.send(waiter.block_on(task).ok());
            });
        });
        rx.recv().ok().flatten()
    }
}
