//! Project trust: a project's own plugins, handlers and policy come with the repository, so they do nothing
//! until the user trusts the project (`toolwright trust [DIR]`, as pi trusts a project's extensions).
//!
//! A trust is recorded in the user's config (`~/.config/toolwright/trusted-projects.toml`) by the project's
//! canonical path and the SHA-256 of what it ships ([`project_digest`]: every file below `.toolwright/`, the
//! project's `toolwright.toml` and `toolwright.lock`). What the project ships changing (a `git pull` bringing a
//! new plugin) ends the trust until the user trusts it again: [`check`] says which.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The files of a project that trust covers, besides everything below `.toolwright/` (where its own
/// `mcp.json` lies): its policy, its lockfile, and pi's MCP configuration, whose servers it would start.
const PROJECT_FILES: [&str; 3] = ["toolwright.toml", "toolwright.lock", ".pi/mcp.json"];

/// At most this many files below `.toolwright/` are hashed; a project with more is never trusted.
const MAX_FILES: usize = 10_000;

/// Whether a project is trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectTrust {
    /// It ships nothing trust would cover (no `.toolwright/`, no policy, no lockfile).
    Nothing,
    /// Trusted as it is now.
    Trusted,
    /// Never trusted.
    Untrusted,
    /// Trusted once, but what it ships changed since.
    Changed,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    #[serde(default, rename = "project")]
    projects: Vec<Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    path: String,
    sha256: String,
}

/// Where trusts are recorded: `trusted-projects.toml` in the user's config directory.
pub fn trust_file() -> Option<PathBuf> {
    crate::policy::config_dir().map(|c| c.join("trusted-projects.toml"))
}

/// Whether `project` ships anything trust covers.
pub fn ships_anything(project: &Path) -> bool {
    project.join(".toolwright").exists() || PROJECT_FILES.iter().any(|f| project.join(f).exists())
}

/// The SHA-256 (hex) of what `project` ships: every regular file below `.toolwright/` (by relative path, in
/// order) and symlink (by target), and the project's own `toolwright.toml`, `toolwright.lock` and `.pi/mcp.json`.
pub fn project_digest(project: &Path) -> io::Result<String> {
    let mut files = Vec::new();
    collect(&project.join(".toolwright"), Path::new(".toolwright"), &mut files)?;
    for name in PROJECT_FILES {
        let path = project.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            files.push((PathBuf::from(name), path));
        }
    }
    files.sort();
    let mut hasher = Sha256::new();
    for (relative, path) in &files {
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        let meta = std::fs::symlink_metadata(path)?;
        if meta.file_type().is_symlink() {
            hasher.update(b"symlink\0");
            hasher.update(std::fs::read_link(path)?.to_string_lossy().as_bytes());
        } else if meta.is_file() {
            hasher.update(b"file\0");
            let mut file = std::fs::File::open(path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            let mut buffer = vec![0; 1 << 16];
            loop {
                let n = file.read(&mut buffer)?;
                if n == 0 {
                    break;
                }
                hasher.update(&buffer[..n]);
            }
        } else {
            hasher.update(b"other\0");
        }
        hasher.update([0]);
    }
    Ok(hex(&hasher.finalize()))
}

fn collect(dir: &Path, relative: &Path, out: &mut Vec<(PathBuf, PathBuf)>) -> io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        let name = relative.join(entry.file_name());
        // Not followed: a symlink is hashed by its target's name, a directory is walked.
        if entry.file_type()?.is_dir() {
            collect(&path, &name, out)?;
        } else {
            out.push((name, path));
        }
        if out.len() > MAX_FILES {
            return Err(io::Error::other(format!(
                "{} holds more than {MAX_FILES} files",
                dir.display()
            )));
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(project: &Path) -> String {
    std::fs::canonicalize(project)
        .unwrap_or_else(|_| project.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

fn read(file: &Path) -> io::Result<TrustFile> {
    match std::fs::read_to_string(file) {
        Ok(text) => toml::from_str(&text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", file.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(TrustFile::default()),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", file.display()))),
    }
}

/// Whether `project` is trusted, by the trusts recorded in `file` (none: [`trust_file`]).
pub fn check_in(file: Option<&Path>, project: &Path) -> ProjectTrust {
    if !ships_anything(project) {
        return ProjectTrust::Nothing;
    }
    let path = canonical(project);
    let recorded = file
        .map(read)
        .transpose()
        .ok()
        .flatten()
        .unwrap_or_default()
        .projects
        .into_iter()
        .find(|e| e.path == path);
    let Some(entry) = recorded else {
        return ProjectTrust::Untrusted;
    };
    match project_digest(project) {
        Ok(digest) if digest == entry.sha256 => ProjectTrust::Trusted,
        _ => ProjectTrust::Changed,
    }
}

/// Whether `project` is trusted by the user's config.
pub fn check(project: &Path) -> ProjectTrust {
    check_in(trust_file().as_deref(), project)
}

/// The projects trusted in `file`, each with whether it is still trusted as it is now.
pub fn list_in(file: &Path) -> io::Result<Vec<(String, ProjectTrust)>> {
    Ok(read(file)?
        .projects
        .into_iter()
        .map(|e| {
            let state = check_in(Some(file), Path::new(&e.path));
            (e.path, state)
        })
        .collect())
}

/// Trust `project` as it is now, in `file`: its canonical path and digest. Returns the digest.
pub fn trust_in(file: &Path, project: &Path) -> io::Result<String> {
    let digest = project_digest(project)?;
    let path = canonical(project);
    let mut trusts = read(file)?;
    trusts.projects.retain(|e| e.path != path);
    trusts.projects.push(Entry {
        path,
        sha256: digest.clone(),
    });
    write(file, &trusts)?;
    Ok(digest)
}

/// Stop trusting `project`, in `file`. Returns whether it was trusted.
pub fn untrust_in(file: &Path, project: &Path) -> io::Result<bool> {
    let path = canonical(project);
    let mut trusts = read(file)?;
    let before = trusts.projects.len();
    trusts.projects.retain(|e| e.path != path);
    if trusts.projects.len() == before {
        return Ok(false);
    }
    write(file, &trusts)?;
    Ok(true)
}

/// Replace `file` with `trusts`: written to a new file beside it, then renamed over it.
fn write(file: &Path, trusts: &TrustFile) -> io::Result<()> {
    use std::io::Write as _;
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    let text = toml::to_string(trusts).map_err(io::Error::other)?;
    let temp = dir.join(format!(".trusted-projects.toml.{}.tmp", std::process::id()));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", temp.display())))?;
    let written = out
        .write_all(
            format!(
                "# Projects trusted with `toolwright trust`: their path and what they shipped then.\n{text}"
            )
            .as_bytes(),
        )
        .and_then(|()| out.sync_all())
        .and_then(|()| std::fs::rename(&temp, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display())))?;
    Ok(())
}

/// The one line `exec`, `mcp` and `tools` print when `project`'s own files were skipped (none when nothing was).
pub fn skipped_line(project: &Path, trust: &ProjectTrust) -> Option<String> {
    let why = match trust {
        ProjectTrust::Nothing | ProjectTrust::Trusted => return None,
        ProjectTrust::Untrusted => "the project is not trusted",
        ProjectTrust::Changed => "what the project ships changed since it was trusted",
    };
    let project = crate::text::escape(&project.to_string_lossy()).into_owned();
    Some(format!(
        "skipped the project's plugins and grants in {project} ({why}); `toolwright trust {project}` loads them"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trust_holds_until_what_the_project_ships_changes() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join("config/trusted-projects.toml");
        let project = tempfile::tempdir().unwrap();
        assert_eq!(check_in(Some(&file), project.path()), ProjectTrust::Nothing);
        std::fs::create_dir_all(project.path().join(".toolwright/plugins")).unwrap();
        std::fs::write(project.path().join(".toolwright/plugins/a.wasm"), b"one").unwrap();
        assert_eq!(check_in(Some(&file), project.path()), ProjectTrust::Untrusted);
        trust_in(&file, project.path()).unwrap();
        assert_eq!(check_in(Some(&file), project.path()), ProjectTrust::Trusted);
        // A new plugin, a changed policy, a changed plugin: each ends the trust.
        std::fs::write(project.path().join(".toolwright/plugins/b.wasm"), b"two").unwrap();
        assert_eq!(check_in(Some(&file), project.path()), ProjectTrust::Changed);
        trust_in(&file, project.path()).unwrap();
        std::fs::write(
            project.path().join("toolwright.toml"),
            "[plugins.a]\nspawn = [\"sh\"]\n",
        )
        .unwrap();
        assert_eq!(check_in(Some(&file), project.path()), ProjectTrust::Changed);
        trust_in(&file, project.path()).unwrap();
        std::fs::write(project.path().join(".toolwright/plugins/a.wasm"), b"ONE").unwrap();
        assert_eq!(check_in(Some(&file), project.path()), ProjectTrust::Changed);
        assert!(untrust_in(&file, project.path()).unwrap());
        assert_eq!(check_in(Some(&file), project.path()), ProjectTrust::Untrusted);
        assert!(!untrust_in(&file, project.path()).unwrap());
    }

    #[test]
    fn the_skipped_line_names_the_command_that_trusts() {
        let line = skipped_line(Path::new("/src/app"), &ProjectTrust::Untrusted).unwrap();
        assert_eq!(
            line,
            "skipped the project's plugins and grants in /src/app (the project is not trusted); `toolwright \
             trust /src/app` loads them"
        );
        assert_eq!(skipped_line(Path::new("/x"), &ProjectTrust::Trusted), None);
    }
}
