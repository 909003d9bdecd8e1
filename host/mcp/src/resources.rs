//! Resources and prompts (`resources/list`, `resources/templates/list`, `resources/read`, `prompts/list`,
//! `prompts/get`, `completion/complete`): the workspace's files ([`Workspace`], the server side of pi's
//! `read_mcp_resource`) and what plugins offer ([`Offerings`]), served together by [`Served`].
//!
//! A workspace resource is a file, named by its `file://` URL. The list holds the files the `ignore` crate walks
//! (`.gitignore`d and hidden ones left out, as the `find` and `grep` built-ins leave them), sorted by path,
//! [`PAGE`] at a time, at most [`MAX_LISTED`] in all, the later pages of a listing cut from its first page's walk
//! ([`WALK_KEPT`]); the template `file://{+path}` reaches any other file of the
//! workspace. Reading goes through the grants of the `read` built-in (the `[builtins]` section of the policy, or
//! its defaults) cut to the workspace, opened with cap-std (`toolwright::toolset::builtin_read_files`): what
//! `read` may not read, no client reads as a resource either, and files outside the workspace are not resources,
//! whatever `read` may read, not even through a symlink the workspace holds.
//!
//! A `file:` URI is always the workspace's; any other goes to the plugins, in load order. Errors follow
//! SEP-2164: a URI that names no resource (another scheme nobody offers, a file outside the workspace or missing,
//! a directory) is `-32602` "Resource not found: URI (why)" with the URI in `data`; a refused or too large file
//! is `-32602` with the reason; a plugin that failed is `-32603`. Results for 2026-07-28 clients carry
//! `ttlMs: 0` (files change under the server) and `cacheScope: "private"`.

use std::sync::Arc;

use base64::Engine as _;
use rmcp::ErrorData;
use serde_json::{Value, json};
use toolwright_sdk::{Access, Files, paths};

/// Resources and prompts offered besides the workspace's files: the plugins' (`toolwright::toolset::Offerings`
/// implements it over the plugins that export `offers`). Every method blocks (each runs plugins); the server
/// calls them off its async threads. Values are in MCP's shapes.
pub trait Offerings: Send + Sync {
    /// Every offered resource, in order; what a plugin failed to list is logged and left out.
    fn list_resources(&self) -> Vec<Value>;
    /// Every offered resource template, likewise.
    fn list_resource_templates(&self) -> Vec<Value>;
    /// The contents of the resource at `uri` from the first offerer that has it; `None` when none has.
    /// `client`: as for [`Offerings::get_prompt`], the client that wants it, for the offerer to ask.
    fn read_resource(&self, uri: &str, client: Option<&str>) -> Result<Option<Vec<Value>>, String>;
    /// Every offered prompt, the first of each name.
    fn list_prompts(&self) -> Vec<Value>;
    /// The prompt `name` (of the offerer that lists it first) filled in with `arguments`, refused before it is
    /// filled in when a required argument is missing ([`missing_argument`]); `None` when none offers it.
    /// `client`: the id under which the client that wants it is registered at the plugins' desk
    /// (`toolwright_core::client::ClientDesk`), for the offerer to ask; none: nobody to ask.
    fn get_prompt(
        &self,
        name: &str,
        arguments: &[(String, String)],
        client: Option<&str>,
    ) -> Result<Option<Value>, PromptError>;
    /// Completions of `value` for `argument` of the prompt (`prompt`) or resource template `name`.
    fn complete(&self, prompt: bool, name: &str, argument: &str, value: &str) -> Vec<String>;
}

/// Why a prompt was not filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptError {
    /// A required argument was not given: its name.
    Missing(String),
    /// Its offerer failed: why.
    Failed(String),
}

/// The first argument the listed prompt `declaration` requires that `given` lacks.
pub fn missing_argument(declaration: &Value, given: &[(String, String)]) -> Option<String> {
    declaration["arguments"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|argument| argument["required"] == true)
        .filter_map(|argument| argument["name"].as_str())
        .find(|required| !given.iter().any(|(key, _)| key == required))
        .map(str::to_owned)
}

/// What the server offers besides its tools: the workspace's files and the plugins' resources and prompts.
/// Every method blocks (the server calls them off its async threads) and answers in MCP's shapes.
#[derive(Clone, Default)]
pub struct Served {
    /// The workspace's files, when served.
    pub workspace: Option<Workspace>,
    /// The plugins' resources and prompts, when any plugin may offer some.
    pub offerings: Option<Arc<dyn Offerings>>,
}

impl Served {
    /// Whether there are resources to offer.
    pub fn has_resources(&self) -> bool {
        self.workspace.is_some() || self.offerings.is_some()
    }

    /// Whether there are prompts to offer.
    pub fn has_prompts(&self) -> bool {
        self.offerings.is_some()
    }

    /// One page of `resources/list`: the plugins' resources first (on the first page), then the workspace's
    /// files, a page at a time.
    pub fn list(&self, cursor: Option<&str>) -> Result<Value, ErrorData> {
        let mut listed = match &self.workspace {
            Some(workspace) => workspace.list(cursor)?,
            None if cursor.is_some() => {
                return Err(ErrorData::invalid_params(
                    format!("Invalid cursor: {cursor:?} (not one this server gave)"),
                    None,
                ));
            }
            None => json!({ "resources": [] }),
        };
        if cursor.is_none()
            && let Some(offerings) = &self.offerings
        {
            let mut all = offerings.list_resources();
            if let Some(files) = listed["resources"].as_array_mut() {
                all.append(files);
            }
            listed["resources"] = Value::Array(all);
        }
        Ok(listed)
    }

    /// `resources/templates/list`: the plugins' templates, then the workspace's.
    pub fn templates(&self) -> Value {
        let mut all = self
            .offerings
            .as_ref()
            .map(|o| o.list_resource_templates())
            .unwrap_or_default();
        if let Some(workspace) = &self.workspace {
            let theirs = workspace.templates();
            if let Some(templates) = theirs["resourceTemplates"].as_array() {
                all.extend(templates.iter().cloned());
            }
        }
        json!({ "resourceTemplates": all })
    }

    /// `resources/read` of `uri`: a `file:` URI is the workspace's, any other the plugins'. `client`: as for
    /// [`Offerings::get_prompt`], the client that wants it, for a plugin to ask.
    pub fn read(&self, uri: &str, client: Option<&str>) -> Result<Value, ErrorData> {
        let is_file = uri.get(..5).is_some_and(|s| s.eq_ignore_ascii_case("file:"));
        if is_file {
            return match &self.workspace {
                Some(workspace) => workspace.read(uri),
                None => Err(not_found(uri, "this server offers no files")),
            };
        }
        match self.offerings.as_ref().map(|o| o.read_resource(uri, client)) {
            Some(Ok(Some(contents))) => Ok(json!({ "contents": contents })),
            Some(Err(error)) => Err(ErrorData::internal_error(
                format!("Resource not read: {error}"),
                Some(json!({ "uri": uri })),
            )),
            Some(Ok(None)) | None => Err(not_found(uri, "no plugin offers it")),
        }
    }

    /// What a subscription to `uri` watches, or why there is nothing to watch: what `resources/read` would read
    /// now — a workspace file (watched), or a plugin's resource (plugins say nothing of changes: theirs are
    /// updated when the plugins are loaded again). Blocks (an open, or a plugin's read).
    pub fn watched(&self, uri: &str) -> Result<crate::subscriptions::Watched, ErrorData> {
        let is_file = uri.get(..5).is_some_and(|s| s.eq_ignore_ascii_case("file:"));
        if is_file {
            return match &self.workspace {
                Some(workspace) => workspace.watched(uri).map(crate::subscriptions::Watched::File),
                None => Err(not_found(uri, "this server offers no files")),
            };
        }
        // Nobody to ask: a resource that asks its reader cannot be watched.
        self.read(uri, None)
            .map(|_| crate::subscriptions::Watched::Plugins)
    }

    /// What a subscription to `uri` watches, `uri` having been found readable a moment ago (a listen stream's
    /// acknowledged filter): a file is checked again (it is one open), a plugin's resource is not read again.
    pub fn watched_again(&self, uri: &str) -> Result<crate::subscriptions::Watched, ErrorData> {
        let is_file = uri.get(..5).is_some_and(|s| s.eq_ignore_ascii_case("file:"));
        match &self.offerings {
            Some(_) if !is_file => Ok(crate::subscriptions::Watched::Plugins),
            _ => self.watched(uri),
        }
    }

    /// `prompts/list`.
    pub fn prompts(&self) -> Value {
        let prompts = self
            .offerings
            .as_ref()
            .map(|o| o.list_prompts())
            .unwrap_or_default();
        json!({ "prompts": prompts })
    }

    /// `prompts/get` of `name` with `arguments` (their values as text): a missing required argument is refused
    /// before any plugin runs. `client`: as [`Offerings::get_prompt`] says.
    pub fn prompt(
        &self,
        name: &str,
        arguments: Option<&serde_json::Map<String, Value>>,
        client: Option<&str>,
    ) -> Result<Value, ErrorData> {
        let not_found =
            || ErrorData::invalid_params(format!("Prompt not found: {name}"), Some(json!({ "name": name })));
        let offerings = self.offerings.as_ref().ok_or_else(not_found)?;
        let given: Vec<(String, String)> = arguments
            .into_iter()
            .flatten()
            .map(|(key, value)| {
                let text = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                (key.clone(), text)
            })
            .collect();
        match offerings.get_prompt(name, &given, client) {
            Ok(Some(filled)) => Ok(filled),
            Ok(None) => Err(not_found()),
            Err(PromptError::Missing(argument)) => Err(ErrorData::invalid_params(
                format!("Missing required argument {argument} of the prompt {name}"),
                Some(json!({ "name": name, "argument": argument })),
            )),
            Err(PromptError::Failed(error)) => Err(ErrorData::internal_error(
                format!("Prompt not filled in: {error}"),
                None,
            )),
        }
    }

    /// `completion/complete` for the prompt (`prompt`) or template `name`'s `argument` beginning with `value`:
    /// the workspace's template completes paths, the plugins the rest.
    pub fn complete(&self, prompt: bool, name: &str, argument: &str, value: &str) -> Value {
        let values: Vec<String> = match (&self.workspace, prompt) {
            (Some(workspace), false) if name == TEMPLATE && argument == "path" => workspace.complete(value),
            _ => self
                .offerings
                .as_ref()
                .map(|o| o.complete(prompt, name, argument, value))
                .unwrap_or_default(),
        };
        json!({ "completion": { "values": values, "total": values.len(), "hasMore": false } })
    }
}

/// Resources per page of `resources/list`.
pub const PAGE: usize = 500;

/// The files `resources/list` walks at most; the template reaches the others.
pub const MAX_LISTED: usize = 10_000;

/// The largest file read as a resource (the `read` tool reads larger ones in parts).
pub const MAX_READ_BYTES: usize = 8 << 20;

/// The template of a workspace file's URI (RFC 6570: `{+path}` keeps the path's slashes).
pub const TEMPLATE: &str = "file://{+path}";

/// How long a walk of the workspace serves the later pages of its listing (those with a cursor) and completions:
/// a first page walks again.
pub const WALK_KEPT: std::time::Duration = std::time::Duration::from_secs(10);

/// The latest walk of a workspace: when, and the files it found, sorted.
type Walked = Option<(std::time::Instant, Arc<Vec<String>>)>;

/// The workspace's files, read through the `read` built-in's grants.
#[derive(Clone)]
pub struct Workspace {
    /// The workspace directory, absolute and normalised.
    root: String,
    /// The `read` built-in's files.
    files: Arc<dyn Files + Send + Sync>,
    /// The latest walk, and how long it serves ([`WALK_KEPT`]).
    walked: Arc<std::sync::Mutex<Walked>>,
    walk_kept: std::time::Duration,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Workspace {
    /// The workspace `root` (absolute), its files read through `files` (the `read` built-in's grants).
    pub fn new(root: &std::path::Path, files: Arc<dyn Files + Send + Sync>) -> Self {
        Workspace {
            root: paths::normalize(&root.to_string_lossy()),
            files,
            walked: Arc::default(),
            walk_kept: WALK_KEPT,
        }
    }

    /// The workspace directory.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// One page of `resources/list` (as JSON): the files after `cursor` (a path the previous page ended with).
    pub fn list(&self, cursor: Option<&str>) -> Result<Value, ErrorData> {
        let after = match cursor {
            None => None,
            Some(cursor) => Some(decode_cursor(cursor).ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("Invalid cursor: {cursor:?} (not one this server gave)"),
                    None,
                )
            })?),
        };
        // A first page walks; the pages after it are cut from that walk while it is fresh.
        let listed = self.walked(after.is_none());
        let start = after.map_or(0, |after| listed.partition_point(|path| *path <= after));
        let page: Vec<&String> = listed.iter().skip(start).take(PAGE).collect();
        let resources: Vec<Value> = page.iter().filter_map(|path| self.resource(path)).collect();
        let mut result = json!({ "resources": resources });
        if start + page.len() < listed.len()
            && let Some(last) = page.last()
        {
            result["nextCursor"] = json!(encode_cursor(last));
        }
        Ok(result)
    }

    /// The workspace's files, sorted: the latest walk while it is younger than [`WALK_KEPT`] (unless `fresh`),
    /// else a new one.
    fn walked(&self, fresh: bool) -> Arc<Vec<String>> {
        let mut walked = self
            .walked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !fresh
            && let Some((at, files)) = &*walked
            && at.elapsed() < self.walk_kept
        {
            return files.clone();
        }
        let mut files = self.walk();
        files.sort();
        let files = Arc::new(files);
        *walked = Some((std::time::Instant::now(), files.clone()));
        files
    }

    /// The paths of the workspace's files (absolute), walked as `find` walks, at most [`MAX_LISTED`], those the
    /// grants refuse left out.
    fn walk(&self) -> Vec<String> {
        let mut found = Vec::new();
        let walker = ignore::WalkBuilder::new(&self.root)
            .follow_links(false)
            .require_git(false)
            .build();
        for entry in walker.flatten() {
            if found.len() >= MAX_LISTED {
                break;
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = paths::normalize(&entry.path().to_string_lossy());
            if self.files.check(&path, Access::Read).is_ok() {
                found.push(path);
            }
        }
        found
    }

    /// The listing of the file `path`: URI, name (relative to the workspace), MIME type, size.
    fn resource(&self, path: &str) -> Option<Value> {
        let uri = url::Url::from_file_path(path).ok()?;
        let name = relative(&self.root, path)?;
        let mut resource = json!({
            "uri": uri.as_str(),
            "name": name,
            "description": format!("{name} in the workspace"),
        });
        if let Some(mime) = mime_type(path) {
            resource["mimeType"] = json!(mime);
        }
        if let Ok(metadata) = self.files.metadata(path) {
            resource["size"] = json!(metadata.len);
        }
        Some(resource)
    }

    /// `resources/templates/list` (as JSON): one template, a workspace file by its absolute path.
    pub fn templates(&self) -> Value {
        json!({
            "resourceTemplates": [{
                "uriTemplate": TEMPLATE,
                "name": "workspace-file",
                "title": "A file of the workspace",
                "description": format!(
                    "A file below {} by its absolute path (file:///path/to/file), read as the read tool may",
                    self.root
                ),
            }]
        })
    }

    /// Completions of the template's `path`: the listed files whose path begins with `value`, at most 100.
    pub fn complete(&self, value: &str) -> Vec<String> {
        // Completions come while the user types: the latest walk (at most WALK_KEPT old) serves them.
        self.walked(false)
            .iter()
            .filter(|p| p.starts_with(value))
            .take(100)
            .cloned()
            .collect()
    }

    /// `resources/read` of `uri` (as JSON): the file's text, or its bytes in base64 when it is not UTF-8.
    pub fn read(&self, uri: &str) -> Result<Value, ErrorData> {
        let path = self.path_of(uri).map_err(|why| not_found(uri, &why))?;
        let bytes = match self.files.read_prefix(&path, MAX_READ_BYTES + 1) {
            Ok(bytes) => bytes,
            Err(error) => return Err(read_error(uri, &path, &error)),
        };
        if bytes.len() > MAX_READ_BYTES {
            return Err(too_large(uri));
        }
        let mime = mime_type(&path);
        let contents = match String::from_utf8(bytes) {
            Ok(text) => json!({
                "uri": uri,
                "mimeType": mime.unwrap_or("text/plain"),
                "text": text,
            }),
            Err(bytes) => json!({
                "uri": uri,
                "mimeType": mime.unwrap_or("application/octet-stream"),
                "blob": base64::engine::general_purpose::STANDARD.encode(bytes.as_bytes()),
            }),
        };
        Ok(json!({ "contents": [contents] }))
    }

    /// The file a subscription to `uri` watches: its real path, when the `read` built-in's grants would read it
    /// and it lies in the workspace.
    fn watched(&self, uri: &str) -> Result<std::path::PathBuf, ErrorData> {
        let path = self.path_of(uri).map_err(|why| not_found(uri, &why))?;
        // Opened and read as a read does (a byte: a directory fails there): through the grants, symlinks
        // followed only inside them; no larger than a read reads.
        if let Err(error) = self.files.read_prefix(&path, 1) {
            return Err(read_error(uri, &path, &error));
        }
        if self
            .files
            .metadata(&path)
            .is_ok_and(|m| m.len > MAX_READ_BYTES as u64)
        {
            return Err(too_large(uri));
        }
        let real = std::fs::canonicalize(&path).map_err(|e| read_error(uri, &path, &e))?;
        let root = std::fs::canonicalize(&self.root).map_err(|e| read_error(uri, &self.root, &e))?;
        if !real.starts_with(&root) {
            return Err(not_found(
                uri,
                &format!("not a file below the workspace {}", self.root),
            ));
        }
        Ok(real)
    }

    /// The absolute path a `file://` URI names inside the workspace, or why it names none (another scheme, a
    /// host, a query, a path outside the workspace or the workspace itself).
    fn path_of(&self, uri: &str) -> Result<String, String> {
        let files = || "the resources are the workspace's files, file:///path".to_owned();
        let url = url::Url::parse(uri).map_err(|_| files())?;
        if url.scheme() != "file"
            || url.host_str().is_some_and(|h| !h.is_empty() && h != "localhost")
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(files());
        }
        let path = url.to_file_path().map_err(|()| files())?;
        let path = paths::normalize(path.to_str().ok_or_else(files)?);
        match relative(&self.root, &path) {
            Some(rel) if !rel.is_empty() => Ok(path),
            _ => Err(format!("not a file below the workspace {}", self.root)),
        }
    }
}

/// `path` relative to `root`, when it lies below it (empty for the root itself).
fn relative(root: &str, path: &str) -> Option<String> {
    if path == root {
        return Some(String::new());
    }
    let rest = path.strip_prefix(root)?;
    let rest = if root.ends_with('/') {
        rest
    } else {
        rest.strip_prefix('/')?
    };
    Some(rest.to_owned())
}

/// The error for a file larger than [`MAX_READ_BYTES`].
fn too_large(uri: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "Resource too large: {uri} is larger than {} MiB, the most read as a resource (the read tool reads it in \
             parts)",
            MAX_READ_BYTES >> 20
        ),
        Some(json!({ "uri": uri })),
    )
}

/// SEP-2164's error for a URI that names no resource, and why.
fn not_found(uri: &str, why: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("Resource not found: {uri} ({why})"),
        Some(json!({ "uri": uri })),
    )
}

/// The error of a refused or failed read: a missing file or a directory is not found; a refusal says why.
fn read_error(uri: &str, path: &str, error: &std::io::Error) -> ErrorData {
    match error.kind() {
        std::io::ErrorKind::NotFound => not_found(uri, "no such file"),
        std::io::ErrorKind::IsADirectory => not_found(uri, "a directory"),
        std::io::ErrorKind::PermissionDenied => ErrorData::invalid_params(
            format!("Resource not readable: {error}"),
            Some(json!({ "uri": uri })),
        ),
        _ => ErrorData::invalid_params(
            format!("Resource not readable: {path}: {error}"),
            Some(json!({ "uri": uri })),
        ),
    }
}

/// The MIME type of a file by its extension, for the kinds a client shows; none when unknown.
fn mime_type(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next()?;
    let extension = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match extension.as_str() {
        "txt" | "log" | "rs" | "py" | "c" | "h" | "cc" | "cpp" | "hpp" | "go" | "java" | "kt" | "rb"
        | "sh" | "toml" | "ini" | "cfg" | "lock" | "wit" | "sql" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "js" | "mjs" | "cjs" => "text/javascript",
        "ts" | "tsx" | "jsx" => "text/plain",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "xml" => "application/xml",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "pdf" => "application/pdf",
        "wasm" => "application/wasm",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        _ => return None,
    })
}

/// A page's cursor: the last path it listed, in URL-safe base64 (opaque to clients).
fn encode_cursor(path: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(path)
}

fn decode_cursor(cursor: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use toolwright_native::grants::{Grant, GrantedFiles};

    fn workspace(grants: &[Grant], root: &std::path::Path) -> Workspace {
        Workspace::new(root, Arc::new(GrantedFiles::open(grants).unwrap()))
    }

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::create_dir_all(dir.path().join("secrets")).unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(dir.path().join("a b.txt"), "spaced\n").unwrap();
        std::fs::write(dir.path().join("logo.png"), [0x89, b'P', b'N', b'G', 0xff, 0]).unwrap();
        std::fs::write(dir.path().join("secrets/key"), "hunter2").unwrap();
        std::fs::write(dir.path().join(".gitignore"), "ignored.txt\n").unwrap();
        std::fs::write(dir.path().join("ignored.txt"), "no").unwrap();
        dir
    }

    #[test]
    fn the_list_is_the_walked_files_by_url_and_relative_name() {
        let dir = tree();
        let root = dir.path().canonicalize().unwrap();
        let ws = workspace(&[Grant::read_only(&root)], &root);
        let listed = ws.list(None).unwrap();
        let names: Vec<&str> = listed["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a b.txt", "logo.png", "secrets/key", "src/main.rs"]);
        let spaced = &listed["resources"][0];
        assert!(
            spaced["uri"].as_str().unwrap().ends_with("/a%20b.txt"),
            "{spaced}"
        );
        assert_eq!(spaced["mimeType"], "text/plain");
        assert_eq!(spaced["size"], 7);
        assert!(listed.get("nextCursor").is_none());
    }

    #[test]
    fn reading_goes_through_the_grants_and_stays_in_the_workspace() {
        let dir = tree();
        let root = dir.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("x"), "outside").unwrap();
        // The `read` built-in may read the workspace but for `secrets/`, and the directory outside.
        let ws = workspace(
            &[
                Grant::read_only(root.join("src")),
                Grant::read_only(outside.path()),
                Grant::read_only(&root),
            ],
            &root,
        );
        let url = |p: &std::path::Path| url::Url::from_file_path(p).unwrap().to_string();
        let text = ws.read(&url(&root.join("src/main.rs"))).unwrap();
        assert_eq!(text["contents"][0]["text"], "fn main() {}\n");
        let spaced = ws.read(&url(&root.join("a b.txt"))).unwrap();
        assert_eq!(spaced["contents"][0]["text"], "spaced\n");
        let png = ws.read(&url(&root.join("logo.png"))).unwrap();
        assert_eq!(png["contents"][0]["mimeType"], "image/png");
        assert_eq!(png["contents"][0]["blob"], "iVBOR/8A");
        // Outside the workspace, though `read` may read it: not a resource.
        let error = ws.read(&url(&outside.path().join("x"))).unwrap_err();
        assert_eq!(error.code.0, -32602);
        let below = format!("(not a file below the workspace {})", root.display());
        assert!(error.message.ends_with(&below), "{}", error.message);
        // Through `..`, a missing file, a directory, another scheme, the workspace itself.
        for uri in [
            format!("file://{}/src/../../x", root.display()),
            url(&root.join("missing")),
            url(&root.join("src")),
            url(&root),
            "test://nonexistent".to_owned(),
            "file://evil.example/etc/passwd".to_owned(),
            "not a uri".to_owned(),
        ] {
            let error = ws.read(&uri).unwrap_err();
            assert_eq!(error.code.0, -32602, "{uri}");
            assert!(
                error.message.starts_with("Resource not found: "),
                "{uri}: {}",
                error.message
            );
            assert_eq!(error.data, Some(json!({ "uri": uri })));
        }
    }

    #[test]
    fn what_the_grants_refuse_is_neither_listed_nor_read() {
        let dir = tree();
        let root = dir.path().canonicalize().unwrap();
        // Only `src/` granted: the rest of the workspace is the `read` tool's refusal.
        let ws = workspace(&[Grant::read_only(root.join("src"))], &root);
        let listed = ws.list(None).unwrap();
        assert_eq!(listed["resources"].as_array().unwrap().len(), 1, "{listed}");
        let key = url::Url::from_file_path(root.join("secrets/key")).unwrap();
        let error = ws.read(key.as_str()).unwrap_err();
        assert_eq!(error.code.0, -32602);
        assert!(
            error.message.starts_with("Resource not readable: "),
            "{}",
            error.message
        );
        assert!(!error.message.contains("hunter2"));
        // A symlink in a granted directory that leads out of the grants is refused as `read` refuses it.
        std::os::unix::fs::symlink(root.join("secrets/key"), root.join("src/link")).unwrap();
        let link = url::Url::from_file_path(root.join("src/link")).unwrap();
        let error = ws.read(link.as_str()).unwrap_err();
        assert!(
            error.message.starts_with("Resource not readable: "),
            "{}",
            error.message
        );
    }

    #[test]
    fn pages_follow_their_cursor_and_a_forged_cursor_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for n in 0..PAGE + 3 {
            std::fs::write(root.join(format!("f{n:04}.txt")), "x").unwrap();
        }
        let mut ws = workspace(&[Grant::read_only(&root)], &root);
        // However slow the machine, the walk is kept for the whole test.
        ws.walk_kept = std::time::Duration::from_secs(3600);
        let first = ws.list(None).unwrap();
        assert_eq!(first["resources"].as_array().unwrap().len(), PAGE);
        let cursor = first["nextCursor"].as_str().unwrap();
        let second = ws.list(Some(cursor)).unwrap();
        let names: Vec<&str> = second["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["f0500.txt", "f0501.txt", "f0502.txt"]);
        assert!(second.get("nextCursor").is_none());
        let error = ws.list(Some("%%%")).unwrap_err();
        assert_eq!(error.code.0, -32602);
        // The later pages are cut from the first page's walk (a listing is one snapshot, walked once); a first
        // page walks again.
        std::fs::write(root.join("f9999.txt"), "x").unwrap();
        let again = ws.list(Some(cursor)).unwrap();
        assert_eq!(again["resources"].as_array().unwrap().len(), 3);
        let first = ws.list(None).unwrap();
        let again = ws.list(Some(first["nextCursor"].as_str().unwrap())).unwrap();
        assert_eq!(again["resources"].as_array().unwrap().len(), 4);
    }

    #[test]
    fn the_first_required_argument_not_given_is_named() {
        let declared = json!({"name": "p", "arguments": [
            {"name": "a", "required": false}, {"name": "b", "required": true}, {"name": "c", "required": true}]});
        let given = |keys: &[&str]| {
            keys.iter()
                .map(|k| ((*k).to_owned(), String::new()))
                .collect::<Vec<_>>()
        };
        assert_eq!(missing_argument(&declared, &given(&["a"])), Some("b".into()));
        assert_eq!(missing_argument(&declared, &given(&["b"])), Some("c".into()));
        assert_eq!(missing_argument(&declared, &given(&["c", "b"])), None);
        assert_eq!(missing_argument(&json!({"name": "q"}), &[]), None);
    }

    #[test]
    fn a_file_larger_than_the_bound_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let big = root.join("big.bin");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_READ_BYTES as u64 + 1)
            .unwrap();
        let ws = workspace(&[Grant::read_only(&root)], &root);
        let error = ws
            .read(url::Url::from_file_path(&big).unwrap().as_str())
            .unwrap_err();
        assert!(
            error.message.starts_with("Resource too large: "),
            "{}",
            error.message
        );
    }
}
