//! Filesystem grants: the directories a tool may read or write, enforced with cap-std.
//!
//! Every access resolves its absolute path to the most specific granted root that allows the access, then goes
//! through that root's `cap_std::fs::Dir`, so `..`, absolute symlinks and symlinks that leave the root cannot
//! escape it. A symlink may still lead to another place the tool was granted: such a path is re-checked at its
//! real location. A refused access is an error that says which grant would allow it.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use toolwright_sdk::{Access, FileKind, Files, Metadata, paths};

/// A directory granted to a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The directory (absolute).
    pub path: PathBuf,
    /// Whether the tool may create, write and delete below it (otherwise read only).
    pub write: bool,
}

impl Grant {
    /// Read-only access below `path`.
    pub fn read_only(path: impl Into<PathBuf>) -> Self {
        Grant {
            path: path.into(),
            write: false,
        }
    }

    /// Read-write access below `path`.
    pub fn read_write(path: impl Into<PathBuf>) -> Self {
        Grant {
            path: path.into(),
            write: true,
        }
    }
}

/// The built-ins' default grants: read anywhere the user can, write only inside the workspace (as Codex's
/// workspace-write mode).
pub fn builtin_default(cwd: &Path) -> Vec<Grant> {
    vec![Grant::read_only("/"), Grant::read_write(cwd)]
}

struct Root {
    path: String,
    write: bool,
    dir: Dir,
}

/// A set of opened grants: the [`Files`] a tool sees.
pub struct GrantedFiles {
    roots: Vec<Root>,
}

impl std::fmt::Debug for GrantedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let roots: Vec<_> = self
            .roots
            .iter()
            .map(|r| (&r.path, if r.write { "rw" } else { "ro" }))
            .collect();
        f.debug_struct("GrantedFiles").field("roots", &roots).finish()
    }
}

impl GrantedFiles {
    /// Open every granted directory. A grant whose directory cannot be opened is an error naming it.
    pub fn open(grants: &[Grant]) -> io::Result<Self> {
        let mut roots = Vec::with_capacity(grants.len());
        for grant in grants {
            let path = paths::normalize(&grant.path.to_string_lossy());
            let dir = Dir::open_ambient_dir(&path, ambient_authority()).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot open the granted directory {path}: {e}"))
            })?;
            roots.push(Root {
                path,
                write: grant.write,
                dir,
            });
        }
        Ok(GrantedFiles { roots })
    }

    /// The granted directories and whether each is writable.
    pub fn grants(&self) -> impl Iterator<Item = (&str, bool)> {
        self.roots.iter().map(|r| (r.path.as_str(), r.write))
    }

    /// The most specific root below which `path` lies and which allows `access`, and the path relative to it.
    fn locate(&self, path: &str, access: Access) -> io::Result<(&Dir, String)> {
        let path = paths::normalize(path);
        let best = self
            .roots
            .iter()
            .filter(|r| access == Access::Read || r.write)
            .filter_map(|r| relative_within(&r.path, &path).map(|rel| (r, rel)))
            .max_by_key(|(r, _)| r.path.len());
        match best {
            Some((root, rel)) => Ok((&root.dir, rel)),
            None => Err(self.refusal(&path, access)),
        }
    }

    fn refusal(&self, path: &str, access: Access) -> io::Error {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            refusal_text(self.grants(), path, access),
        )
    }

    /// Run `op` on the root and relative path for `path`; when cap-std refuses because a symlink leads out of
    /// the root, retry at the symlink's real location, which must itself be granted.
    fn with<T>(&self, path: &str, access: Access, op: impl Fn(&Dir, &str) -> io::Result<T>) -> io::Result<T> {
        let (dir, rel) = self.locate(path, access)?;
        match op(dir, &rel) {
            Err(e) if is_escape(&e) => {
                let real = std::fs::canonicalize(path).map_err(|_| e)?;
                let real = real.to_string_lossy();
                if real == path {
                    return Err(self.refusal(path, access));
                }
                let (dir, rel) = self.locate(&real, access)?;
                op(dir, &rel)
            }
            other => other,
        }
    }
}

/// Whether one of `roots` (absolute directories, and whether each is writable) allows `access` to `path`
/// (absolute, normalised).
pub fn covers<'a>(roots: impl IntoIterator<Item = (&'a str, bool)>, path: &str, access: Access) -> bool {
    roots
        .into_iter()
        .any(|(root, write)| (access == Access::Read || write) && relative_within(root, path).is_some())
}

/// The built-ins' refusal of `access` to `path` (absolute, normalised) under `roots` (absolute directories, and
/// whether each is writable): what is granted, and the grant that would allow it. Wasm plugins get the same
/// text from the host (`host.refusal`), so a refused access reads the same natively and in a sandbox.
pub fn refusal_text<'a>(
    roots: impl IntoIterator<Item = (&'a str, bool)>,
    path: &str,
    access: Access,
) -> String {
    let (what, kind) = match access {
        Access::Read => ("read", "read-only or read-write"),
        Access::Write => ("write", "read-write"),
    };
    let granted: Vec<&str> = roots
        .into_iter()
        .filter(|(_, write)| access == Access::Read || *write)
        .map(|(root, _)| root)
        .collect();
    let granted = if granted.is_empty() {
        "none".to_owned()
    } else {
        granted.join(", ")
    };
    let needed = if access == Access::Write {
        paths::parent(path)
    } else {
        path
    };
    format!(
        "Permission denied: {what} access to {path} is not granted (granted for {what}: {granted}). \
         A {kind} grant of {needed} in the policy file (toolwright.toml) would allow it."
    )
}

/// `path` relative to `root` (`.` for the root itself), if it lies below it.
fn relative_within(root: &str, path: &str) -> Option<String> {
    if root == "/" {
        let rel = path.trim_start_matches('/');
        return Some(if rel.is_empty() {
            ".".into()
        } else {
            rel.to_owned()
        });
    }
    let rest = path.strip_prefix(root)?;
    if rest.is_empty() {
        return Some(".".into());
    }
    rest.strip_prefix('/').map(str::to_owned)
}

/// cap-std's refusal of a path that leads outside its directory.
fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.to_string().contains("outside of the filesystem")
}

fn kind_of(file_type: cap_std::fs::FileType) -> FileKind {
    if file_type.is_dir() {
        FileKind::Dir
    } else if file_type.is_file() {
        FileKind::File
    } else if file_type.is_symlink() {
        FileKind::Symlink
    } else {
        FileKind::Other
    }
}

/// Open `rel` for `access` without blocking: `O_NONBLOCK` keeps `open()` of a FIFO from waiting for the other
/// end (a call's deadline could not end that wait: the thread is inside the kernel), and what is opened must be
/// a regular file (or a directory, which fails as Node's `EISDIR` when read), never a pipe, socket or device.
fn open_regular(dir: &Dir, rel: &str, path: &str, access: Access) -> io::Result<cap_std::fs::File> {
    use cap_std::fs::{OpenOptions, OpenOptionsExt};
    let mut options = OpenOptions::new();
    match access {
        Access::Read => options.read(true),
        Access::Write => options.write(true).create(true).truncate(true),
    };
    options.custom_flags(libc::O_NONBLOCK);
    // A FIFO opened for writing without a reader fails with ENXIO: refused with the same text.
    let file = match dir.open_with(rel, &options) {
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return Err(toolwright_sdk::not_a_regular_file(path, access));
        }
        other => other?,
    };
    let kind = file.metadata()?.file_type();
    if kind.is_file() || kind.is_dir() {
        Ok(file)
    } else {
        Err(toolwright_sdk::not_a_regular_file(path, access))
    }
}

impl Files for GrantedFiles {
    fn read(&self, path: &str) -> io::Result<Vec<u8>> {
        self.with(path, Access::Read, |dir, rel| {
            let mut file = open_regular(dir, rel, path, Access::Read)?;
            let mut buf = Vec::new();
            file.read_to_end(&mut buf)?;
            Ok(buf)
        })
    }

    fn read_prefix(&self, path: &str, max: usize) -> io::Result<Vec<u8>> {
        self.with(path, Access::Read, |dir, rel| {
            let file = open_regular(dir, rel, path, Access::Read)?;
            let mut buf = Vec::with_capacity(max.min(1 << 16));
            file.take(max as u64).read_to_end(&mut buf)?;
            Ok(buf)
        })
    }

    fn write(&self, path: &str, bytes: &[u8]) -> io::Result<()> {
        self.with(path, Access::Write, |dir, rel| {
            // A pipe, socket or device is refused before `O_TRUNC` could reach it.
            if dir.metadata(rel).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
                return Err(toolwright_sdk::not_a_regular_file(path, Access::Write));
            }
            open_regular(dir, rel, path, Access::Write)?.write_all(bytes)
        })
    }

    fn create_dir_all(&self, path: &str) -> io::Result<()> {
        self.with(path, Access::Write, |dir, rel| {
            if rel == "." {
                Ok(())
            } else {
                dir.create_dir_all(rel)
            }
        })
    }

    fn metadata(&self, path: &str) -> io::Result<Metadata> {
        self.with(path, Access::Read, |dir, rel| {
            let m = dir.metadata(rel)?;
            Ok(Metadata {
                kind: kind_of(m.file_type()),
                len: m.len(),
            })
        })
    }

    fn symlink_metadata(&self, path: &str) -> io::Result<Metadata> {
        self.with(path, Access::Read, |dir, rel| {
            let m = dir.symlink_metadata(rel)?;
            Ok(Metadata {
                kind: kind_of(m.file_type()),
                len: m.len(),
            })
        })
    }

    fn read_dir(&self, path: &str) -> io::Result<Vec<String>> {
        self.with(path, Access::Read, |dir, rel| {
            dir.read_dir(rel)?
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect()
        })
    }

    fn check(&self, path: &str, access: Access) -> io::Result<String> {
        self.with(path, access, |dir, rel| dir.symlink_metadata(rel).map(|_| ()))
            .or_else(|e| {
                if e.kind() == io::ErrorKind::NotFound {
                    Ok(())
                } else {
                    Err(e)
                }
            })?;
        Ok(paths::normalize(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, GrantedFiles, String) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(tmp.path().join("outside.txt"), "secret").unwrap();
        let files = GrantedFiles::open(&[Grant::read_write(&ws)]).unwrap();
        let ws = ws.to_string_lossy().into_owned();
        (tmp, files, ws)
    }

    #[test]
    fn reads_and_writes_inside_the_grant() {
        let (_tmp, files, ws) = workspace();
        files.create_dir_all(&format!("{ws}/a/b")).unwrap();
        files.write(&format!("{ws}/a/b/f.txt"), b"hi").unwrap();
        assert_eq!(files.read(&format!("{ws}/a/b/f.txt")).unwrap(), b"hi");
        assert!(files.metadata(&format!("{ws}/a")).unwrap().is_dir());
        assert_eq!(files.read_dir(&format!("{ws}/a")).unwrap(), ["b"]);
    }

    /// A FIFO would block `open()` until a writer (or reader) comes, where no deadline can end the wait: refused
    /// at once, read and written, and nothing else changes.
    #[test]
    fn fifos_and_devices_are_refused_without_blocking() {
        let (_tmp, files, ws) = workspace();
        let fifo = format!("{ws}/pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let started = std::time::Instant::now();
        let text = |e: io::Error| e.to_string();
        let read = format!(
            "Not a regular file: {fifo} (pipes, sockets and devices are not read: they can block without end)"
        );
        assert_eq!(files.read(&fifo).map_err(text).unwrap_err(), read);
        assert_eq!(files.read_prefix(&fifo, 10).map_err(text).unwrap_err(), read);
        let write = format!(
            "Not a regular file: {fifo} (pipes, sockets and devices are not written: they can block without end)"
        );
        assert_eq!(files.write(&fifo, b"x").map_err(text).unwrap_err(), write);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        files.write(&format!("{ws}/f"), b"ok").unwrap();
        assert_eq!(files.read(&format!("{ws}/f")).unwrap(), b"ok");
        let dir = files.read(&ws).unwrap_err();
        assert_eq!(dir.kind(), io::ErrorKind::IsADirectory);
    }

    #[test]
    fn dot_dot_and_absolute_paths_outside_are_refused_with_the_grant_that_would_allow_them() {
        let (tmp, files, ws) = workspace();
        let outside = tmp.path().join("outside.txt").to_string_lossy().into_owned();
        let err = files.read(&format!("{ws}/../outside.txt")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert!(
            err.to_string()
                .contains(&format!("read access to {outside} is not granted")),
            "{err}"
        );
        assert!(err.to_string().contains(&format!("grant of {outside}")), "{err}");
        let err = files.write(&outside, b"x").unwrap_err();
        assert!(err.to_string().contains("read-write grant of"), "{err}");
    }

    #[test]
    fn symlinks_cannot_leave_the_grant() {
        let (tmp, files, ws) = workspace();
        std::os::unix::fs::symlink(tmp.path().join("outside.txt"), format!("{ws}/link")).unwrap();
        std::os::unix::fs::symlink("../outside.txt", format!("{ws}/rel")).unwrap();
        for link in ["link", "rel"] {
            let err = files.read(&format!("{ws}/{link}")).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{link}: {err}");
            assert!(files.write(&format!("{ws}/{link}"), b"x").is_err());
        }
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("outside.txt")).unwrap(),
            "secret"
        );
    }

    #[test]
    fn read_only_roots_refuse_writes_and_the_most_specific_root_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let files = GrantedFiles::open(&builtin_default(tmp.path())).unwrap();
        let inside = format!("{}/new.txt", tmp.path().display());
        files.write(&inside, b"ok").unwrap();
        let err = files.write("/etc/toolwright-test", b"x").unwrap_err();
        assert!(
            err.to_string()
                .contains("write access to /etc/toolwright-test is not granted"),
            "{err}"
        );
        assert!(files.metadata("/etc").unwrap().is_dir());
    }
}
