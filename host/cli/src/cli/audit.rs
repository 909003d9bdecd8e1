//! `toolwright audit`: the audit log (`toolwright_core::audit`) for people, filtered by time, tool and plugin.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use toolwright::audit::{AuditRecord, OriginKind, Outcome, Verdict};
use toolwright::text::escape;

/// Arguments of `toolwright audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The log (default: the file `audit = "…"` names in the user's policy, or in a `--policy` file).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// A policy file to take `audit` from (repeatable; after the user's config).
    #[arg(long = "policy", value_name = "FILE")]
    policy_files: Vec<PathBuf>,
    /// Only calls started at or after this time: RFC 3339 (`2026-12-01T10:00:00Z`) or an age (`90s`, `30m`,
    /// `2h`, `7d`).
    #[arg(long, value_name = "TIME", value_parser = parse_since)]
    since: Option<String>,
    /// Only calls of this tool (repeatable).
    #[arg(long, value_name = "NAME")]
    tool: Vec<String>,
    /// Only calls of this plugin's tools (repeatable).
    #[arg(long, value_name = "NAME")]
    plugin: Vec<String>,
    /// Print the matching records as they are stored, one JSON line each.
    #[arg(long)]
    json: bool,
    /// Check the log's hash chain instead: each record must carry the hash of the line before it. Names the first
    /// record edited, inserted or removed by its line, and exits 1; prints the last line's hash (keep it
    /// elsewhere to detect a log rewritten from some record on) and exits 0 when the chain holds.
    #[arg(long, conflicts_with_all = ["since", "tool", "plugin", "json"])]
    verify: bool,
}

/// `--since` as the log writes times (RFC 3339 in UTC with milliseconds), so that times compare as text.
fn parse_since(text: &str) -> Result<String, String> {
    let text = text.trim();
    let age = text
        .char_indices()
        .last()
        .and_then(|(i, unit)| Some((text[..i].parse::<u64>().ok()?, unit)));
    if let Some((n, unit)) = age {
        let seconds = match unit {
            's' => n,
            'm' => n * 60,
            'h' => n * 3600,
            'd' => n * 86_400,
            _ => return Err(format!("`{text}`: an age ends in s, m, h or d (`30m`)")),
        };
        let at = std::time::SystemTime::now() - std::time::Duration::from_secs(seconds);
        return Ok(toolwright::audit::rfc3339(at));
    }
    let at =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).map_err(|e| {
            format!("`{text}` is neither an RFC 3339 time (`2026-12-01T10:00:00Z`) nor an age (`30m`): {e}")
        })?;
    Ok(toolwright::audit::rfc3339(at.into()))
}

pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let file = match args.file.clone() {
        Some(file) => file,
        None => {
            let mut files = toolwright::policy::default_files();
            files.extend(args.policy_files.iter().cloned());
            let policy = toolwright::policy::Policy::load(&files)?;
            let cwd = std::env::current_dir().context("cannot read the current directory")?;
            let options = toolwright::toolset::ToolsetOptions::bare(cwd);
            toolwright::toolset::audit_logs(&options, &policy)
                .into_iter()
                .next()
                .context(
                    "no audit log: set `audit = \"FILE\"` in ~/.config/toolwright/toolwright.toml (or run with \
                     --audit-log FILE), or pass --file FILE",
                )?
        }
    };
    if args.verify {
        return verify(&file);
    }
    let log = std::fs::File::open(&file)
        .with_context(|| format!("cannot open the audit log {}", file.display()))?;
    let mut out = std::io::stdout().lock();
    let mut bad = 0usize;
    for (n, line) in std::io::BufReader::new(log).lines().enumerate() {
        let line = line.with_context(|| format!("cannot read the audit log {}", file.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let record: AuditRecord = match serde_json::from_str(&line) {
            Ok(record) => record,
            Err(e) => {
                // A line cut short by a crash, or a record of a newer version: said, then skipped.
                #[allow(clippy::print_stderr)]
                {
                    eprintln!(
                        "toolwright: {}:{}: not an audit record: {e}",
                        file.display(),
                        n + 1
                    );
                }
                bad += 1;
                continue;
            }
        };
        if !args.keeps(&record) {
            continue;
        }
        if args.json {
            writeln!(out, "{line}")?;
        } else {
            write!(out, "{}", render(&record))?;
        }
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `--verify`: the chain of the log at `file`.
fn verify(file: &std::path::Path) -> anyhow::Result<ExitCode> {
    let bytes =
        std::fs::read(file).with_context(|| format!("cannot read the audit log {}", file.display()))?;
    let mut lines: Vec<Vec<u8>> = bytes.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    if lines.last().is_some_and(Vec::is_empty) {
        lines.pop();
    }
    let mut out = std::io::stdout().lock();
    match toolwright::audit::verify(lines) {
        Ok((records, head)) => {
            writeln!(
                out,
                "{}: the chain holds: {records} records, each carrying the hash of the one before; the last line's \
                 hash is {head}",
                file.display()
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(broken) => {
            writeln!(out, "{}:{}: {}", file.display(), broken.line, broken.what)?;
            Ok(ExitCode::from(1))
        }
    }
}

impl AuditArgs {
    fn keeps(&self, record: &AuditRecord) -> bool {
        let since = self.since.as_ref().is_none_or(|since| record.time >= *since);
        let tool = self.tool.is_empty() || self.tool.contains(&record.tool);
        let plugin = self.plugin.is_empty()
            || record
                .source
                .as_ref()
                .and_then(|s| s.plugin.as_ref())
                .is_some_and(|p| self.plugin.contains(p));
        since && tool && plugin
    }
}

/// One record for people: a heading line, then one indented line per step, spawn, connection and error. Every
/// string a plugin, a client or a model chose (ids, names, reasons, argv, errors) is escaped, so that none can
/// print a line of its own or act on the terminal; a multi-line text shows its first line.
fn render(record: &AuditRecord) -> String {
    let outcome = match record.outcome {
        Outcome::Ok => "ok",
        Outcome::Error => "error",
        Outcome::Limit => "limit",
        Outcome::Cancelled => "cancelled",
    };
    let source = match &record.source {
        None => "no such tool".to_owned(),
        Some(s) => {
            let kind = match s.kind {
                OriginKind::Builtin => "built-in",
                OriginKind::Plugin => "plugin",
                OriginKind::Embedder => "embedder",
                OriginKind::Mcp => "MCP server",
            };
            let machine = match s.machine {
                toolwright::audit::Machine::Native => "native",
                toolwright::audit::Machine::Wasm => "wasm",
            };
            let mut text = format!("{kind} ({machine})");
            if let Some(plugin) = &s.plugin {
                text.push_str(&format!(" {}", escape(plugin)));
            }
            if let Some(sha) = &s.sha256 {
                let short: String = sha.chars().take(12).collect();
                text.push_str(&format!(" sha256:{}", escape(&short)));
            }
            text
        }
    };
    let parent = record
        .parent
        .as_ref()
        .map(|p| format!(" (nested in {})", escape(p)))
        .unwrap_or_default();
    let mut text = format!(
        "{}  {}  {}{parent}  {outcome}  {} ms  {source}\n",
        escape(&record.time),
        escape(&record.id),
        escape(&record.tool),
        record.duration_ms
    );
    if let Some(grants) = record.source.as_ref().and_then(|s| s.grants.as_ref()) {
        let grants = if grants.is_empty() {
            "nothing".to_owned()
        } else {
            escape(&grants.join(", ")).into_owned()
        };
        text.push_str(&format!("    grants   {grants}\n"));
    }
    for step in &record.decision {
        let verdict = match step.verdict {
            Verdict::Allowed => "allowed",
            Verdict::Rewrote => "rewrote the arguments",
            Verdict::Blocked => "blocked",
            Verdict::Refused => "refused",
            Verdict::Changed => "changed the result",
            Verdict::Failed => "failed",
        };
        let reason = step
            .reason
            .as_ref()
            .map(|r| format!(": {}", first_line(r)))
            .unwrap_or_default();
        text.push_str(&format!(
            "    {:<8} {} {verdict}{reason}\n",
            stage(step.stage),
            escape(&step.by)
        ));
    }
    for spawn in &record.spawns {
        // Each argument escaped whole: a newline inside one is shown, not taken for the end of the command.
        let command = std::iter::once(spawn.program.as_str())
            .chain(spawn.argv.iter().map(String::as_str))
            .map(|a| escape(a).into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        let verdict = match (&spawn.reason, spawn.allowed) {
            (None, _) => String::new(),
            (Some(r), false) => format!("  (refused: {})", first_line(r)),
            (Some(r), true) => format!("  (failed: {})", first_line(r)),
        };
        let by = spawn
            .by
            .as_ref()
            .map(|b| format!("  (by {})", escape(b)))
            .unwrap_or_default();
        text.push_str(&format!("    spawn    {command}{verdict}{by}\n"));
    }
    for c in &record.connections {
        let verdict = if c.allowed { "" } else { "  (refused)" };
        let by =
            c.by.as_ref()
                .map(|b| format!("  (by {})", escape(b)))
                .unwrap_or_default();
        text.push_str(&format!("    connect  {}{verdict}{by}\n", escape(&c.address)));
    }
    for q in &record.questions {
        text.push_str(&format!(
            "    ask      {} {}  ({})\n",
            escape(&q.method),
            escape(&q.key),
            first_line(&q.outcome)
        ));
    }
    if record.omitted > 0 {
        text.push_str(&format!(
            "    … {} more spawns, connections and questions\n",
            record.omitted
        ));
    }
    if let Some(error) = &record.error {
        text.push_str(&format!("    error    {}\n", first_line(error)));
    }
    text
}

fn stage(stage: toolwright::audit::Stage) -> &'static str {
    match stage {
        toolwright::audit::Stage::Preflight => "check",
        toolwright::audit::Stage::Before => "before",
        toolwright::audit::Stage::After => "after",
        toolwright::audit::Stage::Asked => "asked",
    }
}

/// The first line of `text`, escaped, marked with `…` when there is more.
fn first_line(text: &str) -> String {
    match text.split_once('\n') {
        Some((first, _)) => format!("{} …", escape(first)),
        None => escape(text).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_rfc3339_times_and_ages() {
        assert_eq!(
            parse_since("2026-12-01T10:00:00Z").unwrap(),
            "2026-12-01T10:00:00.000Z"
        );
        assert_eq!(
            parse_since("2026-12-01T11:00:00+01:00").unwrap(),
            "2026-12-01T10:00:00.000Z"
        );
        let recent = parse_since("30m").unwrap();
        assert!(recent < toolwright::audit::rfc3339(std::time::SystemTime::now()));
        assert!(parse_since("30w").unwrap_err().contains("ends in s, m, h or d"));
        assert!(
            parse_since("yesterday")
                .unwrap_err()
                .contains("neither an RFC 3339 time")
        );
    }

    #[test]
    fn a_record_renders_its_decision_path_spawns_and_error() {
        let line = r#"{"time":"2026-12-01T10:00:00.000Z","id":"c1","tool":"bash","source":{"kind":"builtin","runtime":"native"},"decision":[{"by":"handler plugin guard","stage":"before","verdict":"blocked","reason":"guard: no"}],"spawns":[{"program":"curl","argv":["x"],"allowed":false,"reason":"not granted"}],"connections":[{"address":"127.0.0.1:80","allowed":false}],"durationMs":3,"outcome":"error","error":"guard: no"}"#;
        let record: AuditRecord = serde_json::from_str(line).unwrap();
        let text = render(&record);
        assert_eq!(
            text,
            "2026-12-01T10:00:00.000Z  c1  bash  error  3 ms  built-in (native)\n    before   handler plugin guard \
             blocked: guard: no\n    spawn    curl x  (refused: not granted)\n    connect  127.0.0.1:80  (refused)\n    \
             error    guard: no\n"
        );
    }
}
