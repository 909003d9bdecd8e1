//! A pi user's `mcp.json` works unchanged (issue 45): the same configuration as pi 1.6.0's recorded run
//! (`tests/fixtures/mcp/pi-1.6.0-probe.json`, recorded by `tests/oracle/mcp/record.mjs` against
//! `tests/mcp/probe_server.py`) gives the same tool names, exposures, declarations, `mcp_servers` prompt section
//! and results through `toolwright` (the server granted the directory of the file it reads: pi runs servers
//! unconfined).

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use toolwright_tests::golden::test_cache_dir;

fn fixture() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mcp/pi-1.6.0-probe.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The recorded run's directory (`<DIR>`): the probe server, `hello.txt`, a home and a workspace.
struct Run {
    dir: tempfile::TempDir,
}

impl Run {
    fn new(fixture: &Value) -> Run {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        for sub in ["server", "home/.config/toolwright", "ws"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/probe_server.py");
        std::fs::copy(script, dir.path().join("server/probe_server.py")).unwrap();
        std::fs::write(dir.path().join("hello.txt"), "hello\n").unwrap();
        // pi's servers read anything; here a server reads what it is granted: the directory of the file read.
        let policy = format!("[mcp.probe]\nread = [\"{}\"]\n", dir.path().display());
        std::fs::write(dir.path().join("home/.config/toolwright/toolwright.toml"), policy).unwrap();
        let run = Run { dir };
        let config = run.placed(&fixture["mcpJson"]);
        std::fs::write(run.path("mcp.json"), config.to_string()).unwrap();
        run
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn dir_text(&self) -> String {
        self.dir.path().to_string_lossy().into_owned()
    }

    /// `value` with `<DIR>` made this run's directory.
    fn placed(&self, value: &Value) -> Value {
        serde_json::from_str(&value.to_string().replace("<DIR>", &self.dir_text())).unwrap()
    }

    /// `value` with this run's directory made `<DIR>`, and the paths of files a result was saved to `<TMP>`.
    fn recorded(&self, value: &Value) -> Value {
        let text = value.to_string().replace(&self.dir_text(), "<DIR>");
        let tmp = std::env::temp_dir().to_string_lossy().into_owned();
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find(&format!("{tmp}/toolwright-mcp-")) {
            out.push_str(&rest[..at]);
            out.push_str("<TMP>");
            let tail = &rest[at..];
            let end = tail.find(['"', ' ', '\\']).unwrap_or(tail.len());
            rest = &tail[end..];
        }
        out.push_str(rest);
        serde_json::from_str(&out).unwrap()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"));
        command
            .args(args)
            .args([
                "--cwd",
                &self.path("ws").to_string_lossy(),
                "--no-default-plugins",
                "--no-default-mcp",
            ])
            .arg("--mcp-config")
            .arg(self.path("mcp.json"))
            .arg("--cache-dir")
            .arg(test_cache_dir())
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("home/.config"))
            .env_remove("TOOLWRIGHT_LOG")
            .stdin(Stdio::null());
        command
    }

    fn stdout(&self, args: &[&str]) -> String {
        let out = self.command(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Each call in a batch of its own, in order, in one session per call: the result messages as the model
    /// reads them (content, details, isError).
    fn exec(&self, calls: &[&Value]) -> Vec<Value> {
        let batch: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"id": format!("call_{i}"), "name": c["name"], "arguments": self.placed(&c["arguments"])}))
            .collect();
        std::fs::write(
            self.path("calls.json"),
            json!({"toolCalls": batch, "mode": "sequential"}).to_string(),
        )
        .unwrap();
        let out = self.stdout(&["exec", &self.path("calls.json").to_string_lossy()]);
        toolwright_tests::result_messages(out.as_bytes())
            .iter()
            .map(|m| {
                self.recorded(
                    &json!({"content": m["content"], "details": m["details"], "isError": m["isError"]}),
                )
            })
            .collect()
    }
}

#[test]
fn the_mcp_servers_section_is_pi_s() {
    let fixture = fixture();
    let run = Run::new(&fixture);
    let prompt: Value = serde_json::from_str(&run.stdout(&["prompt", "--json"])).unwrap();
    assert_eq!(prompt["mcpServers"], fixture["mcpServersSection"]);
}

#[test]
fn the_declared_mcp_tools_are_pi_s() {
    let fixture = fixture();
    let run = Run::new(&fixture);
    let ours: Value = serde_json::from_str(&run.stdout(&["declarations"])).unwrap();
    let mcp = |declared: &Value| -> Vec<Value> {
        declared
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| {
                let name = d["name"].as_str().unwrap();
                name.starts_with("mcp__") || name.contains("_mcp_resource")
            })
            .map(|d| json!({"name": d["name"], "description": d["description"], "parameters": d["parameters"]}))
            .collect()
    };
    let theirs = mcp(&fixture["declared"]);
    let ours = mcp(&ours);
    let names = |list: &[Value]| list.iter().map(|d| d["name"].clone()).collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&theirs));
    for (ours, theirs) in ours.iter().zip(&theirs) {
        assert_eq!(ours, theirs);
    }
}

#[test]
fn the_results_the_model_reads_are_pi_s() {
    let fixture = fixture();
    let run = Run::new(&fixture);
    // The calls a model makes in one turn each; those pi answered after a `tool_search` loaded their tool, and
    // codemode's (its wall time and record differ by nature), are compared below.
    let calls: Vec<&Value> = fixture["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] != "codemode" && c["name"] != "tool_search" && c["name"] != "mcp__probe__echo")
        .filter(|c| !(c["name"] == "mcp__probe__err"))
        .collect();
    let ours = run.exec(&calls);
    for (call, ours) in calls.iter().zip(&ours) {
        let theirs =
            json!({"content": call["content"], "details": call["details"], "isError": call["isError"]});
        assert_eq!(ours, &theirs, "{}", call["name"]);
    }
}

#[test]
fn tool_search_loads_what_pi_loads_and_codemode_scripts_get_what_pi_s_get() {
    let fixture = fixture();
    let run = Run::new(&fixture);
    let find = |name: &str, nth: usize| -> &Value {
        fixture["calls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"] == name)
            .nth(nth)
            .unwrap()
    };
    let ours = run.exec(&[
        find("tool_search", 0),
        find("tool_search", 1),
        find("codemode", 0),
    ]);
    for (i, theirs) in [find("tool_search", 0), find("tool_search", 1)]
        .iter()
        .enumerate()
    {
        assert_eq!(
            ours[i]["content"], theirs["content"],
            "tool_search {}",
            theirs["arguments"]
        );
        assert_eq!(ours[i]["details"], theirs["details"]);
    }
    // The script's output: the tools' raw results and the namespace as pi's scripts see them.
    let theirs = &find("codemode", 0)["content"][1]["text"];
    let ours_text = ours[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap_or(""))
        .collect::<String>();
    assert!(
        ours_text.ends_with(theirs.as_str().unwrap()),
        "ours: {ours_text}\ntheirs: {theirs}"
    );
}
