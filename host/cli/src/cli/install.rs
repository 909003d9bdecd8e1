//! `toolwright plugins add|approve|update|remove`: installing plugins people can trust over time.
//!
//! `add` fetches a plugin (a `.wasm` file, or `oci://HOST/REPO:TAG` through [`super::oci`]), runs `toolwright check` on
//! it, shows its tools and every capability it requests with its reason, and asks which to grant (`--grant`,
//! `--yes`, or a terminal prompt; nothing by default). It installs the file into the user's plugin directory (the
//! project's with `--project`), writes the grant pinned by digest into the policy file (`[plugins.NAME]`, edited
//! in place with its comments kept), and records the approval in `toolwright.lock` beside it
//! (`toolwright::wasm::lock`). At load a plugin that no longer matches its approval is held until `approve`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use toolwright::sdk::Capability;
use toolwright::wasm::lock::{self, LockEntry, Lockfile};

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
        let dir = self.dir.clone().unwrap_or(dir);
        let policy = self.policy.clone().unwrap_or(policy);
        Ok(Target {
            lock: lock::beside(&policy),
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
        plugin.metadata.name, plugin.metadata.version, args.target, args.target
    )?;
    Ok(ExitCode::SUCCESS)
}

/// A plugin file fetched from its source: its bytes and what the source resolved to.
struct Fetched {
    bytes: Vec<u8>,
    /// What the source resolved to, when it is not the file itself (an OCI manifest's digest).
    resolved: String,
    /// The source as recorded (a file path made absolute).
    source: String,
}

fn fetch(source: &str) -> anyhow::Result<Fetched> {
    if source.starts_with("oci://") {
        let pulled = super::oci::pull(source)?;
        return Ok(Fetched {
            bytes: pulled.bytes,
            resolved: pulled.manifest_digest,
            source: source.to_owned(),
        });
    }
    let path = std::path::absolute(source).unwrap_or_else(|_| PathBuf::from(source));
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(Fetched {
        bytes,
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
            .map(|p| match p["fix"].as_str() {
                Some(fix) => format!("{} (fix: {fix})", p["what"].as_str().unwrap_or_default()),
                None => p["what"].as_str().unwrap_or_default().to_owned(),
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
    let m = &plugin.metadata;
    writeln!(out, "{} {}: {}", m.name, m.version, m.description)?;
    for tool in &plugin.tools {
        writeln!(out, "  tool {}: {}", tool.name, first_line(&tool.description))?;
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
            super::plugins::describe(&c.capability),
            c.reason
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
        write!(ask, "grant: {}? [y/N] ", super::plugins::describe(c))?;
        ask.flush()?;
        let answer = lines.next().transpose()?.unwrap_or_default();
        if matches!(answer.trim(), "y" | "Y" | "yes") {
            granted.push((*c).clone());
        }
    }
    Ok(granted)
}

/// The policy file as an editable document (empty when it does not exist).
fn policy_document(path: &Path) -> anyhow::Result<toml_edit::DocumentMut> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .parse()
            .with_context(|| format!("{} is not valid TOML", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(toml_edit::DocumentMut::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn save_policy(path: &Path, document: &toml_edit::DocumentMut) -> anyhow::Result<()> {
    let text = document.to_string();
    // What is written must still be a policy the host accepts.
    toolwright::policy::Policy::parse(path, &text)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let temp = path.with_extension("toml.tmp");
    std::fs::write(&temp, text).with_context(|| format!("cannot write {}", temp.display()))?;
    std::fs::rename(&temp, path).with_context(|| format!("cannot write {}", path.display()))
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
fn grant_and_pin(document: &mut toml_edit::DocumentMut, name: &str, granted: &[Capability], sha256: &str) {
    let table = section(document, name);
    for c in granted {
        let (key, value) = match c {
            Capability::Read(v) => ("read", v),
            Capability::Write(v) => ("write", v),
            Capability::Spawn(v) => ("spawn", v),
            Capability::Env(v) => ("env", v),
            Capability::Network(v) => ("network", v),
        };
        let array = table
            .entry(key)
            .or_insert_with(|| toml_edit::value(toml_edit::Array::new()))
            .as_array_mut();
        if let Some(array) = array
            && !array.iter().any(|e| e.as_str() == Some(value))
        {
            array.push(value.as_str());
        }
    }
    table.insert("sha256", toml_edit::value(sha256));
}

fn load_lock(target: &Target) -> anyhow::Result<Lockfile> {
    Ok(Lockfile::load(&target.lock)?)
}

fn add(args: AddArgs) -> anyhow::Result<ExitCode> {
    let target = args.target.resolve()?;
    let fetched = fetch(&args.source)?;
    // Checked where it will be installed only once it passes: first as a temporary file.
    std::fs::create_dir_all(&target.dir)
        .with_context(|| format!("cannot create {}", target.dir.display()))?;
    let staging = tempfile::Builder::new()
        .prefix(".adding-")
        .suffix(".wasm")
        .tempfile_in(&target.dir)?;
    std::fs::write(staging.path(), &fetched.bytes)?;
    let plugin = checked(staging.path(), target.cache_dir.clone())?;
    let name = plugin.metadata.name.clone();
    let mut lock = load_lock(&target)?;
    let file = target.dir.join(format!("{name}.wasm"));
    if lock.plugins.contains_key(&name) {
        bail!(
            "{name} is already installed (from {}): `toolwright plugins update {name}` fetches it again, \
             `toolwright plugins remove {name}` uninstalls it",
            lock.plugins[&name].source
        );
    }
    if file.exists() {
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
    drop(staging.persist(&file).map_err(|e| e.error)?);
    let done = format!("installed {name} {} as {}", entry.version, file.display());
    record(&mut out, &target, &mut lock, &name, entry, &granted, &done)?;
    Ok(ExitCode::SUCCESS)
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
    grant_and_pin(&mut document, name, granted, &entry.sha256);
    save_policy(&target.policy, &document)?;
    writeln!(out, "{done}")?;
    report_grants(out, granted, target, &entry)?;
    lock.plugins.insert(name.to_owned(), entry);
    lock.save(&target.lock)?;
    Ok(())
}

fn report_grants(
    out: &mut impl Write,
    granted: &[Capability],
    target: &Target,
    entry: &LockEntry,
) -> std::io::Result<()> {
    if granted.is_empty() {
        writeln!(
            out,
            "granted: nothing (grant later with --grant, or edit {})",
            target.policy.display()
        )?;
    }
    for c in granted {
        writeln!(out, "granted: {}", super::plugins::describe(c))?;
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
    let plugin = checked(&approved.file, target.cache_dir.clone())?;
    if plugin.metadata.name != *name {
        bail!(
            "{} now calls itself `{}`, not `{name}`: remove it and add it again",
            approved.file.display(),
            plugin.metadata.name
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
        writeln!(out, "changed: {change}")?;
    }
    show(&mut out, &plugin)?;
    // Ask only about what is new; what was granted stays granted.
    let new: Vec<&Capability> = plugin
        .metadata
        .capabilities
        .iter()
        .map(|c| &c.capability)
        .filter(|c| !approved.capabilities.contains(&lock::capability_words(c)))
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
        let fetched = match fetch(&entry.source) {
            Ok(fetched) => fetched,
            Err(e) => {
                writeln!(out, "{name}: cannot fetch {}: {e:#}", entry.source)?;
                code = ExitCode::FAILURE;
                continue;
            }
        };
        let digest = toolwright::identity::hex(&sha256(&fetched.bytes));
        let current = std::fs::read(&entry.file).map(|b| toolwright::identity::hex(&sha256(&b)));
        if current.as_deref().ok() == Some(digest.as_str()) {
            writeln!(out, "{name}: up to date ({})", entry.source)?;
            continue;
        }
        // The new file replaces the old one, but the approval stays the old one's: the plugin is held until
        // approved (or approves itself under auto-approve = "same-surface").
        let staging = entry.file.with_extension("wasm.new");
        std::fs::write(&staging, &fetched.bytes)?;
        let plugin = match checked(&staging, target.cache_dir.clone()) {
            Ok(plugin) => plugin,
            Err(e) => {
                let _ = std::fs::remove_file(&staging);
                writeln!(out, "{name}: the new file is not installed: {e:#}")?;
                code = ExitCode::FAILURE;
                continue;
            }
        };
        let found = lock::entry(&plugin, &entry.source);
        drop(plugin);
        std::fs::rename(&staging, &entry.file)?;
        writeln!(
            out,
            "{name}: updated {} from {}",
            entry.file.display(),
            entry.source
        )?;
        for change in lock::changes(&entry, &found) {
            writeln!(out, "  changed: {change}")?;
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
    let file = lock
        .plugins
        .get(name)
        .map(|e| e.file.clone())
        .unwrap_or_else(|| target.dir.join(format!("{name}.wasm")));
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
