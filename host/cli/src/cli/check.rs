//! `toolwright check FILE.wasm`: is this a plugin the host can load, and if not, what to do about it. Runs no
//! session: it reads the file, compiles it, asks it to describe itself and applies the checks a load applies.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use serde_json::{Value, json};
use toolwright::text::escape;

/// Arguments of `toolwright check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The `.wasm` file to check.
    file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Where compiled plugins are cached (default: `$TOOLWRIGHT_CACHE_DIR` or `~/.cache/toolwright/components`).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

/// One thing wrong, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong.
    pub what: String,
    /// How to fix it, when there is a known way.
    pub fix: Option<String>,
}

impl Problem {
    fn new(what: impl Into<String>, fix: Option<&str>) -> Self {
        Problem {
            what: what.into(),
            fix: fix.map(str::to_owned),
        }
    }
}

const BUILD_A_COMPONENT: &str = "build a component: `cargo build --target wasm32-wasip2` for Rust (not wasm32-wasip1 \
     or wasm32-unknown-unknown), `componentize-py … componentize` for Python, componentize-js for JavaScript; a core \
     module becomes a component with `wasm-tools component new` (and the WASI adapter for wasip1)";

const HTTP_IMPORT: &str = "the host offers no `wasi:http`: componentize-js includes it by default; build with \
     `disableFeatures: [\"http\", \"fetch-event\"]` (`componentize(…, { disableFeatures: [\"http\", \"fetch-event\"] })`)";

const OTHER_IMPORT: &str = "the host links WASI 0.2 (cli, clocks, filesystem, io, random, sockets) and \
     `toolwright:plugin/host@0.2.0` (and 0.1.0): build against this host's WIT (`wit/` in Toolwright's repository) and leave out \
     what it does not offer";

const WRONG_TYPE: &str = "the plugin was built against another draft of `toolwright:plugin` than 0.2.0 or the \
     released 0.1.0 (an early 0.1.0 passed JSON text where `prepare-loadout` and `callable-tools` now take records): \
     rebuild it with the current SDK, or against `toolwright wit --out wit`";

const NO_EXPORT: &str = "export `toolwright:plugin/tool@0.2.0` (world `tool-plugin`, the SDK's `export_tool!`) or \
     `toolwright:plugin/handler@0.2.0` (world `handler-plugin`, `export_handler!`)";

const METADATA: &str = "fix the plugin's metadata or tool declarations; `docs/writing-plugins.md` says what the host \
     accepts";

/// What kind of file `bytes` is, or why it is not a component.
pub fn sniff(bytes: &[u8]) -> Result<(), Problem> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(Problem::new(
            "not a WebAssembly file (it does not start with `\\0asm`)",
            Some(BUILD_A_COMPONENT),
        ));
    }
    match bytes[4..8] {
        [0x0d, 0x00, 0x01, 0x00] => Ok(()),
        [0x01, 0x00, 0x00, 0x00] => Err(Problem::new(
            "a core WebAssembly module, not a component",
            Some(BUILD_A_COMPONENT),
        )),
        _ => Err(Problem::new(
            format!(
                "a WebAssembly binary of an unknown version (bytes {:02x?})",
                &bytes[4..8]
            ),
            Some(BUILD_A_COMPONENT),
        )),
    }
}

/// The problem a load failure is, with its fix.
pub fn diagnose(error: &toolwright::wasm::PluginError) -> Problem {
    use toolwright::wasm::PluginError;
    let what = error.to_string();
    let fix = match error {
        PluginError::Incompatible { message, .. } if message.contains("wasi:http") => Some(HTTP_IMPORT),
        PluginError::Incompatible { message, .. } if message.contains("exports neither") => Some(NO_EXPORT),
        PluginError::Incompatible { message, .. }
            if message.contains("instance `toolwright:plugin/") && message.contains("type mismatch") =>
        {
            Some(WRONG_TYPE)
        }
        PluginError::Incompatible { .. } => Some(OTHER_IMPORT),
        PluginError::Invalid { .. } => {
            Some("rebuild it: the file may be truncated or built for another target")
        }
        PluginError::Metadata { .. } => Some(METADATA),
        _ => None,
    };
    Problem::new(what, fix)
}

/// Check `file`: the report as JSON (`ok`, `problems`, and what the plugin is when it loads).
pub fn check(file: &Path, cache_dir: Option<PathBuf>) -> Value {
    let mut report = json!({ "file": file, "ok": false });
    let problems = |p: Problem| json!([{ "what": p.what, "fix": p.fix }]);
    if file.is_dir() {
        report["problems"] = problems(Problem::new(
            format!("{} is a directory", file.display()),
            Some(
                "check takes one .wasm file; `toolwright plugins --plugins DIR` lists a directory's plugins",
            ),
        ));
        return report;
    }
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(e) => {
            report["problems"] = problems(Problem::new(format!("cannot read {}: {e}", file.display()), None));
            return report;
        }
    };
    report["size"] = json!(bytes.len());
    if let Err(problem) = sniff(&bytes) {
        report["problems"] = problems(problem);
        return report;
    }
    let host = match toolwright::wasm::PluginHost::new(Some(
        cache_dir.unwrap_or_else(toolwright::wasm::default_cache_dir),
    )) {
        Ok(host) => host,
        Err(e) => {
            report["problems"] = problems(Problem::new(e.to_string(), None));
            return report;
        }
    };
    let started = Instant::now();
    // Linked now even when the cache could defer it to the first call: the check is that it links.
    let plugin = match host.load_bytes(file, &bytes) {
        Ok(plugin) => match plugin.prepare() {
            Ok(()) => plugin,
            Err(e) => {
                report["problems"] = problems(diagnose(e));
                return report;
            }
        },
        Err(e) => {
            report["problems"] = problems(diagnose(&e));
            return report;
        }
    };
    let m = &plugin.metadata;
    report["ok"] = json!(true);
    report["problems"] = json!([]);
    report["name"] = json!(m.name);
    report["version"] = json!(m.version);
    report["description"] = json!(m.description);
    report["kind"] = json!(if plugin.is_handler { "handler" } else { "tool" });
    report["compiled"] = json!(plugin.compilation == toolwright::wasm::Compilation::Compiled);
    report["loadMs"] = json!(started.elapsed().as_secs_f64() * 1000.0);
    report["tools"] = plugin
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    report["capabilities"] = m
        .capabilities
        .iter()
        .map(|c| json!({"capability": c.capability, "text": escape(&c.capability.describe()), "reason": c.reason}))
        .collect();
    if plugin.offers() {
        match offered(&plugin) {
            Ok(offers) => report["offers"] = offers,
            Err(error) => {
                report["ok"] = json!(false);
                report["problems"] = problems(Problem::new(
                    format!("its `offers` export failed: {error}"),
                    Some(
                        "fix the plugin's resources or prompts; `docs/writing-plugins.md` says what the host accepts",
                    ),
                ));
            }
        }
    }
    report
}

/// What the plugin offers MCP clients (its `offers` export), listed as the server would, with no grants: its
/// resources, resource templates and prompts.
fn offered(plugin: &toolwright::wasm::Plugin) -> Result<Value, String> {
    let mut grants = toolwright::wasm::WasmGrants::none(Path::new("/"));
    grants.timeout = Some(toolwright::wasm::LOAD_TIMEOUT);
    Ok(json!({
        "resources": plugin.list_resources(&grants, false)?,
        "resourceTemplates": plugin.list_resources(&grants, true)?,
        "prompts": plugin.list_prompts(&grants)?,
    }))
}

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let report = check(&args.file, args.cache_dir);
    let mut out = std::io::stdout().lock();
    let ok = report["ok"] == true;
    if args.json {
        writeln!(out, "{report}")?;
    } else if ok {
        // What the plugin says of itself is escaped: it cannot print lines of its own.
        let text = |v: &Value| escape(v.as_str().unwrap_or("")).into_owned();
        let kb = report["size"].as_u64().unwrap_or(0) as f64 / 1024.0;
        let how = if report["compiled"] == true {
            "compiled"
        } else {
            "from the cache"
        };
        writeln!(
            out,
            "ok: {} {}, a {} plugin ({kb:.0} KiB; {how} and described in {:.1} ms)",
            text(&report["name"]),
            text(&report["version"]),
            report["kind"].as_str().unwrap_or(""),
            report["loadMs"].as_f64().unwrap_or(0.0)
        )?;
        for tool in report["tools"].as_array().into_iter().flatten() {
            writeln!(
                out,
                "  tool {}: {}",
                text(&tool["name"]),
                text(&tool["description"])
            )?;
        }
        let offers = &report["offers"];
        for (key, what, name) in [
            ("resources", "resource", "uri"),
            ("resourceTemplates", "resource template", "uriTemplate"),
            ("prompts", "prompt", "name"),
        ] {
            for entry in offers[key].as_array().into_iter().flatten() {
                let about = entry["description"].as_str().unwrap_or("");
                let about = if about.is_empty() {
                    String::new()
                } else {
                    format!(": {}", escape(about))
                };
                writeln!(out, "  offers {what} {}{about}", text(&entry[name]))?;
            }
        }
        let capabilities = report["capabilities"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        if capabilities.is_empty() {
            writeln!(out, "  requests: nothing")?;
        }
        for c in capabilities {
            writeln!(
                out,
                "  requests: {} (because: {})",
                c["text"].as_str().unwrap_or(""),
                text(&c["reason"])
            )?;
        }
    } else {
        for problem in report["problems"].as_array().into_iter().flatten() {
            writeln!(out, "problem: {}", escape(problem["what"].as_str().unwrap_or("")))?;
            if let Some(fix) = problem["fix"].as_str() {
                writeln!(out, "  fix: {fix}")?;
            }
        }
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_are_not_components_are_told_apart() {
        assert!(
            sniff(b"{\"not\": \"wasm\"}")
                .unwrap_err()
                .what
                .starts_with("not a WebAssembly file")
        );
        let core = sniff(b"\0asm\x01\0\0\0").unwrap_err();
        assert_eq!(core.what, "a core WebAssembly module, not a component");
        assert!(core.fix.unwrap().contains("wasm32-wasip2"));
        assert!(sniff(b"\0asm\x0d\0\x01\0").is_ok());
    }

    #[test]
    fn a_plugin_built_against_an_earlier_draft_is_told_to_rebuild() {
        // What wasmtime says of a component whose `callable-tools` returns JSON text (the draft before records).
        let error = toolwright::wasm::PluginError::Incompatible {
            path: "old.wasm".into(),
            message: "component imports instance `toolwright:plugin/host@0.1.0`, but a matching implementation was \
                      not found in the linker: instance export `callable-tools` has the wrong type: type mismatch \
                      with results: expected `list` found `string`"
                .into(),
        };
        let problem = diagnose(&error);
        assert!(
            problem.what.contains("`callable-tools` has the wrong type"),
            "{problem:?}"
        );
        assert!(problem.fix.unwrap().contains("another draft"));
    }
}
