//! `toolwright plugins add|approve|update|remove`: installing plugins people can trust over time.
//!
//! `add` fetches a plugin (a `.wasm` file, or `oci://HOST/REPO:TAG` through [`super::oci`]), runs `toolwright check` on
//! it, shows its tools and every capability it requests with its reason, and asks which to grant (`--grant`,
//! `--yes`, or a terminal prompt; nothing by default). It installs the file into the user's plugin directory (the
//! project's with `--project`), writes the grant pinned by digest into the policy file (`[plugins.NAME]`, edited
//! in place with its comments kept), and records the approval in `toolwright.lock` beside it
//! (`toolwright::trust::lock`). At load a plugin that no longer matches its approval is held until `approve`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use toolwright::sdk::Capability;
use toolwright::text::escape;
use toolwright::trust::lock::{self, LockEntry, Lockfile};

/// `toolwright plugins` subcommands.
#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// Install a plugin from a `.wasm` file or an OCI registry (`oci://HOST/REPO:TAG`, `oci://HOST/REPO@sha256:…`),
    /// grant what you choose of what it requests, and record the approval.
    Add(AddArgs),
    /// Approve an installed plugin as it is now (after it changed), updating its pin and its lockfile entry.
    Approve(ApproveArgs),
    /// Fetch installed plugins again from their sources (re-resolving a tag); a changed plugin is held until
    /// approved.
    Update(UpdateArgs),
    /// Uninstall a plugin: its file, its policy section and its lockfile entry.
    Remove(RemoveArgs),
    /// Publish a plugin file to an OCI registry as a wasm artifact (the layout `wkg oci push` writes), after the
    /// checks of `toolwright check`.
    Publish(PublishArgs),
}

/// Arguments of `plugins publish`.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The `.wasm` file.
    file: PathBuf,
    /// Where to: `oci://HOST/REPO:TAG` (plain HTTP only for loopback).
    target: String,
    /// Where compiled plugins are cached (default: `$TOOLWRIGHT_CACHE_DIR` or `~/.cache/toolwright/components`).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

/// Where an installation goes.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Install into the project's `.toolwright/plugins` and its `toolwright.toml` instead of the user's.
    #[arg(long)]
    project: bool,
    /// The workspace, for `--project` (default: the current directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// The policy file to write the grant to (its `toolwright.lock` beside it), instead of the user's or the
    /// project's; load with `--policy FILE` to use it.
    #[arg(long = "policy", value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The plugin directory to install into, instead of the user's or the project's; load with `--plugins DIR`.
    #[arg(long = "dir", value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Where compiled plugins are cached (default: `$TOOLWRIGHT_CACHE_DIR` or `~/.cache/toolwright/components`).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

/// What to grant.
#[derive(Debug, Args)]
pub struct GrantArgs {
    /// Grant one capability: `read=PATH`, `write=PATH`, `spawn=PROGRAM`, `env=VAR`, `network=HOST:PORT`
    /// (repeatable).
    #[arg(long = "grant", value_name = "KIND=VALUE", value_parser = parse_grant)]
    grants: Vec<Capability>,
    /// Grant exactly what the plugin requests.
    #[arg(long)]
    yes: bool,
}

/// Arguments of `plugins add`.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// A `.wasm` file, or `oci://HOST/REPO:TAG` / `oci://HOST/REPO@sha256:DIGEST` (plain HTTP only for loopback).
    source: String,
    #[command(flatten)]
    grant: GrantArgs,
    #[command(flatten)]
    target: TargetArgs,
}

/// Arguments of `plugins approve`.
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The plugin's name.
    name: String,
    #[command(flatten)]
    grant: GrantArgs,
    #[command(flatten)]
    target: TargetArgs,
}

/// Arguments of `plugins update`.
#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The plugin to update (default: every plugin of the lockfile).
    name: Option<String>,
    #[command(flatten)]
    target: TargetArgs,
}

/// Arguments of `plugins remove`.
#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The plugin's name.
    name: String,
    #[command(flatten)]
    target: TargetArgs,
}

fn parse_grant(text: &str) -> Result<Capability, String> {
    let (kind, value) = text
        .split_once('=')
        .filter(|(_, v)| !v.is_empty())
        .ok_or_else(|| format!("`{text}` is not KIND=VALUE (read=., write=./out, spawn=git, env=HOME, …)"))?;
    let value = value.to_owned();
    Ok(match kind {
        "read" => Capability::Read(value),
        "write" => Capability::Write(value),
        "spawn" => Capability::Spawn(value),
        "env" => Capability::Env(value),
        "network" => Capability::Network(value),
        _ => {
            return Err(format!(
                "`{kind}` is not a capability (read, write, spawn, env or network)"
            ));
        }
    })
}

/// The files an installation touches.
struct Target {
    dir: PathBuf,
    policy: PathBuf,
    lock: PathBuf,
    cache_dir: Option<PathBuf>,
}

impl TargetArgs {
    fn resolve(&self) -> anyhow::Result<Target> {
        let (dir, policy) = if self.project {
            let cwd = super::workspace(self.cwd.clone())?;
            (
                toolwright::toolset::project_plugin_dir(&cwd),
                toolwright::policy::project_file(&cwd),
            )
        } else {
            let config = toolwright::policy::config_dir()
                .context("cannot find the user's config directory: set HOME or XDG_CONFIG_HOME")?;
            (config.join("plugins"), config.join("toolwright.toml"))
        };
        let absolute = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
        let dir = absolute(self.dir.clone().unwrap_or(dir));
        let policy = absolute(self.policy.clone().unwrap_or(policy));
        let lock = lock::beside(&policy);
        if self.project {
            // The project's files are the project's to choose: a link among them would send what the installer
            // writes (or reads as its own) elsewhere.
            let cwd = super::workspace(self.cwd.clone())?;
            for path in [&dir, &policy, &lock] {
                refuse_links(&cwd, path)?;
            }
        }
        Ok(Target {
            lock,
            dir,
            policy,
            cache_dir: Some(
                self.cache_dir
                    .clone()
                    .unwrap_or_else(toolwright::wasm::default_cache_dir),
            ),
        })
    }
}

/// Refuse `path` when it, or a directory between `root` and it, is a symbolic link.
fn refuse_links(root: &Path, path: &Path) -> anyhow::Result<()> {
    let Ok(below) = path.strip_prefix(root) else {
        return Ok(());
    };
    let mut at = root.to_path_buf();
    for part in below.components() {
        at.push(part);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            bail!(
                "{} is a symbolic link: the installer does not follow links in a project (replace it with the file \
                 or directory it points to)",
                at.display()
            );
        }
    }
    Ok(())
}

/// Run a `plugins` subcommand.
pub fn run(command: PluginsCommand) -> anyhow::Result<ExitCode> {
    match command {
        PluginsCommand::Add(args) => add(args),
        PluginsCommand::Approve(args) => approve(args),
        PluginsCommand::Update(args) => update(args),
        PluginsCommand::Remove(args) => remove(args),
        PluginsCommand::Publish(args) => publish(args),
    }
}

fn publish(args: PublishArgs) -> anyhow::Result<ExitCode> {
    let cache = Some(args.cache_dir.unwrap_or_else(toolwright::wasm::default_cache_dir));
    let plugin = checked(&args.file, cache)?;
    let bytes = std::fs::read(&args.file).with_context(|| format!("cannot read {}", args.file.display()))?;
    let digest = super::oci::push(&bytes, &args.target)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "published {} {} to {} ({digest}); install it with: toolwright plugins add {}",
        escape(&plugin.metadata.name),
        escape(&plugin.metadata.version),
        args.target,
        args.target
    )?;
    Ok(ExitCode::SUCCESS)
}

/// A plugin file fetched from its source into a temporary file of the plugin directory (created exclusively, to
/// be checked and then renamed into place), and what the source resolved to.
struct Fetched {
    /// The file, deleted unless it is persisted.
    staged: tempfile::NamedTempFile,
    /// Its SHA-256, lower-case hex.
    sha256: String,
    /// What the source resolved to, when it is not the file itself (an OCI manifest's digest).
    resolved: String,
    /// The source as recorded (a file path made absolute).
    source: String,
}

fn fetch(source: &str, dir: &Path) -> anyhow::Result<Fetched> {
    use sha2::Digest as _;
    use std::io::Read as _;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut staged = tempfile::Builder::new()
        .prefix(".adding-")
        .suffix(".wasm")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    let written = |staged: &tempfile::NamedTempFile| {
        staged
            .as_file()
            .sync_all()
            .with_context(|| format!("cannot write {}", staged.path().display()))
    };
    if source.starts_with("oci://") {
        let pulled = super::oci::pull(source, staged.as_file_mut())?;
        written(&staged)?;
        return Ok(Fetched {
            staged,
            sha256: pulled.sha256,
            resolved: pulled.manifest_digest,
            source: source.to_owned(),
        });
    }
    let path = std::path::absolute(source).unwrap_or_else(|_| PathBuf::from(source));
    // A FIFO or a device would block the open or never end: only a regular file is a plugin file.
    let meta = std::fs::metadata(&path).with_context(|| format!("cannot read {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    let file = std::fs::File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
    // Counted as it is copied, as a registry's layer is: the largest plugin is the same from either.
    let mut reader = file.take(super::oci::MAX_LAYER_BYTES + 1);
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = reader
            .read(&mut buffer)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > super::oci::MAX_LAYER_BYTES {
            bail!(
                "{} is larger than {} bytes, the most a plugin may be",
                path.display(),
                super::oci::MAX_LAYER_BYTES
            );
        }
        hasher.update(&buffer[..n]);
        staged
            .write_all(&buffer[..n])
            .with_context(|| format!("cannot write {}", staged.path().display()))?;
    }
    written(&staged)?;
    Ok(Fetched {
        staged,
        sha256: toolwright::trust::identity::hex(&hasher.finalize().into()),
        resolved: String::new(),
        source: path.to_string_lossy().into_owned(),
    })
}

/// Check the plugin file at `path` as `toolwright check` does, and load it: an error lists every problem.
fn checked(path: &Path, cache_dir: Option<PathBuf>) -> anyhow::Result<toolwright::wasm::Plugin> {
    let report = super::check::check(path, cache_dir.clone());
    if report["ok"] != true {
        let problems: Vec<String> = report["problems"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let what = escape(p["what"].as_str().unwrap_or_default()).into_owned();
                match p["fix"].as_str() {
                    Some(fix) => format!("{what} (fix: {fix})"),
                    None => what,
                }
            })
            .collect();
        bail!(
            "the plugin does not pass `toolwright check`:\n  {}",
            problems.join("\n  ")
        );
    }
    let host = toolwright::wasm::PluginHost::new(cache_dir)?;
    Ok(host.load_file(path)?)
}

/// What `plugin` offers and requests, for people.
fn show(out: &mut impl Write, plugin: &toolwright::wasm::Plugin) -> std::io::Result<()> {
    // Every word here is the plugin's own: escaped, so that it cannot print lines of its own or rewrite the ones
    // around it.
    let m = &plugin.metadata;
    writeln!(
        out,
        "{} {}: {}",
        escape(&m.name),
        escape(&m.version),
        escape(&m.description)
    )?;
    for tool in &plugin.tools {
        writeln!(
            out,
            "  tool {}: {}",
            escape(&tool.name),
            escape(first_line(&tool.description))
        )?;
    }
    if plugin.is_handler {
        writeln!(
            out,
            "  handler: sees every tool call and result (pi's tool_call / tool_result)"
        )?;
    }
    if m.capabilities.is_empty() {
        writeln!(out, "  requests: nothing")?;
    }
    for c in &m.capabilities {
        writeln!(
            out,
            "  requests: {} (because: {})",
            escape(&c.capability.describe()),
            escape(&c.reason)
        )?;
    }
    Ok(())
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// Which of `requested` to grant: `--yes` all, `--grant` those given, a terminal's answers, or nothing.
fn choose(grant: &GrantArgs, requested: &[&Capability]) -> anyhow::Result<Vec<Capability>> {
    if grant.yes {
        let mut all: Vec<Capability> = requested.iter().map(|c| (*c).clone()).collect();
        all.extend(grant.grants.iter().cloned());
        return Ok(all);
    }
    if !grant.grants.is_empty() || requested.is_empty() || !std::io::stdin().is_terminal() {
        return Ok(grant.grants.clone());
    }
    let mut granted = Vec::new();
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut ask = std::io::stderr().lock();
    for c in requested {
        write!(ask, "grant: {}? [y/N] ", escape(&c.describe()))?;
        ask.flush()?;
        let answer = lines.next().transpose()?.unwrap_or_default();
        if matches!(answer.trim(), "y" | "Y" | "yes") {
            granted.push((*c).clone());
        }
    }
    Ok(granted)
}

/// The policy file as an editable document (empty when it does not exist).
pub(super) fn policy_document(path: &Path) -> anyhow::Result<toml_edit::DocumentMut> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        bail!(
            "{} is a symbolic link: the installer edits only files it can replace (replace the link with the file \
             it points to)",
            path.display()
        );
    }
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .parse()
            .with_context(|| format!("{} is not valid TOML", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(toml_edit::DocumentMut::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

pub(super) fn save_policy(path: &Path, document: &toml_edit::DocumentMut) -> anyhow::Result<()> {
    let text = document.to_string();
    // What is written must still be a policy the host accepts.
    toolwright::policy::Policy::parse(path, &text)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    lock::replace_file(path, text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

/// `[plugins.NAME]` of `document`, made if missing.
fn section<'a>(document: &'a mut toml_edit::DocumentMut, name: &str) -> &'a mut toml_edit::Table {
    let plugins = document
        .entry("plugins")
        .or_insert_with(|| {
            let mut table = toml_edit::Table::new();
            table.set_implicit(true);
            toml_edit::Item::Table(table)
        })
        .as_table_mut()
        .expect("[plugins] is a table");
    plugins
        .entry(name)
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_mut()
        .expect("[plugins.NAME] is a table")
}

/// Add `granted` to `[plugins.NAME]` (keeping what is there) and pin it to `sha256`.
pub(super) fn grant_and_pin(
    document: &mut toml_edit::DocumentMut,
    name: &str,
    granted: &[Capability],
    sha256: &str,
) {
    let table = section(document, name);
    for c in granted {
        let (key, value) = (c.kind(), c.target());
        let array = table
            .entry(key)
            .or_insert_with(|| toml_edit::value(toml_edit::Array::new()))
            .as_array_mut();
        if let Some(array) = array
            && !array.iter().any(|e| e.as_str() == Some(value))
        {
            array.push(value);
        }
    }
    table.insert("sha256", toml_edit::value(sha256));
}

/// Add the host `address` to `[builtins] network` (keeping what is there, and every other key of the section: a
/// section that names only `network` keeps the built-ins' default file grants). An error when `builtins` or its
/// `network` is not what a policy has there.
pub(super) fn grant_builtins_network(
    document: &mut toml_edit::DocumentMut,
    address: &str,
) -> Result<(), String> {
    let table = document
        .entry("builtins")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_like_mut()
        .ok_or("`builtins` in the policy file is not a table")?;
    let array = table
        .entry("network")
        .or_insert(toml_edit::value(toml_edit::Array::new()))
        .as_array_mut()
        .ok_or("`[builtins] network` in the policy file is not an array")?;
    if !array.iter().any(|e| e.as_str() == Some(address)) {
        array.push(address);
    }
    Ok(())
}

fn load_lock(target: &Target) -> anyhow::Result<Lockfile> {
    Ok(Lockfile::load(&target.lock)?)
}

fn add(args: AddArgs) -> anyhow::Result<ExitCode> {
    let target = args.target.resolve()?;
    // Checked where it will be installed only once it passes: first as a temporary file.
    let fetched = fetch(&args.source, &target.dir)?;
    let plugin = checked(fetched.staged.path(), target.cache_dir.clone())?;
    let name = plugin.metadata.name.clone();
    // The name comes from the plugin: it names a file of the directory, or nothing is installed.
    let file = lock::installed_file(&target.dir, &name)?;
    let mut lock = load_lock(&target)?;
    if lock.plugins.contains_key(&name) {
        bail!(
            "{name} is already installed (from {}): `toolwright plugins update {name}` fetches it again, \
             `toolwright plugins remove {name}` uninstalls it",
            escape(&lock.plugins[&name].source)
        );
    }
    if std::fs::symlink_metadata(&file).is_ok() {
        bail!(
            "{} already exists and is not in {}: remove it first, or install under another directory",
            file.display(),
            target.lock.display()
        );
    }
    let mut out = std::io::stdout().lock();
    show(&mut out, &plugin)?;
    let requested: Vec<&Capability> = plugin
        .metadata
        .capabilities
        .iter()
        .map(|c| &c.capability)
        .collect();
    let granted = choose(&args.grant, &requested)?;
    // The entry describes the checked file, which is renamed into place unchanged.
    let mut entry = lock::entry(&plugin, &fetched.source);
    entry.resolved = fetched.resolved;
    entry.file = file.clone();
    drop(plugin);
    drop(
        fetched
            .staged
            .persist(&file)
            .map_err(|e| e.error)
            .with_context(|| format!("cannot write {}", file.display()))?,
    );
    let done = format!("installed {name} {} as {}", entry.version, file.display());
    record(&mut out, &target, &mut lock, &name, entry, &granted, &done)?;
    Ok(ExitCode::SUCCESS)
}

/// The file `name` is installed as, when the lockfile's entry names that very file: a lockfile (a project's
/// above all) never chooses what the installer deletes, writes or approves.
fn derived_file(target: &Target, name: &str, entry: Option<&LockEntry>) -> anyhow::Result<PathBuf> {
    let file = lock::installed_file(&target.dir, name)?;
    if let Some(entry) = entry
        && entry.file != file
    {
        bail!(
            "{}'s entry in {} names the file {}, not {} where the installer puts {name}: nothing was changed (edit \
             or remove the entry by hand)",
            name,
            target.lock.display(),
            escape(&entry.file.to_string_lossy()),
            file.display()
        );
    }
    Ok(file)
}

/// Record an approval of `entry`: its grants and pin in the policy, then the entry in the lockfile (in that
/// order: a grant without its lockfile entry runs unlocked; an entry without its grant would hold nothing).
/// `done` says what was done, before the grants are listed.
fn record(
    out: &mut impl Write,
    target: &Target,
    lock: &mut Lockfile,
    name: &str,
    entry: LockEntry,
    granted: &[Capability],
    done: &str,
) -> anyhow::Result<()> {
    let mut document = policy_document(&target.policy)?;
    let kept = section_grants(&document, name);
    grant_and_pin(&mut document, name, granted, &entry.sha256);
    save_policy(&target.policy, &document)?;
    writeln!(out, "{done}")?;
    report_grants(out, &kept, granted, target, &entry)?;
    lock.plugins.insert(name.to_owned(), entry);
    lock.save(&target.lock)?;
    Ok(())
}

/// What `[plugins.NAME]` of `document` grants already (each entry of its `read`, `write`, `spawn`, `env` and
/// `network` lists).
fn section_grants(document: &toml_edit::DocumentMut, name: &str) -> Vec<Capability> {
    let Some(table) = document
        .get("plugins")
        .and_then(|p| p.get(name))
        .and_then(toml_edit::Item::as_table_like)
    else {
        return Vec::new();
    };
    let mut grants = Vec::new();
    for key in ["read", "write", "spawn", "env", "network"] {
        let Some(array) = table.get(key).and_then(toml_edit::Item::as_array) else {
            continue;
        };
        for value in array.iter() {
            // A spawn rule with arguments is a table: shown as written.
            let text = value
                .as_str()
                .map_or_else(|| value.to_string().trim().to_owned(), str::to_owned);
            if let Ok(capability) = parse_grant(&format!("{key}={text}")) {
                grants.push(capability);
            }
        }
    }
    grants
}

/// The grants after an approval: those `kept` from before (an approval never takes one back), then those
/// `granted` now.
fn report_grants(
    out: &mut impl Write,
    kept: &[Capability],
    granted: &[Capability],
    target: &Target,
    entry: &LockEntry,
) -> std::io::Result<()> {
    let new: Vec<&Capability> = granted.iter().filter(|c| !kept.contains(c)).collect();
    if kept.is_empty() && new.is_empty() {
        writeln!(
            out,
            "granted: nothing (grant later with --grant, or edit {})",
            target.policy.display()
        )?;
    }
    for c in kept {
        writeln!(out, "granted: {} (as before)", escape(&c.describe()))?;
    }
    for c in new {
        writeln!(out, "granted: {}", escape(&c.describe()))?;
    }
    writeln!(
        out,
        "pinned: sha256 {} in {}; approval recorded in {}",
        entry.sha256,
        target.policy.display(),
        target.lock.display()
    )
}

fn approve(args: ApproveArgs) -> anyhow::Result<ExitCode> {
    let target = args.target.resolve()?;
    let mut lock = load_lock(&target)?;
    let name = &args.name;
    let Some(approved) = lock.plugins.get(name).cloned() else {
        bail!(
            "{name} is not in {} (installed plugins: {}); `toolwright plugins add FILE` installs one",
            target.lock.display(),
            names(&lock)
        );
    };
    let file = derived_file(&target, name, Some(&approved))?;
    let plugin = checked(&file, target.cache_dir.clone())?;
    if plugin.metadata.name != *name {
        bail!(
            "{} now calls itself `{}`, not `{name}`: remove it and add it again",
            file.display(),
            escape(&plugin.metadata.name)
        );
    }
    let mut entry = lock::entry(&plugin, &approved.source);
    // The file `plugins update` installed resolved to a new digest of its source: that is what is approved now.
    entry.resolved = match &approved.fetched {
        Some(fetched) if fetched.sha256 == entry.sha256 => fetched.resolved.clone(),
        _ => approved.resolved.clone(),
    };
    let changes = lock::changes(&approved, &entry);
    let mut out = std::io::stdout().lock();
    if changes.is_empty() {
        writeln!(out, "{name} is as approved; nothing to do")?;
    }
    for change in &changes {
        writeln!(out, "changed: {}", escape(&change.to_string()))?;
    }
    show(&mut out, &plugin)?;
    // Ask only about what is new; what was granted stays granted.
    let new: Vec<&Capability> = plugin
        .metadata
        .capabilities
        .iter()
        .map(|c| &c.capability)
        .filter(|c| !approved.capabilities.contains(&c.to_string()))
        .collect();
    let granted = choose(&args.grant, &new)?;
    let done = format!("approved {name} {}", entry.version);
    record(&mut out, &target, &mut lock, name, entry, &granted, &done)?;
    Ok(ExitCode::SUCCESS)
}

fn names(lock: &Lockfile) -> String {
    if lock.plugins.is_empty() {
        return "none".into();
    }
    lock.plugins.keys().cloned().collect::<Vec<_>>().join(", ")
}

fn update(args: UpdateArgs) -> anyhow::Result<ExitCode> {
    let target = args.target.resolve()?;
    let mut lock = load_lock(&target)?;
    let names: Vec<String> = match &args.name {
        Some(name) if !lock.plugins.contains_key(name) => {
            bail!(
                "{name} is not in {} (installed plugins: {})",
                target.lock.display(),
                names(&lock)
            )
        }
        Some(name) => vec![name.clone()],
        None => lock.plugins.keys().cloned().collect(),
    };
    let mut out = std::io::stdout().lock();
    let mut code = ExitCode::SUCCESS;
    for name in names {
        let entry = lock.plugins[&name].clone();
        let file = match derived_file(&target, &name, Some(&entry)) {
            Ok(file) => file,
            Err(e) => {
                writeln!(out, "{}: {e:#}", escape(&name))?;
                code = ExitCode::FAILURE;
                continue;
            }
        };
        let fetched = match fetch(&entry.source, &target.dir) {
            Ok(fetched) => fetched,
            Err(e) => {
                writeln!(out, "{name}: cannot fetch {}: {e:#}", escape(&entry.source))?;
                code = ExitCode::FAILURE;
                continue;
            }
        };
        let current = std::fs::read(&file).map(|b| toolwright::trust::identity::hex(&sha256(&b)));
        if current.as_deref().ok() == Some(fetched.sha256.as_str()) {
            writeln!(out, "{name}: up to date ({})", escape(&entry.source))?;
            continue;
        }
        // The new file replaces the old one, but the approval stays the old one's: the plugin is held until
        // approved (or approves itself under auto-approve = "same-surface").
        let staging = fetched.staged;
        let plugin = match checked(staging.path(), target.cache_dir.clone()) {
            Ok(plugin) => plugin,
            Err(e) => {
                writeln!(out, "{name}: the new file is not installed: {e:#}")?;
                code = ExitCode::FAILURE;
                continue;
            }
        };
        let found = lock::entry(&plugin, &entry.source);
        drop(plugin);
        if std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_symlink()) {
            writeln!(
                out,
                "{name}: {} is a symbolic link: the new file is not installed (remove the link)",
                file.display()
            )?;
            code = ExitCode::FAILURE;
            continue;
        }
        staging
            .persist(&file)
            .map_err(|e| e.error)
            .with_context(|| format!("cannot write {}", file.display()))?;
        writeln!(
            out,
            "{name}: updated {} from {}",
            file.display(),
            escape(&entry.source)
        )?;
        for change in lock::changes(&entry, &found) {
            writeln!(out, "  changed: {}", escape(&change.to_string()))?;
        }
        writeln!(out, "  held until approved: toolwright plugins approve {name}")?;
        // The approval stays the old file's; what the source resolved to now waits for `approve`.
        if let Some(held) = lock.plugins.get_mut(&name) {
            held.fetched = Some(lock::Fetched {
                resolved: fetched.resolved,
                sha256: found.sha256,
            });
        }
        lock.save(&target.lock)?;
    }
    Ok(code)
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

fn remove(args: RemoveArgs) -> anyhow::Result<ExitCode> {
    let target = args.target.resolve()?;
    let mut lock = load_lock(&target)?;
    let name = &args.name;
    let file = derived_file(&target, name, lock.plugins.get(name))?;
    let had_entry = lock.plugins.remove(name).is_some();
    let had_file = match std::fs::remove_file(&file) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", file.display())),
    };
    let mut document = policy_document(&target.policy)?;
    let had_section = document
        .get_mut("plugins")
        .and_then(toml_edit::Item::as_table_mut)
        .and_then(|t| t.remove(name))
        .is_some();
    if !(had_entry || had_file || had_section) {
        bail!("{name} is not installed (installed plugins: {})", names(&lock));
    }
    if had_section {
        save_policy(&target.policy, &document)?;
    }
    if had_entry {
        lock.save(&target.lock)?;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "removed {name}")?;
    if had_file {
        writeln!(out, "  deleted {}", file.display())?;
    }
    if had_section {
        writeln!(out, "  removed [plugins.{name}] from {}", target.policy.display())?;
    }
    if had_entry {
        writeln!(out, "  removed its approval from {}", target.lock.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(text: &str, address: &str) -> Result<String, String> {
        let mut document: toml_edit::DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
        grant_builtins_network(&mut document, address)?;
        Ok(document.to_string())
    }

    #[test]
    fn a_host_is_added_to_the_builtins_network_keeping_what_is_there() {
        assert_eq!(
            granted("", "pypi.org:443").unwrap(),
            "[builtins]\nnetwork = [\"pypi.org:443\"]\n"
        );
        let kept = granted(
            "# mine\n[ask]\ngrants = true\n\n[builtins]\nsandbox = \"read-only\"\nnetwork = [\"crates.io:443\"]\n",
            "pypi.org:443",
        )
        .unwrap();
        assert_eq!(
            kept,
            "# mine\n[ask]\ngrants = true\n\n[builtins]\nsandbox = \"read-only\"\nnetwork = [\"crates.io:443\", \
             \"pypi.org:443\"]\n"
        );
        // Once only, and an inline table is edited in place.
        assert_eq!(granted(&kept, "pypi.org:443").unwrap(), kept);
        let inline = granted("builtins = { sandbox = \"read-only\" }\n", "pypi.org:443").unwrap();
        let policy = toolwright::policy::Policy::parse(Path::new("p.toml"), &inline).unwrap();
        let builtins = policy.builtins.unwrap();
        assert_eq!(builtins.network, ["pypi.org:443"], "{inline}");
        assert_eq!(
            builtins.sandbox,
            Some(toolwright::native::sandbox::SandboxMode::ReadOnly),
            "{inline}"
        );
        assert!(inline.starts_with("builtins = {"), "{inline}");
    }

    #[test]
    fn a_builtins_key_that_is_not_what_a_policy_has_there_is_an_error() {
        assert_eq!(
            granted("builtins = 3\n", "pypi.org:443").unwrap_err(),
            "`builtins` in the policy file is not a table"
        );
        assert_eq!(
            granted("[builtins]\nnetwork = \"pypi.org:443\"\n", "x.org:443").unwrap_err(),
            "`[builtins] network` in the policy file is not an array"
        );
    }
}
