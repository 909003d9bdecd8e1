//! The guest side of a wasm plugin: private wit-bindgen bindings of `wit/plugin.wit` and the [`Ctx`] a tool
//! gets inside the sandbox (files through WASI, processes through the `process` import). Compiled only for wasm;
//! plugin authors use [`export_tool!`](crate::export_tool) and never name anything here.

#![allow(missing_docs, unsafe_code)] // Generated bindings: documented in the WIT, unsafe by nature.

use std::io::{self, Read, Write};
use std::time::Duration;

use crate::{
    Access, CallOutcome, Capability, CapabilityRequest, Command, Content, Ctx, ExitStatus, FileKind, Files,
    LogLevel, Metadata, PluginMetadata, Process, ProcessEvent, TempFile, Tool, ToolResult, ToolSpec, Usage,
};

#[doc(hidden)]
pub mod tool_world {
    wit_bindgen::generate!({
        world: "tool-plugin",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_tool_world",
        default_bindings_module: "::toolwright_sdk::guest::tool_world",
        // The world includes WASI: bindings for it are generated too (Rust's std uses it through wasi-libc; the
        // unused ones cost nothing in the component).
        generate_all,
    });
}

#[doc(hidden)]
pub mod handler_world {
    wit_bindgen::generate!({
        world: "handler-plugin",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_handler_world",
        default_bindings_module: "::toolwright_sdk::guest::handler_world",
        with: {
            "toolwright:plugin/types@0.2.0": crate::guest::tool_world::toolwright::plugin::types,
            "toolwright:plugin/host@0.2.0": crate::guest::tool_world::toolwright::plugin::host,
        },
        generate_all,
    });
}

#[doc(hidden)]
pub mod offers_world {
    wit_bindgen::generate!({
        world: "offers-plugin",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_offers_world",
        default_bindings_module: "::toolwright_sdk::guest::offers_world",
        with: {
            "toolwright:plugin/types@0.2.0": crate::guest::tool_world::toolwright::plugin::types,
            "toolwright:plugin/host@0.2.0": crate::guest::tool_world::toolwright::plugin::host,
        },
        generate_all,
    });
}

use handler_world::exports::toolwright::plugin::handler as handler_exports;
use offers_world::exports::toolwright::plugin::offers as offers_exports;
use tool_world::exports::toolwright::plugin::tool as exported;
use tool_world::toolwright::plugin::{host, process, types as wit};

/// What [`export_tool!`](crate::export_tool) generates: the plugin's metadata and tools.
#[doc(hidden)]
pub trait ToolPlugin {
    fn metadata() -> PluginMetadata;
    fn tools() -> &'static [Box<dyn Tool>];
}

/// The tool called `name`. The names are computed once per instance (a component exports one plugin, so one
/// `T`): a call must not rebuild every tool's spec, JSON schemas included, to find its tool.
fn find<T: ToolPlugin>(name: &str) -> Result<&'static dyn Tool, String> {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| T::tools().iter().map(|t| t.spec().name).collect());
    let index = names
        .iter()
        .position(|n| n == name)
        .ok_or_else(|| format!("Tool {name} not found"))?;
    Ok(T::tools()[index].as_ref())
}

/// Make `cwd` the working directory of the guest, so that relative paths given to `std::fs` resolve against
/// the workspace, as they do natively (outside the plugin's grants they reach nothing, as before).
///
/// wasi-libc's `chdir` checks that the directory exists with two host calls that each open it and stat it
/// (`stat-at`, then `metadata-hash-at` for the inode number), about 4 µs a call. The host names a directory it
/// knows, so a call whose instance is already there (a reused instance) changes nothing, and a fresh instance,
/// still at `/` where wasi-libc starts, gets the path set directly in wasi-libc's own cwd (a string from
/// `malloc`, which `chdir` may later `free`); any other case goes through `chdir`.
fn enter(cwd: &str) {
    let here = std::env::current_dir().ok();
    let here = here.as_ref().and_then(|p| p.to_str());
    if here == Some(cwd) {
        return;
    }
    if here == Some("/") && cwd.starts_with('/') && set_cwd_unchecked(cwd) {
        return;
    }
    let _ = std::env::set_current_dir(cwd);
}

/// Point wasi-libc's working directory at `cwd` without asking the host about it; false when `cwd` cannot be
/// a C string or there is no memory for it.
#[cfg(all(target_os = "wasi", target_env = "p2"))]
fn set_cwd_unchecked(cwd: &str) -> bool {
    unsafe extern "C" {
        /// wasi-libc's working directory (`getcwd.c`), an absolute path; `chdir` replaces it.
        static mut __wasilibc_cwd: *mut core::ffi::c_char;
        fn malloc(size: usize) -> *mut core::ffi::c_void;
    }
    if cwd.as_bytes().contains(&0) {
        return false;
    }
    // SAFETY: the module runs on one thread; the string is copied, NUL-terminated, into memory from wasi-libc's
    // own `malloc`, so a later `chdir` may free it (it frees the current string only when it allocated the one
    // before; the one replaced here is left, a few bytes at most once per instance, when it leaves `/`).
    unsafe {
        let bytes = malloc(cwd.len() + 1).cast::<u8>();
        if bytes.is_null() {
            return false;
        }
        std::ptr::copy_nonoverlapping(cwd.as_ptr(), bytes, cwd.len());
        *bytes.add(cwd.len()) = 0;
        __wasilibc_cwd = bytes.cast();
    }
    true
}

#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
fn set_cwd_unchecked(_cwd: &str) -> bool {
    false
}

fn parse(json: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(json).map_err(|e| format!("invalid JSON from the host: {e}"))
}

impl<T: ToolPlugin> exported::Guest for T {
    fn metadata() -> wit::PluginMetadata {
        metadata_to_wit(T::metadata())
    }

    fn list_tools() -> Vec<wit::ToolSpec> {
        T::tools()
            .iter()
            .map(|t| spec_to_wit(crate::declaration(t.as_ref())))
            .collect()
    }

    fn prepare_arguments(tool: String, arguments: String) -> Result<Option<String>, String> {
        let args = parse(&arguments)?;
        let Some(shim) = find::<T>(&tool)?.arguments_shim() else {
            return Ok(None);
        };
        let prepared = shim
            .prepare_arguments(&args)
            .map_err(|e| e.message().to_owned())?;
        Ok(prepared.map(|v| v.to_string()))
    }

    fn mutated_path(tool: String, arguments: String) -> Option<String> {
        let args = parse(&arguments).ok()?;
        find::<T>(&tool).ok()?.file_mutations()?.mutated_path(&args)
    }

    fn execute(tool: String, call_id: String, arguments: String) -> Result<wit::ToolResult, String> {
        let args = parse(&arguments)?;
        let ctx = GuestCtx::new();
        enter(&ctx.cwd);
        let result = find::<T>(&tool)?
            .execute(&call_id, args, &ctx)
            .map_err(|e| e.message().to_owned())?;
        Ok(result_to_wit(result))
    }

    fn prepare_loadout(tool: String, loadout: wit::Loadout) -> Result<Option<wit::LoadoutChanges>, String> {
        let list = |tools: Vec<wit::ToolInfo>| tools.into_iter().map(tool_info_from_wit).collect();
        let loadout = crate::Loadout {
            declared: list(loadout.declared),
            callable: list(loadout.callable),
            registered: list(loadout.registered),
        };
        let Some(hook) = find::<T>(&tool)?.loadout_hook() else {
            return Ok(None);
        };
        let changes = hook
            .prepare_loadout(&loadout)
            .map_err(|e| e.message().to_owned())?;
        Ok(changes.map(|c| wit::LoadoutChanges {
            descriptions: c.descriptions.into_iter().collect(),
            hidden_declarations: c.hidden_declarations,
        }))
    }

    fn render_call(tool: String, arguments: String) -> Option<String> {
        let args = parse(&arguments).ok()?;
        find::<T>(&tool).ok()?.render_call(&args)
    }

    fn render_result(tool: String, result: wit::ToolResult, expanded: bool, partial: bool) -> Option<String> {
        find::<T>(&tool)
            .ok()?
            .render_result(&result_from_wit(result), expanded, partial)
    }
}

/// What [`export_handler!`](crate::export_handler) generates: the plugin's metadata and handler.
#[doc(hidden)]
pub trait HandlerPlugin {
    fn metadata() -> PluginMetadata;
    fn handler() -> &'static dyn crate::Handler;
}

impl<T: HandlerPlugin> handler_exports::Guest for T {
    fn metadata() -> wit::PluginMetadata {
        metadata_to_wit(T::handler().metadata().unwrap_or_else(T::metadata))
    }

    fn tool_call(event: handler_exports::ToolCallEvent) -> Result<handler_exports::ToolCallDecision, String> {
        let input =
            serde_json::from_str(&event.input).map_err(|e| format!("invalid JSON from the host: {e}"))?;
        let event = crate::ToolCallEvent {
            tool_name: event.tool_name,
            tool_call_id: event.tool_call_id,
            parent_tool_call_id: event.parent_tool_call_id,
            input,
        };
        let decision = T::handler()
            .tool_call(&event)
            .map_err(|e| e.message().to_owned())?;
        Ok(match decision {
            crate::ToolCallDecision::Allow => handler_exports::ToolCallDecision::Allow,
            crate::ToolCallDecision::Block { reason, terminate } => {
                handler_exports::ToolCallDecision::Block(handler_exports::Block { reason, terminate })
            }
            crate::ToolCallDecision::Rewrite(args) => {
                handler_exports::ToolCallDecision::Rewrite(args.to_string())
            }
        })
    }

    fn tool_result(
        event: handler_exports::ToolResultEvent,
    ) -> Result<Option<handler_exports::ToolResultChanges>, String> {
        let parse = |t: &str| serde_json::from_str::<serde_json::Value>(t).ok();
        let event = crate::ToolResultEvent {
            tool_name: event.tool_name,
            tool_call_id: event.tool_call_id,
            parent_tool_call_id: event.parent_tool_call_id,
            input: parse(&event.input).unwrap_or_default(),
            content: event.content.into_iter().map(content_from_wit).collect(),
            details: event.details.as_deref().and_then(parse),
            structured_content: event.structured_content.as_deref().and_then(parse),
            is_error: event.is_error,
            usage: event.usage.map(usage_from_wit),
        };
        let Some(changes) = T::handler()
            .tool_result(&event)
            .map_err(|e| e.message().to_owned())?
        else {
            return Ok(None);
        };
        Ok(Some(handler_exports::ToolResultChanges {
            content: changes
                .content
                .map(|c| c.into_iter().map(content_to_wit).collect()),
            details: changes.details.map(|v| v.to_string()),
            structured_content: changes.structured_content.map(|v| v.to_string()),
            is_error: changes.is_error,
            usage: changes.usage.map(usage_to_wit),
        }))
    }
}

fn content_from_wit(c: wit::Content) -> Content {
    match c {
        wit::Content::Text(text) => Content::Text { text },
        wit::Content::Image(i) => Content::Image {
            data: i.data,
            mime_type: i.mime_type,
        },
        wit::Content::Audio(a) => Content::Audio {
            data: a.data,
            mime_type: a.mime_type,
        },
        wit::Content::Resource(r) => Content::Resource {
            resource: crate::EmbeddedResource {
                uri: r.uri,
                mime_type: r.mime_type,
                body: match r.body {
                    wit::ResourceBody::Text(text) => crate::ResourceBody::Text { text },
                    wit::ResourceBody::Blob(blob) => crate::ResourceBody::Blob { blob },
                },
            },
        },
    }
}

fn content_to_wit(c: Content) -> wit::Content {
    match c {
        Content::Text { text } => wit::Content::Text(text),
        Content::Image { data, mime_type } => wit::Content::Image(wit::Image { data, mime_type }),
        Content::Audio { data, mime_type } => wit::Content::Audio(wit::Audio { data, mime_type }),
        Content::Resource { resource } => wit::Content::Resource(wit::EmbeddedResource {
            uri: resource.uri,
            mime_type: resource.mime_type,
            body: match resource.body {
                crate::ResourceBody::Text { text } => wit::ResourceBody::Text(text),
                crate::ResourceBody::Blob { blob } => wit::ResourceBody::Blob(blob),
            },
        }),
    }
}

fn usage_from_wit(u: wit::Usage) -> Usage {
    Usage {
        input: u.input,
        output: u.output,
        cache_read: u.cache_read,
        cache_write: u.cache_write,
        cache_write_1h: u.cache_write_1h,
        reasoning: u.reasoning,
        total_tokens: u.total_tokens,
        cost: crate::Cost {
            input: u.cost.input,
            output: u.cost.output,
            cache_read: u.cost.cache_read,
            cache_write: u.cost.cache_write,
            total: u.cost.total,
            total_from_provider: u.cost.total_from_provider,
        },
    }
}

fn metadata_to_wit(m: PluginMetadata) -> wit::PluginMetadata {
    wit::PluginMetadata {
        name: m.name,
        version: m.version,
        description: m.description,
        capabilities: m.capabilities.into_iter().map(capability_to_wit).collect(),
    }
}

fn capability_to_wit(c: CapabilityRequest) -> wit::CapabilityRequest {
    let capability = match c.capability {
        Capability::Read(p) => wit::Capability::Read(p),
        Capability::Write(p) => wit::Capability::Write(p),
        Capability::Spawn(p) => wit::Capability::Spawn(p),
        Capability::Env(v) => wit::Capability::Env(v),
        Capability::Network(h) => wit::Capability::Network(h),
    };
    wit::CapabilityRequest {
        capability,
        reason: c.reason,
    }
}

fn spec_to_wit(s: ToolSpec) -> wit::ToolSpec {
    wit::ToolSpec {
        name: s.name,
        label: s.label,
        description: s.description,
        parameters: s.parameters.to_string(),
        output_schema: s.output_schema.map(|v| v.to_string()),
        prompt_snippet: s.prompt_snippet,
        prompt_guidelines: s.prompt_guidelines,
        constrained_sampling: s.constrained_sampling.map(|v| v.to_string()),
        execution_mode: s.execution_mode.map(|m| match m {
            crate::ExecutionMode::Parallel => wit::ExecutionMode::Parallel,
            crate::ExecutionMode::Sequential => wit::ExecutionMode::Sequential,
        }),
        exposure: match s.exposure {
            crate::Exposure::Direct => wit::Exposure::Direct,
            crate::Exposure::ModelOnly => wit::Exposure::ModelOnly,
            crate::Exposure::Codemode => wit::Exposure::Codemode,
            crate::Exposure::Deferred => wit::Exposure::Deferred,
            crate::Exposure::Hidden => wit::Exposure::Hidden,
        },
        annotations: s.annotations.map(|a| wit::Annotations {
            read_only: a.read_only_hint,
            destructive: a.destructive_hint,
            idempotent: a.idempotent_hint,
            open_world: a.open_world_hint,
        }),
        namespace: s.namespace.map(|n| wit::ToolNamespace {
            name: n.name,
            aliases: n.aliases,
            description: n.description,
            instructions: n.instructions,
        }),
        default_active: s.default_active,
        renders_own_frame: s.renders_own_frame,
        prepares_arguments: s.prepares_arguments,
        mutates_files: s.mutates_files,
        prepares_loadout: s.prepares_loadout,
        long_running: s.long_running,
    }
}

fn tool_info_from_wit(t: wit::ToolInfo) -> crate::LoadoutTool {
    // The host wrote the schemas from JSON values.
    let json = |text: Option<String>| text.and_then(|t| serde_json::from_str(&t).ok());
    crate::LoadoutTool {
        name: t.name,
        description: t.description,
        exposure: match t.exposure {
            wit::Exposure::Direct => crate::Exposure::Direct,
            wit::Exposure::ModelOnly => crate::Exposure::ModelOnly,
            wit::Exposure::Codemode => crate::Exposure::Codemode,
            wit::Exposure::Deferred => crate::Exposure::Deferred,
            wit::Exposure::Hidden => crate::Exposure::Hidden,
        },
        namespace: t.namespace.map(|n| crate::ToolNamespace {
            name: n.name,
            aliases: n.aliases,
            description: n.description,
            instructions: n.instructions,
        }),
        prompt_guidelines: t.prompt_guidelines,
        parameters: json(t.parameters),
        output_schema: json(t.output_schema),
    }
}

fn usage_to_wit(u: Usage) -> wit::Usage {
    wit::Usage {
        input: u.input,
        output: u.output,
        cache_read: u.cache_read,
        cache_write: u.cache_write,
        cache_write_1h: u.cache_write_1h,
        reasoning: u.reasoning,
        total_tokens: u.total_tokens,
        cost: wit::Cost {
            input: u.cost.input,
            output: u.cost.output,
            cache_read: u.cost.cache_read,
            cache_write: u.cost.cache_write,
            total: u.cost.total,
            total_from_provider: u.cost.total_from_provider,
        },
    }
}

fn result_to_wit(r: ToolResult) -> wit::ToolResult {
    wit::ToolResult {
        content: r.content.into_iter().map(content_to_wit).collect(),
        details: r.details.map(|v| v.to_string()),
        structured_content: r.structured_content.map(|v| v.to_string()),
        usage: r.usage.map(usage_to_wit),
        is_error: r.is_error,
        terminate: r.terminate,
    }
}

/// Send a partial result of the running call, as [`Ctx::update`] does, from code that has no `Ctx` at hand (a
/// script engine's native callbacks).
pub fn send_update(partial: ToolResult) {
    host::update(&result_to_wit(partial));
}

/// Start a nested call without waiting for it (`host.start-call`): the number names it in [`next_outcomes`].
pub fn start_call(name: &str, arguments: &serde_json::Value) -> u64 {
    host::start_call(name, &arguments.to_string())
}

/// Take every started call that finished (`host.next-outcomes`), with `wait` first waiting until one has;
/// empty when none runs.
pub fn next_outcomes(wait: bool) -> Vec<(u64, CallOutcome)> {
    host::next_outcomes(wait)
        .into_iter()
        .map(|(n, outcome)| (n, outcome_from_wit(outcome)))
        .collect()
}

/// The callable tools ranked for `query` by `tool_search`'s ranker, best first (`host.search-tools`).
pub fn search_tools(query: &str, among: Option<&[String]>, limit: u32) -> Vec<String> {
    host::search_tools(query, among, limit)
}

/// The [`Ctx`] inside the sandbox.
struct GuestCtx {
    cwd: String,
}

impl GuestCtx {
    fn new() -> Self {
        GuestCtx { cwd: host::cwd() }
    }
}

impl Ctx for GuestCtx {
    fn cwd(&self) -> &str {
        &self.cwd
    }

    fn home(&self) -> Option<String> {
        host::home()
    }

    fn is_cancelled(&self) -> bool {
        host::is_cancelled()
    }

    fn update(&self, partial: ToolResult) {
        host::update(&result_to_wit(partial));
    }

    fn log(&self, level: LogLevel, message: &str) {
        let level = match level {
            LogLevel::Debug => wit::LogLevel::Debug,
            LogLevel::Info => wit::LogLevel::Info,
            LogLevel::Warn => wit::LogLevel::Warn,
            LogLevel::Error => wit::LogLevel::Error,
        };
        host::log(level, message);
    }

    fn files(&self) -> &dyn Files {
        &WasiFiles
    }

    fn spawn(&self, command: &Command) -> io::Result<Box<dyn Process>> {
        let command = process::Command {
            program: command.program.clone(),
            args: command.args.clone(),
            cwd: command.cwd.clone(),
            env: command.env.clone(),
        };
        match process::spawn(&command) {
            Ok(child) => Ok(Box::new(GuestProcess { child })),
            Err(message) => Err(io::Error::new(io::ErrorKind::PermissionDenied, message)),
        }
    }

    fn temp_file(&self, prefix: &str, suffix: &str) -> io::Result<TempFile> {
        let dir = host::temp_dir().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                "this plugin has no temp directory",
            )
        })?;
        let mut random = [0u8; 8];
        // WASI's random source, through the standard library's hash keys.
        let bits = {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u8(0);
            h.finish()
        };
        random.copy_from_slice(&bits.to_le_bytes());
        let path = format!("{dir}/{prefix}-{:016x}{suffix}", u64::from_le_bytes(random));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(TempFile {
            path,
            writer: Box::new(file),
        })
    }

    fn env(&self) -> Vec<(String, String)> {
        std::env::vars().collect()
    }

    fn call_tool(&self, name: &str, arguments: &serde_json::Value) -> CallOutcome {
        outcome_from_wit(host::call_tool(name, &arguments.to_string()))
    }

    fn call_tools(&self, calls: &[(String, serde_json::Value)]) -> Vec<CallOutcome> {
        let calls: Vec<(String, String)> = calls.iter().map(|(n, a)| (n.clone(), a.to_string())).collect();
        host::call_tools(&calls)
            .into_iter()
            .map(outcome_from_wit)
            .collect()
    }

    fn tools(&self) -> Vec<crate::LoadoutTool> {
        host::callable_tools()
            .into_iter()
            .map(tool_info_from_wit)
            .collect()
    }

    fn client_answers(&self) -> Vec<String> {
        host::client_answers()
    }

    fn ask(&self, questions: &[crate::InputRequest]) -> Result<Vec<serde_json::Value>, String> {
        ask_host(questions)
    }
}

/// Put `questions` to the client through the host (`host.ask`).
fn ask_host(questions: &[crate::InputRequest]) -> Result<Vec<serde_json::Value>, String> {
    let requests: Vec<wit::InputRequest> = questions
        .iter()
        .map(|q| wit::InputRequest {
            key: q.key.clone(),
            method: q.method.clone(),
            params: q.params.to_string(),
        })
        .collect();
    let answers = host::ask(&requests)?;
    // The host wrote them from JSON values.
    Ok(answers
        .into_iter()
        .map(|text| serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)))
        .collect())
}

/// The client that asked for a prompt or read a resource, inside the sandbox.
struct GuestOfferClient;

impl crate::OfferClient for GuestOfferClient {
    fn ask(&self, questions: &[crate::InputRequest]) -> Result<Vec<serde_json::Value>, String> {
        ask_host(questions)
    }

    fn answers(&self) -> Vec<String> {
        host::client_answers()
    }
}

fn result_from_wit(r: wit::ToolResult) -> ToolResult {
    // The host wrote these from JSON values; a string that does not parse stays a string.
    let json = |text: String| serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    ToolResult {
        content: r.content.into_iter().map(content_from_wit).collect(),
        details: r.details.map(json),
        structured_content: r.structured_content.map(json),
        usage: r.usage.map(usage_from_wit),
        is_error: r.is_error,
        terminate: r.terminate,
    }
}

fn outcome_from_wit(o: wit::CallOutcome) -> CallOutcome {
    CallOutcome {
        result: result_from_wit(o.result),
        is_error: o.is_error,
        duration_ms: o.duration_ms,
    }
}

/// Files through WASI: the preopened directories of the plugin's grants are all it can reach.
struct WasiFiles;

fn kind_of(t: std::fs::FileType) -> FileKind {
    if t.is_dir() {
        FileKind::Dir
    } else if t.is_file() {
        FileKind::File
    } else if t.is_symlink() {
        FileKind::Symlink
    } else {
        FileKind::Other
    }
}

/// What a failed file operation on `path` means: outside the plugin's grants a path does not exist in its
/// filesystem (WASI answers "no such file", or "not permitted" for a write below a read-only grant), so ask the
/// host whether the grants cover it and, when they do not, report the refusal the native built-ins give.
fn explain<T>(path: &str, access: Access, outcome: io::Result<T>) -> io::Result<T> {
    outcome.map_err(|error| {
        let refusable = matches!(
            error.kind(),
            io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
        );
        match refusable.then(|| refusal(path, access)).flatten() {
            Some(text) => io::Error::new(io::ErrorKind::PermissionDenied, text),
            None => error,
        }
    })
}

/// The host's refusal of `access` to `path`, none when a grant covers it.
fn refusal(path: &str, access: Access) -> Option<String> {
    host::refusal(path, access == Access::Write)
}

/// As natively (`GrantedFiles`): a pipe, socket or device is refused before it is opened, since WASI's `open-at`
/// has no `O_NONBLOCK` and an open FIFO would hold the host thread that serves it. (A FIFO swapped in between
/// this look and the open still blocks that thread; the plugin's deadline ends the call, not the thread.)
fn refuse_special(path: &str, access: Access) -> io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => Err(crate::not_a_regular_file(path, access)),
        _ => Ok(()),
    }
}

impl Files for WasiFiles {
    fn read(&self, path: &str) -> io::Result<Vec<u8>> {
        let read = || {
            refuse_special(path, Access::Read)?;
            std::fs::read(path)
        };
        explain(path, Access::Read, read())
    }

    fn read_prefix(&self, path: &str, max: usize) -> io::Result<Vec<u8>> {
        let read = || {
            refuse_special(path, Access::Read)?;
            let mut buf = Vec::new();
            std::fs::File::open(path)?
                .take(max as u64)
                .read_to_end(&mut buf)?;
            Ok(buf)
        };
        explain(path, Access::Read, read())
    }

    fn write(&self, path: &str, bytes: &[u8]) -> io::Result<()> {
        let write = || {
            refuse_special(path, Access::Write)?;
            std::fs::File::create(path)?.write_all(bytes)
        };
        explain(path, Access::Write, write())
    }

    fn create_dir_all(&self, path: &str) -> io::Result<()> {
        explain(path, Access::Write, std::fs::create_dir_all(path))
    }

    fn metadata(&self, path: &str) -> io::Result<Metadata> {
        let m = explain(path, Access::Read, std::fs::metadata(path))?;
        Ok(Metadata {
            kind: kind_of(m.file_type()),
            len: m.len(),
        })
    }

    fn symlink_metadata(&self, path: &str) -> io::Result<Metadata> {
        let m = explain(path, Access::Read, std::fs::symlink_metadata(path))?;
        Ok(Metadata {
            kind: kind_of(m.file_type()),
            len: m.len(),
        })
    }

    fn read_dir(&self, path: &str) -> io::Result<Vec<String>> {
        let list = || {
            std::fs::read_dir(path)?
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect()
        };
        explain(path, Access::Read, list())
    }

    fn check(&self, path: &str, access: Access) -> io::Result<String> {
        // As natively: a path outside the grants is refused before anything is tried.
        let path = crate::paths::normalize(path);
        match refusal(&path, access) {
            Some(text) => Err(io::Error::new(io::ErrorKind::PermissionDenied, text)),
            None => Ok(path),
        }
    }
}

/// A process started through the `process` import.
struct GuestProcess {
    child: process::Child,
}

impl Process for GuestProcess {
    fn next(&mut self, timeout: Duration) -> io::Result<ProcessEvent> {
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        match self.child.next(ms) {
            Ok(process::ProcessEvent::Output(bytes)) => Ok(ProcessEvent::Output(bytes)),
            Ok(process::ProcessEvent::Exited(s)) => Ok(ProcessEvent::Exited(ExitStatus {
                code: s.code,
                signal: s.signal,
            })),
            Ok(process::ProcessEvent::Idle) => Ok(ProcessEvent::Idle),
            Err(message) => Err(io::Error::other(message)),
        }
    }

    fn kill(&mut self) {
        self.child.kill();
    }
}

/// What [`export_offers!`](crate::export_offers) generates: the plugin's resources and prompts.
#[doc(hidden)]
pub trait OffersPlugin {
    fn offers() -> &'static dyn crate::Offers;
}

fn resource_to_wit(r: crate::Resource) -> offers_exports::ResourceInfo {
    offers_exports::ResourceInfo {
        uri: r.uri,
        name: r.name,
        title: r.title,
        description: r.description,
        mime_type: r.mime_type,
        size: r.size,
    }
}

fn offer_error_to_wit(e: crate::OfferError) -> offers_exports::OfferError {
    match e {
        crate::OfferError::NotFound => offers_exports::OfferError::NotFound,
        crate::OfferError::Failed(message) => offers_exports::OfferError::Failed(message),
    }
}

impl<T: OffersPlugin> offers_exports::Guest for T {
    fn list_resources() -> Vec<offers_exports::ResourceInfo> {
        T::offers().resources().into_iter().map(resource_to_wit).collect()
    }

    fn list_resource_templates() -> Vec<offers_exports::ResourceInfo> {
        T::offers()
            .resource_templates()
            .into_iter()
            .map(resource_to_wit)
            .collect()
    }

    fn read_resource(
        uri: String,
    ) -> Result<Vec<offers_exports::ResourceContents>, offers_exports::OfferError> {
        let parts = T::offers()
            .read_asking(&uri, &GuestOfferClient)
            .map_err(offer_error_to_wit)?;
        Ok(parts
            .into_iter()
            .map(|p| offers_exports::ResourceContents {
                uri: p.uri,
                mime_type: p.mime_type,
                contents: match p.contents {
                    crate::Contents::Text(text) => offers_exports::Contents::Text(text),
                    crate::Contents::Blob(bytes) => offers_exports::Contents::Blob(bytes),
                },
            })
            .collect())
    }

    fn list_prompts() -> Vec<offers_exports::Prompt> {
        T::offers()
            .prompts()
            .into_iter()
            .map(|p| offers_exports::Prompt {
                name: p.name,
                title: p.title,
                description: p.description,
                arguments: p
                    .arguments
                    .into_iter()
                    .map(|a| offers_exports::PromptArgument {
                        name: a.name,
                        description: a.description,
                        required: a.required,
                    })
                    .collect(),
            })
            .collect()
    }

    fn get_prompt(
        name: String,
        arguments: Vec<(String, String)>,
    ) -> Result<offers_exports::PromptResult, offers_exports::OfferError> {
        let filled = T::offers()
            .prompt_asking(&name, &arguments, &GuestOfferClient)
            .map_err(offer_error_to_wit)?;
        Ok(offers_exports::PromptResult {
            description: filled.description,
            messages: filled
                .messages
                .into_iter()
                .map(|m| offers_exports::PromptMessage {
                    role: m.role,
                    content: m.content.to_string(),
                })
                .collect(),
        })
    }

    fn complete(
        kind: offers_exports::CompletionKind,
        name: String,
        argument: String,
        value: String,
    ) -> Vec<String> {
        let completing = match kind {
            offers_exports::CompletionKind::Prompt => crate::Completing::Prompt,
            offers_exports::CompletionKind::ResourceTemplate => crate::Completing::ResourceTemplate,
        };
        T::offers().complete(completing, &name, &argument, &value)
    }
}
