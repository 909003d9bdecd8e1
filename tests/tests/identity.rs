//! Grants bind to a plugin's identity, not its claimed name (issue 15): a plugin in a cloned project's
//! `.toolwright/plugins` that claims the name of a plugin the user granted in their own config gets none of that
//! grant and never takes the real plugin's place; a grant pinned with `sha256` gives nothing to another file.
//! Run through the command line (`toolwright exec`, `toolwright plugins`) with a HOME of its own, as a user
//! would meet it.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolwright_tests::golden::test_cache_dir;
use toolwright_tests::programs::{IMPOSTOR, PROBE};

/// What the guest's standard library reports for a path outside every preopen (WASI `noent`).
const NOT_THERE: &str = "NotFound: No such file or directory (os error 44)";

/// A user's HOME (`.config/toolwright/{toolwright.toml,plugins}`) and a cloned project (`secret/key`,
/// `public/readme`, `.toolwright/plugins`, maybe a `toolwright.toml`).
struct Setup {
    home: tempfile::TempDir,
    ws: tempfile::TempDir,
}

impl Setup {
    /// `user` is the user's toolwright.toml; `real` puts the probe in the user's plugin directory, `hostile` the
    /// impostor in the project's.
    fn new(user: &str, real: bool, hostile: bool) -> Setup {
        let setup = Setup {
            home: tempfile::tempdir().unwrap(),
            ws: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(setup.user_plugins()).unwrap();
        std::fs::write(setup.config().join("toolwright.toml"), user).unwrap();
        std::fs::create_dir_all(setup.project_plugins()).unwrap();
        std::fs::create_dir(setup.ws.path().join("secret")).unwrap();
        std::fs::write(setup.ws.path().join("secret/key"), "k").unwrap();
        std::fs::create_dir(setup.ws.path().join("public")).unwrap();
        std::fs::write(setup.ws.path().join("public/readme"), "hello").unwrap();
        if real {
            std::fs::copy(PROBE, setup.user_plugins().join("probe.wasm")).unwrap();
        }
        if hostile {
            // Named to load first: the project's directory is loaded before the user's, and `a` sorts first.
            std::fs::copy(IMPOSTOR, setup.project_plugins().join("a-probe.wasm")).unwrap();
        }
        setup
    }

    fn config(&self) -> PathBuf {
        self.home.path().join(".config/toolwright")
    }

    fn user_plugins(&self) -> PathBuf {
        self.config().join("plugins")
    }

    fn project_plugins(&self) -> PathBuf {
        self.ws.path().join(".toolwright/plugins")
    }

    fn path(&self, rel: &str) -> String {
        self.ws.path().join(rel).to_string_lossy().into_owned()
    }

    /// `toolwright ARGS --cwd WS` as the user of this HOME; it must succeed.
    fn toolwright(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// `toolwright trust WS` as the user of this HOME: the project's plugins load as it is now.
    fn trust(&self) {
        let trusted = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
            .arg("trust")
            .arg(self.ws.path())
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join(".config"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            trusted.status.success(),
            "{}",
            String::from_utf8_lossy(&trusted.stderr)
        );
    }

    /// `toolwright ARGS --cwd WS` as the user of this HOME, who trusted the project as it is now (its plugins
    /// load; `tests/tests/escalation.rs` covers an untrusted one).
    fn run(&self, args: &[&str]) -> Output {
        self.trust();
        Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
            .args(args)
            .arg("--cwd")
            .arg(self.ws.path())
            .arg("--cache-dir")
            .arg(test_cache_dir())
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join(".config"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `toolwright plugins ARGS`: exit 0, or 1 when it reports a skipped plugin.
    fn plugins(&self, args: &[&str]) -> Output {
        let mut all = vec!["plugins"];
        all.extend_from_slice(args);
        let out = self.run(&all);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let skipped = stdout.contains("skipped: ") || stdout.contains("\"errors\":[\"");
        assert_eq!(out.status.code(), Some(if skipped { 1 } else { 0 }), "{stdout}");
        out
    }

    /// The texts of `toolwright exec` running `probe` once per action, in order, and its stderr.
    fn probe(&self, probes: &[Value], extra: &[&str]) -> (Vec<String>, String) {
        let calls_dir = tempfile::tempdir().unwrap();
        let calls = calls_dir.path().join("calls.json");
        let tool_calls: Vec<Value> = probes
            .iter()
            .enumerate()
            .map(|(i, p)| json!({"id": format!("p{i}"), "name": "probe", "arguments": p}))
            .collect();
        std::fs::write(&calls, json!({"toolCalls": tool_calls}).to_string()).unwrap();
        let mut args = vec!["exec", calls.to_str().unwrap(), "--json", "--sequential"];
        args.extend(extra);
        let out = self.toolwright(&args);
        let events: Vec<Value> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let texts = (0..probes.len())
            .map(|i| {
                let end = events
                    .iter()
                    .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == format!("p{i}"))
                    .unwrap();
                end["result"]["content"][0]["text"].as_str().unwrap().to_owned()
            })
            .collect();
        (texts, String::from_utf8(out.stderr).unwrap())
    }

    fn listing(&self) -> String {
        String::from_utf8(self.plugins(&[]).stdout).unwrap()
    }

    fn listing_json(&self) -> Value {
        serde_json::from_slice(&self.plugins(&["--json"]).stdout).unwrap()
    }
}

/// The user's config granting the probe the project's `secret` directory.
const USER_GRANT: &str = "[plugins.toolwright-test-probe]\nread = [\"./secret\"]\n";

fn sha256(path: &str) -> String {
    Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn a_project_plugin_claiming_a_granted_name_is_skipped_and_the_real_plugin_keeps_its_grant() {
    let s = Setup::new(USER_GRANT, true, true);
    let read_secret = json!({"action": "read", "target": s.path("secret/key")});
    let (texts, stderr) = s.probe(&[read_secret], &[]);
    assert_eq!(texts, ["read 1 bytes"], "the real probe answered, with its grant");
    let hostile = s.project_plugins().join("a-probe.wasm");
    let real = s.user_plugins().join("probe.wasm");
    let report = format!(
        "{}: the project's plugin claims the name `toolwright-test-probe` of the plugin {} from the user's plugin \
         directory; that one is loaded and keeps the grants for `toolwright-test-probe`, this one is skipped",
        hostile.display(),
        real.display()
    );
    assert!(
        stderr.contains(&format!("toolwright: skipped: {report}\n")),
        "{stderr}"
    );

    let listing = s.listing();
    assert!(listing.contains(&format!("skipped: {report}\n")), "{listing}");
    assert!(
        listing.contains(&format!(
            "  from: user (the user's plugin directory); sha256 {}\n",
            sha256(PROBE)
        )),
        "{listing}"
    );
    let json = s.listing_json();
    let plugins = json["plugins"].as_array().unwrap();
    assert_eq!(plugins.len(), 1, "{json}");
    assert_eq!(plugins[0]["path"], json!(real));
    assert_eq!(plugins[0]["location"], "user");
    assert_eq!(plugins[0]["pin"], json!({"status": "unpinned"}));
    assert_eq!(json["errors"], json!([report]));
}

#[test]
fn a_project_plugin_claiming_a_granted_name_gets_only_what_the_project_grants() {
    // The real plugin is not installed: nothing clashes, and the impostor loads under the granted name.
    let s = Setup::new(USER_GRANT, false, true);
    std::fs::write(
        s.ws.path().join("toolwright.toml"),
        "[plugins.toolwright-test-probe]\nread = [\"./public\"]\n",
    )
    .unwrap();
    let (texts, _) = s.probe(
        &[
            json!({"action": "read", "target": s.path("secret/key")}),
            json!({"action": "read", "target": s.path("public/readme")}),
        ],
        &[],
    );
    assert_eq!(texts, [NOT_THERE, "the impostor read 5 bytes"]);
    let json = s.listing_json();
    let plugin = &json["plugins"][0];
    assert_eq!(plugin["location"], "project");
    assert_eq!(plugin["sha256"], sha256(IMPOSTOR));
    assert_eq!(
        plugin["decisions"][0]["granted"],
        json!([{"kind": "read", "target": s.path("public")}]),
        "{json}"
    );

    // Without a project grant, the refusal says why the user's grant does not reach it.
    std::fs::remove_file(s.ws.path().join("toolwright.toml")).unwrap();
    let listing = s.listing();
    assert!(
        listing.contains(
            "    refused: not granted to this plugin: it comes from the project's .toolwright/plugins, and \
             [plugins.toolwright-test-probe] grants in your own toolwright.toml or a --policy file apply only to \
             plugins from your plugin directory or a --plugins directory\n"
        ),
        "{listing}"
    );
    assert!(
        listing.contains("  from: project (the project's .toolwright/plugins); sha256 "),
        "{listing}"
    );
}

#[test]
fn a_plugins_directory_on_the_command_line_is_trusted_and_wins_the_name_too() {
    let s = Setup::new("", false, true);
    let cli = tempfile::tempdir().unwrap();
    std::fs::copy(PROBE, cli.path().join("probe.wasm")).unwrap();
    let policy = cli.path().join("grant.toml");
    std::fs::write(&policy, USER_GRANT).unwrap();
    let extra = [
        "--plugins",
        cli.path().to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ];
    let (texts, stderr) = s.probe(
        &[json!({"action": "read", "target": s.path("secret/key")})],
        &extra,
    );
    assert_eq!(texts, ["read 1 bytes"]);
    assert!(
        stderr.contains(&format!(
            "of the plugin {} from a --plugins directory; that one is loaded",
            cli.path().join("probe.wasm").display()
        )),
        "{stderr}"
    );
}

#[test]
fn a_pinned_grant_reaches_only_the_file_with_that_digest() {
    let wrong = "0".repeat(64);
    let s = Setup::new(&format!("{USER_GRANT}sha256 = \"{wrong}\"\n"), true, false);
    let read_secret = json!({"action": "read", "target": s.path("secret/key")});
    let (texts, _) = s.probe(std::slice::from_ref(&read_secret), &[]);
    assert_eq!(texts, [NOT_THERE], "a pin that does not match gets nothing");
    let actual = sha256(PROBE);
    let listing = s.listing();
    assert!(
        listing.contains(&format!(
            "  pin: DOES NOT MATCH: the policy pins sha256 = \"{wrong}\", the file's is {actual}; nothing is granted \
             until the pin is updated\n"
        )),
        "{listing}"
    );
    assert!(
        listing.contains(&format!(
            "    refused: not granted: [plugins.toolwright-test-probe] pins sha256 = \"{wrong}\", but this file's \
             SHA-256 is {actual}; update the pin if you trust this file\n"
        )),
        "{listing}"
    );
    assert_eq!(
        s.listing_json()["plugins"][0]["pin"],
        json!({"status": "mismatch", "pinned": wrong, "actual": actual})
    );

    // The pin updated (upper case, as some tools print it): granted.
    let user = format!("{USER_GRANT}sha256 = \"{}\"\n", actual.to_uppercase());
    std::fs::write(s.config().join("toolwright.toml"), user).unwrap();
    let (texts, _) = s.probe(&[read_secret], &[]);
    assert_eq!(texts, ["read 1 bytes"]);
    assert!(s.listing().contains("  pin: sha256 matches\n"));
    assert_eq!(
        s.listing_json()["plugins"][0]["pin"],
        json!({"status": "matches"})
    );
}

#[test]
fn a_pin_that_is_not_a_digest_stops_toolwright() {
    let s = Setup::new(
        "[plugins.toolwright-test-probe]\nsha256 = \"1234\"\n",
        true,
        false,
    );
    let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .args(["plugins", "--cwd"])
        .arg(s.ws.path())
        .env("HOME", s.home.path())
        .env("XDG_CONFIG_HOME", s.home.path().join(".config"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let config: &Path = &s.config().join("toolwright.toml");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "toolwright: {}: [plugins.toolwright-test-probe] sha256: \"1234\" is not a SHA-256 digest (64 hex \
             digits, as `sha256sum` or `toolwright plugins` prints it)\n",
            config.display()
        )
    );
}

/// One `tools/call` of `probe` on a `toolwright mcp` server: the text of its result.
fn mcp_probe(
    stdin: &mut std::process::ChildStdin,
    stdout: &mut impl std::io::BufRead,
    id: i64,
    target: &str,
) -> String {
    use std::io::Write;
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "probe", "arguments": {"action": "read", "target": target}}});
    writeln!(stdin, "{call}").unwrap();
    stdin.flush().unwrap();
    loop {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id {
            return message["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned();
        }
    }
}

#[test]
fn under_mcp_the_real_plugin_keeps_its_grant_across_reloads_and_an_impostor_alone_gets_nothing() {
    use std::io::Write;
    let s = Setup::new(USER_GRANT, true, false);
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .args(["mcp", "--watch-plugins", "50", "--cwd"])
        .arg(s.ws.path())
        .arg("--cache-dir")
        .arg(test_cache_dir())
        .env("HOME", s.home.path())
        .env("XDG_CONFIG_HOME", s.home.path().join(".config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    writeln!(
        stdin,
        "{init}\n{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    let secret = s.path("secret/key");
    assert_eq!(mcp_probe(&mut stdin, &mut stdout, 1, &secret), "read 1 bytes");

    // The impostor arrives (a `git pull`), and the user even trusts the project as it is now: the plugins are
    // reloaded, and the real one keeps the name.
    std::fs::copy(IMPOSTOR, s.project_plugins().join("a-probe.wasm")).unwrap();
    s.trust();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    assert_eq!(mcp_probe(&mut stdin, &mut stdout, 2, &secret), "read 1 bytes");

    // The real one removed: the impostor loads under the name, without the user's grant.
    std::fs::remove_file(s.user_plugins().join("probe.wasm")).unwrap();
    let started = std::time::Instant::now();
    let mut id = 3;
    let text = loop {
        let text = mcp_probe(&mut stdin, &mut stdout, id, &secret);
        if text != "read 1 bytes" || started.elapsed() > std::time::Duration::from_secs(20) {
            break text;
        }
        id += 1;
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(text, NOT_THERE);
    drop(stdin);
    child.wait().unwrap();
}
