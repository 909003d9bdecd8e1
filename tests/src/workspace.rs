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

/// Every regular file below `root`/`rel`, as path to base64 contents.
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
            out.insert(
                path.to_string_lossy().into_owned(),
                Value::String(base64_encode(&bytes)),
            );
        }
    }
    out
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("valid base64")
}
