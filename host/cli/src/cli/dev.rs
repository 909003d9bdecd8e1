//! `toolwright dev [DIR]`: the authors' loop in one command. The plugin project in DIR (one `toolwright new`
//! made, in any of its languages) is built by its `build.sh`, served over MCP as `toolwright mcp` serves (stdio, or
//! `--http`) with the build loaded ahead of the installed plugin of its name and under that plugin's approved
//! grants (`toolwright::toolset::DevBuild`), and built again whenever its sources change: the server reloads the
//! new build and tells its clients (`notifications/tools/list_changed`). No `plugins update` or `approve` per
//! rebuild.
//!
//! - [`Project`]: the directory, its build script and the file the build writes (`NAME.wasm`, NAME from
//!   `Cargo.toml`, `pyproject.toml` or `package.json` with `-` as `_`, as the templates name it).
//! - [`Sources`]: what the project's files are now (each file's digest), skipping what its `.gitignore` files
//!   ignore, hidden files and `*.wasm`: a build that writes them does not set off another.
//! - [`Builds`]: the latest good build, shared with the server's reload; the build thread replaces it.
//!
//! The build runs outside the sandbox, with the user's authority, so no tool the server serves may write the
//! project: `dev` refuses to start when the built-ins may (the project inside the workspace or the temporary
//! directory) unless `--tools-may-edit` says they may, and a plugin or MCP server granted to write it is not
//! loaded.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use clap::Args;
use toolwright::toolset::DevBuild;

/// Arguments of `toolwright dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// The plugin project (default: the current directory): a project `toolwright new` made, built by its
    /// `build.sh`.
    dir: Option<PathBuf>,
    /// How often to look for changed sources, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    watch_sources: u64,
    /// Let the tools served write the project (it lies in their workspace): each rebuild then runs what they
    /// wrote, outside the sandbox. Without it, `dev` refuses such a workspace.
    #[arg(long)]
    tools_may_edit: bool,
    #[command(flatten)]
    mcp: super::mcp::McpArgs,
}

/// A plugin project: where it is, and the file its build writes.
#[derive(Debug, Clone)]
pub struct Project {
    /// The directory (absolute).
    pub dir: PathBuf,
    /// The file its build writes: `DIR/NAME.wasm`.
    pub output: PathBuf,
}

impl Project {
    /// The project in `dir`: it has a `build.sh` and names its plugin in `Cargo.toml`, `pyproject.toml` or
    /// `package.json`.
    pub fn find(dir: &Path) -> anyhow::Result<Project> {
        let dir = dir
            .canonicalize()
            .with_context(|| format!("the plugin project {}", dir.display()))?;
        if !dir.join("build.sh").is_file() {
            bail!(
                "{} has no build.sh: `toolwright dev` builds a plugin project `toolwright new` made (its build.sh \
                 writes NAME.wasm beside it)",
                dir.display()
            );
        }
        let name = plugin_name(&dir)?;
        let output = dir.join(format!("{}.wasm", name.replace('-', "_")));
        Ok(Project { dir, output })
    }

    /// Run the build: its output goes to stderr (stdout may be the MCP stream). The file it wrote, or why not.
    fn build(&self) -> anyhow::Result<Vec<u8>> {
        let started = SystemTime::now();
        let stdout = {
            use std::os::fd::AsFd as _;
            std::io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .context("cannot pass stderr to the build")?
        };
        let status = Command::new(self.dir.join("build.sh"))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .status()
            .with_context(|| format!("cannot run {}", self.dir.join("build.sh").display()))?;
        if !status.success() {
            bail!(
                "the build failed ({status}): {}",
                self.dir.join("build.sh").display()
            );
        }
        let written = std::fs::metadata(&self.output)
            .and_then(|m| m.modified())
            .is_ok_and(|modified| modified >= started - Duration::from_secs(1));
        if !written {
            bail!(
                "the build succeeded but did not write {} (the file `toolwright dev` loads: NAME.wasm beside \
                 build.sh, NAME as the project's manifest spells it with `-` as `_`)",
                self.output.display()
            );
        }
        std::fs::read(&self.output).with_context(|| format!("cannot read {}", self.output.display()))
    }
}

/// The plugin's name as the project's manifest gives it.
fn plugin_name(dir: &Path) -> anyhow::Result<String> {
    let toml_name = |file: &str, table: &str| -> Option<String> {
        let text = std::fs::read_to_string(dir.join(file)).ok()?;
        let document: toml_edit::DocumentMut = text.parse().ok()?;
        document.get(table)?.get("name")?.as_str().map(str::to_owned)
    };
    let json_name = || -> Option<String> {
        let text = std::fs::read_to_string(dir.join("package.json")).ok()?;
        let value: serde_json::Value = serde_json::from_str(&text).ok()?;
        value["name"].as_str().map(str::to_owned)
    };
    toml_name("Cargo.toml", "package")
        .or_else(|| toml_name("pyproject.toml", "project"))
        .or_else(json_name)
        .filter(|name| toolwright::trust::lock::check_name(name).is_ok())
        .with_context(|| {
            format!(
                "{} names no plugin: `toolwright dev` reads the name from Cargo.toml ([package] name), \
                 pyproject.toml ([project] name) or package.json (name)",
                dir.display()
            )
        })
}

/// What the project's sources are now: each file's size, modification time and digest, by path.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sources {
    files: std::collections::BTreeMap<PathBuf, (u64, Option<SystemTime>, [u8; 32])>,
}

impl Sources {
    /// The project's files now, skipping what its `.gitignore` files ignore, hidden files (`.git`, `.venv`) and
    /// plugin files. A file whose size and time are as `before` has keeps its digest unread.
    pub fn scan(dir: &Path, before: &Sources) -> Sources {
        let mut overrides = ignore::overrides::OverrideBuilder::new(dir);
        for pattern in ["!*.wasm", "!target/", "!node_modules/", "!__pycache__/"] {
            // Patterns of our own: they parse.
            let _ = overrides.add(pattern);
        }
        let walk = ignore::WalkBuilder::new(dir)
            .require_git(false)
            .overrides(
                overrides
                    .build()
                    .unwrap_or_else(|_| ignore::overrides::Override::empty()),
            )
            .build();
        let mut files = std::collections::BTreeMap::new();
        for entry in walk.flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.into_path();
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let (size, modified) = (meta.len(), meta.modified().ok());
            let digest = match before.files.get(&path) {
                Some((s, m, digest)) if *s == size && *m == modified => *digest,
                _ => match std::fs::read(&path) {
                    Ok(bytes) => {
                        use sha2::Digest as _;
                        sha2::Sha256::digest(&bytes).into()
                    }
                    Err(_) => continue,
                },
            };
            files.insert(path, (size, modified, digest));
        }
        Sources { files }
    }

    /// Whether the files and their contents are the same as `other`'s (times aside: a file written again with
    /// the same bytes is no change).
    pub fn same_as(&self, other: &Sources) -> bool {
        self.files.len() == other.files.len()
            && self
                .files
                .iter()
                .zip(&other.files)
                .all(|((a, (_, _, x)), (b, (_, _, y)))| a == b && x == y)
    }

    /// A file that differs from `other`, for people.
    fn changed<'a>(&'a self, other: &'a Sources) -> Option<&'a Path> {
        self.files
            .iter()
            .find(|(path, (_, _, digest))| other.files.get(*path).is_none_or(|(_, _, d)| d != digest))
            .map(|(path, _)| path.as_path())
            .or_else(|| {
                other
                    .files
                    .keys()
                    .find(|p| !self.files.contains_key(*p))
                    .map(PathBuf::as_path)
            })
    }
}

/// The latest good build of the project, shared by the build thread and the server's reload.
#[derive(Debug, Clone)]
pub struct Builds(Arc<Mutex<DevBuild>>);

impl Builds {
    /// The latest good build.
    pub fn current(&self) -> DevBuild {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Where the builds are copied for loading: a directory of this process's own, so that what is loaded is what the
/// build wrote even if the project's file changes meanwhile (its digest is checked at each load too).
struct Staging {
    dir: tempfile::TempDir,
    /// Builds staged so far: build N goes to `dir/N/`.
    count: u64,
    project: Project,
    guarded: bool,
    cache_dir: Option<PathBuf>,
}

impl Staging {
    /// Staging for the builds of `project` in a fresh directory of this process's, their components compiled into
    /// `cache_dir` (none: the default cache); `guarded`: the tools may not edit the project.
    fn new(project: Project, guarded: bool, cache_dir: Option<PathBuf>) -> anyhow::Result<Self> {
        Ok(Staging {
            count: 0,
            dir: tempfile::Builder::new()
                .prefix("toolwright-dev-")
                .tempdir()
                .context("cannot create the dev build's directory")?,
            project,
            guarded,
            cache_dir: Some(cache_dir.unwrap_or_else(toolwright::wasm::default_cache_dir)),
        })
    }

    /// Build, check the file as `toolwright check` does, and stage it.
    ///
    /// Each build gets a directory of its own, so a build never replaces the file of the one the server may be
    /// loading; the build before the last is deleted.
    fn build(&mut self) -> anyhow::Result<DevBuild> {
        let started = Instant::now();
        let bytes = self.project.build()?;
        let name = self
            .project
            .output
            .file_name()
            .context("the build's file has no name")?;
        self.count += 1;
        let dir = self.dir.path().join(self.count.to_string());
        std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        if let Some(old) = self.count.checked_sub(2) {
            let _ = std::fs::remove_dir_all(self.dir.path().join(old.to_string()));
        }
        let file = dir.join(name);
        toolwright::trust::lock::replace_file(&file, &bytes)
            .with_context(|| format!("cannot write {}", file.display()))?;
        let report = super::check::check(&file, self.cache_dir.clone());
        if report["ok"] != true {
            let problems: Vec<String> = report["problems"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| toolwright::text::escape(p["what"].as_str().unwrap_or_default()).into_owned())
                .collect();
            bail!(
                "the build does not pass `toolwright check`: {}",
                problems.join("; ")
            );
        }
        if report["kind"] == "handler" && self.count > 1 {
            say(
                "this is a handler plugin: the server reloads its tools, but its hooks stay those of the build it \
                 started with; restart `toolwright dev` to run this build's hooks",
            );
        }
        let sha256 = {
            use sha2::Digest as _;
            toolwright::trust::identity::hex(&sha2::Sha256::digest(&bytes).into())
        };
        say(&format!(
            "built {} ({} bytes) in {:.1} s",
            self.project.output.display(),
            bytes.len(),
            started.elapsed().as_secs_f64()
        ));
        Ok(DevBuild {
            project: self.project.dir.clone(),
            file,
            sha256,
            guarded: self.guarded,
        })
    }
}

/// Build the project in `dir` once (`toolwright exec --dev DIR`): the build, and the directory holding it, which
/// goes when dropped. Nothing rebuilds it while the batch runs, so the project is not kept from the tools' writes.
pub fn build_once(dir: &Path, cache_dir: Option<PathBuf>) -> anyhow::Result<(DevBuild, tempfile::TempDir)> {
    let mut staging = Staging::new(Project::find(dir)?, false, cache_dir)?;
    let build = staging.build()?;
    Ok((build, staging.dir))
}

#[allow(clippy::print_stderr)]
fn say(line: &str) {
    eprintln!("toolwright dev: {line}");
}

/// Whether the built-in tools served in `cwd` under `tools`' policy may write `project`: which write grant does.
fn writable_by_builtins(
    tools: &super::ToolArgs,
    cwd: &Path,
    project: &Path,
) -> anyhow::Result<Option<String>> {
    let options = tools.options(cwd);
    let policy = toolwright::toolset::load_policy(&options, &toolwright::native::HostEnv::current())?;
    let Some(dirs) = toolwright::toolset::builtin_write_dirs(&options, &policy) else {
        return Ok(Some(
            "the built-ins' sandbox is off (sandbox = \"off\"): bash's programs write anywhere".into(),
        ));
    };
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
    Ok(dirs
        .iter()
        .find(|dir| real(project).starts_with(real(dir)))
        .map(|dir| format!("the built-in tools may write {}", dir.display())))
}

pub fn run(args: DevArgs) -> anyhow::Result<ExitCode> {
    let project = Project::find(args.dir.as_deref().unwrap_or(Path::new(".")))?;
    let cwd = super::workspace(args.mcp.cwd.clone())?;
    if !args.tools_may_edit
        && let Some(why) = writable_by_builtins(&args.mcp.tools, &cwd, &project.dir)?
    {
        bail!(
            "{why}, and so the plugin project {}: `toolwright dev` builds it again outside the sandbox whenever it \
             changes, so what a tool wrote there would run with your authority. Serve another workspace \
             (`--cwd DIR`, outside the project and the temporary directory), or let the tools edit the project \
             with `--tools-may-edit`",
            project.dir.display()
        );
    }
    let mut staging = Staging::new(
        project.clone(),
        !args.tools_may_edit,
        args.mcp.tools.cache_dir.clone(),
    )?;
    let mut sources = Sources::scan(&project.dir, &Sources::default());
    let first = staging.build()?;
    say(&format!(
        "serving {} ahead of any installed plugin of its name; editing {} builds and reloads it",
        first.file.display(),
        project.dir.display()
    ));
    let builds = Builds(Arc::new(Mutex::new(first)));
    let interval = Duration::from_millis(args.watch_sources.max(50));
    {
        let builds = builds.clone();
        // Lives as long as the process: the server ending ends it.
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(interval);
                let now = Sources::scan(&staging.project.dir, &sources);
                if now.same_as(&sources) {
                    continue;
                }
                if let Some(changed) = now.changed(&sources) {
                    say(&format!("{} changed: building", changed.display()));
                }
                // What the build saw: a file changed while it ran sets off the next one.
                sources = now;
                match staging.build() {
                    Ok(build) => *builds.0.lock().unwrap_or_else(PoisonError::into_inner) = build,
                    Err(error) => say(&format!("{error:#}; still serving the last build")),
                }
                let _ = std::io::stderr().flush();
            }
        });
    }
    super::mcp::serve(args.mcp, Some(builds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    #[test]
    fn a_source_edit_is_a_change_and_what_a_build_writes_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, ".gitignore", "/dist\nCargo.lock\n");
        write(root, "src/lib.rs", "fn a() {}");
        write(root, "Cargo.toml", "[package]\nname = \"my-tool\"\n");
        let before = Sources::scan(root, &Sources::default());
        // What a build writes: the plugin file, target/, ignored files, hidden ones.
        write(root, "my_tool.wasm", "\0asm");
        write(root, "target/debug/x", "x");
        write(root, "dist/out.js", "x");
        write(root, "Cargo.lock", "x");
        write(root, ".venv/bin/python", "x");
        write(root, "node_modules/m/index.js", "x");
        // A file written again with the same bytes.
        write(root, "src/lib.rs", "fn a() {}");
        let after = Sources::scan(root, &before);
        assert!(after.same_as(&before), "{after:?}");
        // An edit, a new file, a removed one.
        write(root, "src/lib.rs", "fn b() {}");
        let edited = Sources::scan(root, &after);
        assert!(!edited.same_as(&after));
        assert_eq!(edited.changed(&after), Some(root.join("src/lib.rs").as_path()));
        write(root, "src/new.rs", "");
        assert!(!Sources::scan(root, &edited).same_as(&edited));
        std::fs::remove_file(root.join("src/new.rs")).unwrap();
        assert!(Sources::scan(root, &edited).same_as(&edited));
    }

    #[test]
    fn the_file_a_project_builds_is_named_by_its_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let error = Project::find(root).unwrap_err().to_string();
        assert!(error.contains("has no build.sh"), "{error}");
        write(root, "build.sh", "");
        let error = format!("{:#}", Project::find(root).unwrap_err());
        assert!(error.contains("names no plugin"), "{error}");
        write(root, "package.json", r#"{"name": "my-tool"}"#);
        assert_eq!(
            Project::find(root).unwrap().output,
            root.canonicalize().unwrap().join("my_tool.wasm")
        );
        write(root, "pyproject.toml", "[project]\nname = \"py-tool\"\n");
        assert!(Project::find(root).unwrap().output.ends_with("py_tool.wasm"));
        // A name that is a path names no file of the project.
        write(root, "Cargo.toml", "[package]\nname = \"../../evil\"\n");
        assert!(Project::find(root).is_err());
    }
}
