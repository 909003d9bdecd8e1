//! Test workspaces built from a fixture's `files` map, and snapshots of what is left in them.

use std::path::Path;

use serde_json::{Map, Value};

/// A fresh workspace holding `files`: path to text, `{"base64"}`, `{"dir": true}` or `{"symlink"}`.
pub fn create(files: &Map<String, Value>) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("tw-ws-")
        .tempdir()
        .expect("a temp dir");
    for (path, spec) in files {
        let full = dir.path().join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).expect("parent dirs");
        }
        match spec {
            Value::String(text) => std::fs::write(&full, text).expect("a file"),
            Value::Object(o) if o.contains_key("base64") => {
                let bytes = base64_decode(o["base64"].as_str().unwrap_or_default());
                std::fs::write(&full, bytes).expect("a file");
            }
            Value::Object(o) if o.contains_key("generate") => {
                std::fs::write(&full, generate(&o["generate"])).expect("a file")
            }
            Value::Object(o) if o.contains_key("dir") => std::fs::create_dir_all(&full).expect("a dir"),
            Value::Object(o) if o.contains_key("symlink") => {
                std::os::unix::fs::symlink(o["symlink"].as_str().unwrap_or_default(), &full)
                    .expect("a symlink")
            }
            other => panic!("unknown file spec for {path}: {other}"),
        }
    }
    dir
}

/// Generated contents: a list of literal strings, `{"repeat": s, "count": n}` and
/// `{"lines": {"from", "to", "width"?, "tail"?}}` (each number zero-padded to `width`, then `tail` and a newline).
/// Large inputs are described in the fixture this way instead of being committed.
pub fn generate(parts: &Value) -> String {
    let mut out = String::new();
    for part in parts.as_array().map(Vec::as_slice).unwrap_or_default() {
        match part {
            Value::String(s) => out.push_str(s),
            Value::Object(o) if o.contains_key("repeat") => {
                let count = o["count"].as_u64().unwrap_or(0) as usize;
                out.push_str(&o["repeat"].as_str().unwrap_or_default().repeat(count));
            }
            Value::Object(o) => {
                let lines = &o["lines"];
                let width = lines["width"].as_u64().unwrap_or(0) as usize;
                let tail = lines["tail"].as_str().unwrap_or_default();
                for i in lines["from"].as_u64().unwrap_or(1)..=lines["to"].as_u64().unwrap_or(0) {
                    out.push_str(&format!("{i:0width$}{tail}\n"));
                }
            }
            other => panic!("unknown generated part {other}"),
        }
    }
    out
}

/// Every regular file below `root`/`rel`: path to base64 contents (small files) or SHA-256 (larger ones).
pub fn snapshot(root: &Path, rel: &Path) -> Map<String, Value> {
    let mut out = Map::new();
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))
        .expect("readable")
        .map(|e| e.expect("entry"))
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = rel.join(entry.file_name());
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            out.extend(snapshot(root, &path));
        } else if kind.is_file() {
            let bytes = std::fs::read(root.join(&path)).expect("readable");
            out.insert(path.to_string_lossy().into_owned(), Value::String(digest(&bytes)));
        }
    }
    out
}

/// Small files as base64, larger ones by their SHA-256, as the recorder writes them.
fn digest(bytes: &[u8]) -> String {
    use base64::Engine;
    use sha2::Digest;
    if bytes.len() <= 1024 {
        return base64::engine::general_purpose::STANDARD.encode(bytes);
    }
    let hash = sha2::Sha256::digest(bytes);
    format!(
        "sha256:{}",
        hash.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("valid base64")
}
