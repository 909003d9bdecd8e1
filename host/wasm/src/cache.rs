//! Compiled components cached on disk, keyed by the component's SHA-256 and the engine's fingerprint, so a
//! second start does not compile again.

use std::path::{Path, PathBuf};

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
                Ok(component) => return Ok((component, Origin::Cached)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "ignoring an unusable cached component: {e:#}")
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        if let Some(path) = &path
            && let Err(e) = store(&component, path)
        {
            tracing::warn!(path = %path.display(), "cannot cache a compiled component: {e:#}");
        }
        Ok((component, Origin::Compiled))
    }
}

#[allow(unsafe_code)]
fn deserialize(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // Read into memory rather than mapping the file: a cache file truncated or rewritten while in use would
    // otherwise crash the host with SIGBUS.
    let bytes = std::fs::read(path)?;
    // SAFETY: the file is one this cache wrote (atomically, by rename) into the user's own cache directory,
    // under a name that carries the engine's compatibility fingerprint; wasmtime checks the header and version.
    // Trusting the directory is the same trust as trusting the toolwright binary in the user's account.
    unsafe { Component::deserialize(engine, bytes) }
}

fn store(component: &Component, path: &Path) -> wasmtime::Result<()> {
    let bytes = component.serialize()?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    // Write to a temporary name and rename: a concurrent start never sees half a file.
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        std::process::id(),
        path.file_name().and_then(|n| n.to_str()).unwrap_or("c")
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}
