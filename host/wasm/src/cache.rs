//! Compiled components cached on disk, keyed by the component's SHA-256 and the engine's fingerprint, so a
//! second start does not compile again. The cache is bounded: an entry's modification time is its last use,
//! and after each compile the least recently used entries go until the rest fit under [`max_bytes`].
//! [`entries`], [`prune`] and [`clear`] are what `toolwright cache` shows and does.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where compiled components go: `$TOOLWRIGHT_CACHE_DIR`, else `$XDG_CACHE_HOME/toolwright/components`, else
/// `~/.cache/toolwright/components`, else the system temp directory.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TOOLWRIGHT_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("toolwright").join("components")
}

/// The cache's size cap when `$TOOLWRIGHT_CACHE_MAX_MIB` does not set one: 2 GiB (a Python or JavaScript plugin's
/// entry is about 35 MB, a Rust one's a few).
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;

/// The cache's size cap: `$TOOLWRIGHT_CACHE_MAX_MIB` MiB, else [`DEFAULT_MAX_BYTES`].
pub fn max_bytes() -> u64 {
    std::env::var("TOOLWRIGHT_CACHE_MAX_MIB")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_MAX_BYTES, |mib| mib.saturating_mul(1 << 20))
}

/// One compiled component in a cache directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    /// The file.
    pub path: PathBuf,
    /// The component's SHA-256, in hex.
    pub digest: String,
    /// The fingerprint of the engine that compiled it (its wasmtime version and settings).
    pub fingerprint: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last loaded or written.
    pub last_used: SystemTime,
}

/// The compiled components in `dir`, most recently used first (none when `dir` does not exist).
pub fn entries(dir: &Path) -> std::io::Result<Vec<CacheEntry>> {
    let read = match std::fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for entry in read.flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some((digest, fingerprint)) = name.strip_suffix(".cwasm").and_then(|stem| stem.split_once('-'))
        else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        found.push(CacheEntry {
            digest: digest.to_owned(),
            fingerprint: fingerprint.to_owned(),
            size: meta.len(),
            last_used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            path,
        });
    }
    found.sort_by(|a, b| b.last_used.cmp(&a.last_used).then_with(|| a.path.cmp(&b.path)));
    Ok(found)
}

/// A temporary file older than this is a write that never finished (a host killed mid-write).
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// Remove the least recently used entries of `dir` until the rest fit in `max` bytes, and temporary files left by
/// writes that never finished. The entries removed.
pub fn prune(dir: &Path, max: u64) -> std::io::Result<Vec<CacheEntry>> {
    let mut kept = 0u64;
    let mut removed = Vec::new();
    for entry in entries(dir)? {
        if kept.saturating_add(entry.size) <= max {
            kept += entry.size;
            continue;
        }
        // The entry's cached metadata goes with it (best effort: without its component it is never read).
        let _ = std::fs::remove_file(metadata_path(&entry.path));
        match std::fs::remove_file(&entry.path) {
            Ok(()) => removed.push(entry),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    if let Ok(read) = std::fs::read_dir(dir) {
        for entry in read.flatten() {
            let is_temp = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with('.') && n.ends_with(".tmp"));
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().unwrap_or_default() > STALE_TEMP);
            if is_temp && old {
                let _ = std::fs::remove_file(entry.path());
            }
            // Metadata whose component is gone (removed by hand, say) is never read again.
            let path = entry.path();
            if let Some(stem) = path.to_str().and_then(|p| p.strip_suffix(".meta.json"))
                && !Path::new(&format!("{stem}.cwasm")).exists()
            {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    Ok(removed)
}

/// Remove every compiled component (and temporary file) in `dir`: how many files and bytes.
pub fn clear(dir: &Path) -> std::io::Result<(usize, u64)> {
    let removed = prune(dir, 0)?;
    Ok((removed.len(), removed.iter().map(|e| e.size).sum()))
}

/// A component's SHA-256: its cache key, and how a plugin file is recognised when it is read again.
pub type Digest = [u8; 32];

/// The SHA-256 of a component's `bytes`.
pub fn digest(bytes: &[u8]) -> Digest {
    Sha256::digest(bytes).into()
}

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Loaded precompiled from the cache.
    Cached,
    /// Compiled now (and written to the cache).
    Compiled,
}

/// A directory of compiled components.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
    fingerprint: String,
}

impl ComponentCache {
    /// A cache in `dir` (none: compile every time) for an engine with `fingerprint`.
    pub fn new(dir: Option<PathBuf>, fingerprint: String) -> Self {
        ComponentCache { dir, fingerprint }
    }

    /// The cache file for a component whose SHA-256 is `digest`.
    fn path_for(&self, digest: &Digest) -> Option<PathBuf> {
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        Some(
            self.dir
                .as_ref()?
                .join(format!("{hex}-{}.cwasm", self.fingerprint)),
        )
    }

    /// What was cached beside the component whose SHA-256 is `digest` (its metadata and tool list), if it was
    /// and still parses as a `T`.
    pub fn metadata<T: serde::de::DeserializeOwned>(&self, digest: &Digest) -> Option<T> {
        let path = metadata_path(&self.path_for(digest)?);
        let text = std::fs::read(&path).ok()?;
        match serde_json::from_slice(&text) {
            Ok(value) => Some(value),
            Err(e) => {
                tracing::debug!(path = %path.display(), "ignoring unusable cached metadata: {e}");
                None
            }
        }
    }

    /// Cache `value` beside the component whose SHA-256 is `digest` (best effort, written atomically).
    pub fn store_metadata<T: serde::Serialize>(&self, digest: &Digest, value: &T) {
        let Some(path) = self.path_for(digest) else { return };
        let stored = serde_json::to_vec(value)
            .map_err(std::io::Error::other)
            .and_then(|bytes| write_atomically(&metadata_path(&path), &bytes));
        if let Err(e) = stored {
            tracing::debug!(path = %path.display(), "cannot cache a component's metadata: {e}");
        }
    }

    /// The component for `bytes`: from the cache when it is there, else compiled and cached. A cache that
    /// cannot be read or written is reported in the log and bypassed.
    /// `digest` is the bytes' SHA-256.
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &Digest,
    ) -> wasmtime::Result<(Component, Origin)> {
        let path = self.path_for(digest);
        if let Some(path) = &path
            && path.is_file()
        {
            match deserialize(engine, path) {
                Ok(component) => {
                    // Its modification time is its last use, which eviction goes by.
                    touch(path);
                    return Ok((component, Origin::Cached));
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), "ignoring an unusable cached component: {e:#}")
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Some(path) = &path {
            match store(&component, path) {
                Ok(()) => {
                    if let Some(dir) = path.parent()
                        && let Err(e) = prune(dir, max_bytes().max(file_size(path)))
                    {
                        tracing::warn!(dir = %dir.display(), "cannot prune the component cache: {e}");
                    }
                }
                Err(e) => tracing::warn!(path = %path.display(), "cannot cache a compiled component: {e:#}"),
            }
        }
        Ok((component, Origin::Compiled))
    }
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Mark a cache entry as used now (best effort: a read-only cache still works, unordered).
fn touch(path: &Path) {
    let touched = std::fs::File::options()
        .append(true)
        .open(path)
        .and_then(|file| file.set_modified(SystemTime::now()));
    if let Err(e) = touched {
        tracing::debug!(path = %path.display(), "cannot record the use of a cached component: {e}");
    }
}

/// The file holding a cached component's metadata: `DIGEST-FINGERPRINT.meta.json` beside its `.cwasm`.
fn metadata_path(component: &Path) -> PathBuf {
    component.with_extension("meta.json")
}

#[allow(unsafe_code)]
fn deserialize(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: the file is mapped, not read: the code runs from the page cache, shared by every process that
    // loads it, and only the pages a call touches are read. A mapping is only as good as the file's bytes, and
    // this cache never changes a file in place: an entry is written under a temporary name and renamed over
    // (`write_atomically`), and pruning unlinks; either way the mapped inode lives on, unchanged, until it is
    // unmapped (`tests/tests/plugins.rs` replaces and removes an entry under a running plugin). The file is one
    // this cache wrote into the user's own cache directory, under a name that carries the engine's compatibility
    // fingerprint, and wasmtime checks its header and version; only a process of the same user truncating it in
    // place could break the mapping, the same trust as in the toolwright binary itself.
    unsafe { Component::deserialize_file(engine, path) }
}

fn store(component: &Component, path: &Path) -> wasmtime::Result<()> {
    let bytes = component.serialize()?;
    write_atomically(path, &bytes)?;
    Ok(())
}

/// Write `bytes` to `path` by way of a temporary name and a rename: a concurrent start never sees half a file,
/// and a file another process has mapped is never modified in place.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    // Unique per process and write: two threads caching the same component never share a temporary file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{}-{n}.{}.tmp",
        std::process::id(),
        path.file_name().and_then(|n| n.to_str()).unwrap_or("c")
    ));
    if let Err(e) = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dir: &Path, name: &str, size: usize, age_secs: u64) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, vec![0u8; size]).unwrap();
        let file = std::fs::File::options().append(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(age_secs))
            .unwrap();
        path
    }

    #[test]
    fn the_least_recently_used_entries_go_first_and_only_cache_files_are_touched() {
        let dir = tempfile::tempdir().unwrap();
        let old = entry(dir.path(), "aa-fp1.cwasm", 100, 300);
        let recent = entry(dir.path(), "bb-fp1.cwasm", 100, 10);
        let middle = entry(dir.path(), "cc-fp2.cwasm", 100, 100);
        let unrelated = entry(dir.path(), "notes.txt", 1000, 1000);
        let stale_temp = entry(dir.path(), ".123.dd-fp1.cwasm.tmp", 10, 7200);
        let fresh_temp = entry(dir.path(), ".124.ee-fp1.cwasm.tmp", 10, 1);

        let listed = entries(dir.path()).unwrap();
        let digests: Vec<&str> = listed.iter().map(|e| e.digest.as_str()).collect();
        assert_eq!(digests, ["bb", "cc", "aa"], "most recent first, cache files only");
        assert_eq!(listed[1].fingerprint, "fp2");

        let removed = prune(dir.path(), 250).unwrap();
        let removed: Vec<&Path> = removed.iter().map(|e| e.path.as_path()).collect();
        assert_eq!(removed, [old.as_path()]);
        assert!(recent.exists() && middle.exists() && unrelated.exists());
        assert!(!stale_temp.exists(), "a write that never finished is cleaned up");
        assert!(fresh_temp.exists(), "a write in progress is left alone");

        assert_eq!(clear(dir.path()).unwrap(), (2, 200));
        assert!(entries(dir.path()).unwrap().is_empty());
        assert!(unrelated.exists());
        assert!(entries(&dir.path().join("missing")).unwrap().is_empty());
    }
}
