//! Compiled components cached on disk, keyed by the component's SHA-256 and the engine's fingerprint, so a
//! second start does not compile again. The cache is bounded: an entry's modification time is its last use,
//! and after each compile the least recently used entries go until the rest fit under [`max_bytes`].
//! [`entries`], [`prune`] and [`clear`] are what `toolwright cache` shows and does.
//!
//! Beside the compiled code, in `DIR/described/`, each component's *description* (what it says about itself:
//! metadata, tools, whether it is a handler), keyed by its SHA-256 alone: a function of its bytes, it outlives
//! the compiled code (an engine that cannot use old entries, a pruned or cleared cache), so a start lists a
//! plugin's tools without compiling it. A changed plugin file has another digest, so its description is never
//! served stale.

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
        // An older layout's description beside it goes with it (best effort).
        let _ = std::fs::remove_file(legacy_description(&entry.path));
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
            // An older layout's description whose component is gone is never read again.
            let path = entry.path();
            if let Some(stem) = path.to_str().and_then(|p| p.strip_suffix(".meta.json"))
                && !Path::new(&format!("{stem}.cwasm")).exists()
            {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    // A remembered digest is rewritten by the next load that hashes its file, and a description is marked as
    // used by each load that reads it: one untouched for a month most likely names a file long gone.
    for sub in [STAMPS, DESCRIBED] {
        let Ok(read) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for entry in read.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().unwrap_or_default() > STALE_STAMP);
            if old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(removed)
}

/// A remembered plugin-file digest or a description unused for longer than this is removed by [`prune`].
const STALE_STAMP: Duration = Duration::from_secs(30 * 24 * 3600);

/// Remove every compiled component (and temporary file) in `dir`, and the plugin-file digests remembered
/// there: how many components and bytes. The components' descriptions stay (a few KB each, never stale): the
/// next start lists the plugins' tools at once and compiles each when it is first called.
pub fn clear(dir: &Path) -> std::io::Result<(usize, u64)> {
    let removed = prune(dir, 0)?;
    match std::fs::remove_dir_all(dir.join(STAMPS)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
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
pub enum Compilation {
    /// Loaded precompiled from the cache.
    Cached,
    /// Compiled now (and written to the cache).
    Compiled,
    /// Not yet: its description came from the cache, and its code is compiled (or mapped from the cache) at its
    /// first call, or ahead of it by [`Link::run`](crate::Link::run).
    Later,
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
        Some(
            self.dir
                .as_ref()?
                .join(format!("{}-{}.cwasm", hex(digest), self.fingerprint)),
        )
    }

    /// `DIR/described/DIGEST.json`: the description of the component whose SHA-256 is `digest`, whatever
    /// engine compiles it.
    fn description_path(&self, digest: &Digest) -> Option<PathBuf> {
        Some(
            self.dir
                .as_ref()?
                .join(DESCRIBED)
                .join(format!("{}.json", hex(digest))),
        )
    }

    /// The description cached for the component whose SHA-256 is `digest` (its metadata and tool list), if
    /// there is one and it still parses as a `T` (marked as used).
    pub fn description<T: serde::de::DeserializeOwned>(&self, digest: &Digest) -> Option<T> {
        let path = self.description_path(digest)?;
        let text = std::fs::read(&path).ok()?;
        match serde_json::from_slice(&text) {
            Ok(value) => {
                touch(&path);
                Some(value)
            }
            Err(e) => {
                tracing::debug!(path = %path.display(), "ignoring an unusable cached description: {e}");
                None
            }
        }
    }

    /// Cache `value` as the description of the component whose SHA-256 is `digest` (best effort, written
    /// atomically).
    pub fn store_description<T: serde::Serialize>(&self, digest: &Digest, value: &T) {
        let Some(path) = self.description_path(digest) else {
            return;
        };
        let stored = serde_json::to_vec(value)
            .map_err(std::io::Error::other)
            .and_then(|bytes| write_atomically(&path, &bytes));
        if let Err(e) = stored {
            tracing::debug!(path = %path.display(), "cannot cache a component's description: {e}");
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
    ) -> wasmtime::Result<(Component, Compilation)> {
        match self.cached(engine, digest) {
            Some(component) => Ok((component, Compilation::Cached)),
            None => Ok((self.compile(engine, bytes, digest)?, Compilation::Compiled)),
        }
    }

    /// Whether the cache holds compiled code for the component whose SHA-256 is `digest` (not checked for use).
    pub fn holds(&self, digest: &Digest) -> bool {
        self.path_for(digest).is_some_and(|path| path.is_file())
    }

    /// Mark the compiled component whose SHA-256 is `digest` as used, if the cache holds it: whether it does.
    pub fn mark_used(&self, digest: &Digest) -> bool {
        let Some(path) = self.path_for(digest) else {
            return false;
        };
        let held = path.is_file();
        if held {
            touch(&path);
        }
        held
    }

    /// The compiled component whose SHA-256 is `digest`, if the cache holds a usable one (mapped, and marked
    /// as used). An unusable entry is reported in the log and passed over.
    pub fn cached(&self, engine: &Engine, digest: &Digest) -> Option<Component> {
        self.mapped(engine, digest).map(|(component, _)| component)
    }

    /// As [`ComponentCache::cached`], with the file that was mapped (its memory image is mapped from it into
    /// each instance's memory: `crate::instances::resident`), when it is known for sure: the same before and after.
    pub(crate) fn mapped(&self, engine: &Engine, digest: &Digest) -> Option<(Component, Option<FileId>)> {
        let path = self.path_for(digest)?;
        if !path.is_file() {
            return None;
        }
        let before = FileId::of(&path);
        match deserialize(engine, &path) {
            Ok(component) => {
                // An entry renamed over while it was mapped: which file is mapped is not known.
                let file = before.filter(|id| FileId::of(&path).as_ref() == Some(id));
                // Its modification time is its last use, which eviction goes by.
                touch(&path);
                Some((component, file))
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), "ignoring an unusable cached component: {e:#}");
                None
            }
        }
    }

    /// Compile `bytes`, whose SHA-256 is `digest`, and cache the result (pruning the cache to its cap).
    pub fn compile(&self, engine: &Engine, bytes: &[u8], digest: &Digest) -> wasmtime::Result<Component> {
        let path = self.path_for(digest);
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
        Ok(component)
    }

    /// The SHA-256 remembered for the file `stamp` describes, if the cache holds one recorded for exactly
    /// this stamp (see [`FileStamp`]).
    pub fn remembered(&self, stamp: &FileStamp) -> Option<Digest> {
        let path = self.stamp_path(stamp)?;
        let text = std::fs::read(path).ok()?;
        let memo: Remembered = serde_json::from_slice(&text).ok()?;
        (memo.stamp == *stamp)
            .then_some(memo.digest)
            .and_then(|hex| parse_hex(&hex))
    }

    /// Remember that the file `stamp` describes (as it was when it was opened) has the SHA-256 `digest` of the
    /// bytes read from it from `read_at` on, unless the file had changed too recently before `read_at` for its
    /// stamp to tell a later write apart (best effort, written atomically). What counts is when the read began,
    /// not now: a compile between the read and this call (seconds on a loaded machine) settles nothing.
    pub fn remember(&self, stamp: &FileStamp, digest: &Digest, read_at: SystemTime) {
        let Some(path) = self.stamp_path(stamp) else {
            return;
        };
        if !stamp.settled(read_at) {
            return;
        }
        let memo = Remembered {
            stamp: *stamp,
            digest: hex(digest),
        };
        let stored = serde_json::to_vec(&memo)
            .map_err(std::io::Error::other)
            .and_then(|bytes| write_atomically(&path, &bytes));
        if let Err(e) = stored {
            tracing::debug!(path = %path.display(), "cannot remember a plugin file's digest: {e}");
        }
    }

    /// `DIR/files/DEVICE-INODE.json`: one per plugin file, whatever path it was loaded by.
    fn stamp_path(&self, stamp: &FileStamp) -> Option<PathBuf> {
        Some(
            self.dir
                .as_ref()?
                .join(STAMPS)
                .join(format!("{:x}-{:x}.json", stamp.dev, stamp.ino)),
        )
    }
}

/// The cache's subdirectory of remembered plugin-file digests.
const STAMPS: &str = "files";

/// The cache's subdirectory of component descriptions.
const DESCRIBED: &str = "described";

/// A file's identity as the file system reports it: device, inode, size, and the modification and change
/// times to the nanosecond. Any write to the file changes its change time, which no unprivileged process can
/// set back, so a file with the stamp recorded when its bytes were hashed still holds those bytes — provided
/// the change time was already a second old when the file was opened: a file system stamps times from a clock
/// that ticks every few milliseconds, and a second write within the same tick as the first, of the same size,
/// would otherwise keep the stamp (Git's "racy" index entries are the same problem).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

/// How old a file's change time must be before its stamp stands for its bytes.
const SETTLE: Duration = Duration::from_secs(1);

impl FileStamp {
    /// The stamp of the file `meta` describes (none on systems without inodes and change times).
    pub fn of(meta: &std::fs::Metadata) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
            Some(FileStamp {
                dev: meta.dev(),
                ino: meta.ino(),
                size: meta.size(),
                mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
                ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            None
        }
    }

    /// Whether the file last changed at least [`SETTLE`] before `now` (a change time in the future is not).
    fn settled(&self, now: SystemTime) -> bool {
        let Ok(now) = now.duration_since(SystemTime::UNIX_EPOCH) else {
            return false;
        };
        self.ctime_ns + SETTLE.as_nanos() as i128 <= now.as_nanos() as i128
    }
}

/// What `DIR/files/DEVICE-INODE.json` holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct Remembered {
    stamp: FileStamp,
    digest: String,
}

/// A file, by device (major, minor) and inode, as `/proc/self/maps` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileId(pub(crate) u32, pub(crate) u32, pub(crate) u64);

impl FileId {
    /// The file at `path` now (none where that cannot be known, or off Linux).
    pub(crate) fn of(path: &Path) -> Option<FileId> {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::metadata(path).ok()?;
            Some(FileId(
                libc::major(meta.dev()),
                libc::minor(meta.dev()),
                meta.ino(),
            ))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = path;
            None
        }
    }
}

fn hex(digest: &Digest) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex(text: &str) -> Option<Digest> {
    let mut digest = [0u8; 32];
    if text.len() != 64 {
        return None;
    }
    for (byte, pair) in digest.iter_mut().zip(text.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(digest)
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

/// Where an older layout kept a component's description: `DIGEST-FINGERPRINT.meta.json` beside its `.cwasm`
/// (only removed now).
fn legacy_description(component: &Path) -> PathBuf {
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
    // Unique per process and thread (a thread writes one file at a time): two threads caching the same component
    // never share a temporary file.
    let thread: String = format!("{:?}", std::thread::current().id())
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let tmp = dir.join(format!(
        ".{}-{thread}.{}.tmp",
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

    #[cfg(unix)]
    #[test]
    fn a_digest_is_remembered_for_a_settled_stamp_and_only_that_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(Some(dir.path().to_path_buf()), "fp".into());
        let file = dir.path().join("plugin.wasm");
        std::fs::write(&file, b"one").unwrap();
        let stamp = FileStamp::of(&std::fs::metadata(&file).unwrap()).unwrap();
        let digest = digest(b"one");

        cache.remember(&stamp, &digest, SystemTime::now());
        assert_eq!(
            cache.remembered(&stamp),
            None,
            "a file changed this very moment is not trusted by stamp"
        );
        let later = SystemTime::now() + SETTLE;
        cache.remember(&stamp, &digest, later);
        assert_eq!(cache.remembered(&stamp), Some(digest));

        // Any write changes the stamp, even one of the same size.
        std::fs::write(&file, b"two").unwrap();
        let rewritten = FileStamp::of(&std::fs::metadata(&file).unwrap()).unwrap();
        assert_ne!(rewritten, stamp);
        assert_eq!(
            cache.remembered(&rewritten),
            None,
            "the same inode, written again"
        );
        for changed in [
            FileStamp { size: 4, ..stamp },
            FileStamp {
                ctime_ns: stamp.ctime_ns + 1,
                ..stamp
            },
            FileStamp {
                mtime_ns: stamp.mtime_ns - 1,
                ..stamp
            },
        ] {
            assert_eq!(cache.remembered(&changed), None, "{changed:?}");
        }
        let future = FileStamp {
            ctime_ns: stamp.ctime_ns + 3_600_000_000_000,
            ..stamp
        };
        assert!(
            !future.settled(later),
            "a change time in the future is not settled"
        );

        // Unreadable memos are misses; clearing the cache forgets them.
        let memo = cache.stamp_path(&stamp).unwrap();
        std::fs::write(&memo, b"{").unwrap();
        assert_eq!(cache.remembered(&stamp), None);
        cache.remember(&stamp, &digest, later);
        assert!(memo.is_file());
        clear(dir.path()).unwrap();
        assert!(!memo.exists() && !dir.path().join(STAMPS).exists());
        assert_eq!(parse_hex(&hex(&digest)), Some(digest));
        assert_eq!(parse_hex("zz"), None);
    }
}
