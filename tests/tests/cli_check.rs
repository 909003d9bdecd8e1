//! `toolwright check FILE.wasm` as a plugin author meets it: a working plugin is described, and each way a file
//! can fail to be one (not wasm, a core module, a component importing `wasi:http`, one exporting neither plugin
//! interface, a schema the host refuses, a directory) exits non-zero with what is wrong and how to fix it. And
//! `toolwright plugins` for a set-up that is not what was asked: a missing directory, a file passed as one, a
//! skipped plugin (exit 1, each problem printed once) and a policy section for a name no plugin has. And
//! `toolwright cache`: bounded by its cap, listed, pruned, cleared.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failure with a message.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_toolwright-cli");

fn cache() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

fn check(file: &Path, json: bool) -> Output {
    let mut command = Command::new(BINARY);
    command.arg("check").arg(file).arg("--cache-dir").arg(cache());
    if json {
        command.arg("--json");
    }
    command.output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wordcount() -> &'static [u8] {
    toolwright_tests::programs::EXAMPLES
        .iter()
        .find(|(name, _)| name.ends_with("wordcount"))
        .unwrap()
        .1
}

/// A component that imports an instance named `name` and calls its `handle: func()` from a core module (a
/// component only needs what it uses), exporting nothing.
fn component_importing(name: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(component
            (import "{name}" (instance $i (export "handle" (func))))
            (alias export $i "handle" (func $f))
            (core func $lowered (canon lower (func $f)))
            (core module $m (import "m" "f" (func)))
            (core instance (instantiate $m (with "m" (instance (export "f" (func $lowered))))))
        )"#
    ))
    .unwrap()
}

#[test]
fn a_working_plugin_is_described_and_passes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wordcount.wasm");
    std::fs::write(&file, wordcount()).unwrap();
    let out = check(&file, false);
    assert!(
        out.status.success(),
        "{}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(
        text.starts_with("ok: toolwright-example-wordcount 0.1.0, a tool plugin ("),
        "{text}"
    );
    assert!(
        text.contains("  tool word_count: Count the words, lines and characters of a text."),
        "{text}"
    );
    assert!(text.contains("  requests: nothing"), "{text}");

    let out = check(&file, true);
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], true);
    assert_eq!(report["kind"], "tool");
    assert_eq!(report["tools"][0]["name"], "word_count");
    assert_eq!(report["size"], wordcount().len());
    assert_eq!(report["problems"], serde_json::json!([]));
}

#[test]
fn a_plugin_s_offers_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conformance.wasm");
    std::fs::copy(toolwright_tests::programs::CONFORMANCE, &file).unwrap();
    let out = check(&file, false);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(
            "  offers resource test://static-text: A static text resource (MCP conformance fixture)"
        ),
        "{text}"
    );
    assert!(
        text.contains("  offers resource template test://template/{id}/data: "),
        "{text}"
    );
    assert!(
        text.contains("  offers prompt test_prompt_with_arguments: A prompt with arguments"),
        "{text}"
    );
    let report: Value = serde_json::from_slice(&check(&file, true).stdout).unwrap();
    assert_eq!(
        report["offers"]["prompts"].as_array().unwrap().len(),
        5,
        "{report}"
    );
    // A plugin without the export lists nothing of the kind.
    std::fs::write(dir.path().join("wordcount.wasm"), wordcount()).unwrap();
    let report: Value =
        serde_json::from_slice(&check(&dir.path().join("wordcount.wasm"), true).stdout).unwrap();
    assert!(report.get("offers").is_none(), "{report}");
}

/// `check` fails with `what` and a fix containing `fix`.
fn assert_refused(file: &Path, what: &str, fix: &str) {
    let out = check(file, false);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.starts_with("problem: "), "{text}");
    assert!(text.contains(what), "expected {what:?} in:\n{text}");
    assert!(
        text.contains("  fix: ") && text.contains(fix),
        "expected a fix with {fix:?} in:\n{text}"
    );
    let report: Value = serde_json::from_slice(&check(file, true).stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert!(
        report["problems"][0]["what"].as_str().unwrap().contains(what),
        "{report}"
    );
}

#[test]
fn each_way_of_not_being_a_plugin_gets_what_is_wrong_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    assert_refused(
        &write("text.wasm", b"console.log('hi')\n"),
        "not a WebAssembly file",
        "wasm32-wasip2",
    );
    // The smallest valid core module.
    assert_refused(
        &write("core.wasm", b"\0asm\x01\0\0\0"),
        "a core WebAssembly module, not a component",
        "wasm32-wasip2",
    );
    // What componentize-js builds by default.
    assert_refused(
        &write("http.wasm", &component_importing("wasi:http/types@0.2.3")),
        "wasi:http/types@0.2.3",
        r#"disableFeatures: ["http", "fetch-event"]"#,
    );
    assert_refused(
        &write("other.wasm", &component_importing("acme:gadget/things@1.0.0")),
        "acme:gadget/things@1.0.0",
        "build against this host's WIT",
    );
    assert_refused(
        &write("empty.wasm", &wat::parse_str("(component)").unwrap()),
        "exports neither `toolwright:plugin/tool@0.2.0` nor `toolwright:plugin/handler@0.2.0` (nor 0.1.0's)",
        "export_tool!",
    );
    let selfref = std::fs::read(toolwright_tests::programs::SELFREF).unwrap();
    assert_refused(
        &write("selfref.wasm", &selfref),
        "is refused",
        "docs/writing-plugins.md",
    );
    assert_refused(dir.path(), "is a directory", "toolwright plugins --plugins DIR");
    let out = check(&dir.path().join("missing.wasm"), false);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).starts_with("problem: cannot read "),
        "{}",
        stdout(&out)
    );
}

fn plugins(args: &[&str]) -> Output {
    let ws = tempfile::tempdir().unwrap();
    Command::new(BINARY)
        .args(["plugins", "--no-default-plugins", "--cwd"])
        .arg(ws.path())
        .arg("--cache-dir")
        .arg(cache())
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn plugins_fails_for_a_missing_directory_a_file_and_a_skipped_plugin_printing_each_problem_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let out = plugins(&["--plugins", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "problem: the plugin directory {} does not exist",
            missing.display()
        )),
        "{text}"
    );
    assert!(!text.contains("No plugins"), "{text}");
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));

    let file = dir.path().join("wordcount.wasm");
    std::fs::write(&file, wordcount()).unwrap();
    let out = plugins(&["--plugins", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("is a file, not a directory: --plugins takes a directory"),
        "{}",
        stdout(&out)
    );

    let broken = tempfile::tempdir().unwrap();
    std::fs::write(broken.path().join("core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let out = plugins(&["--plugins", broken.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert_eq!(text.matches("skipped: ").count(), 1, "{text}");
    assert!(
        out.stderr.is_empty(),
        "printed twice: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let json = plugins(&["--plugins", broken.path().to_str().unwrap(), "--json"]);
    assert_eq!(json.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["errors"].as_array().unwrap().len(), 1, "{report}");
}

#[test]
fn a_policy_section_for_a_name_no_plugin_has_is_pointed_out_with_the_nearest_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("wordcount.wasm"), wordcount()).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[plugins.toolwright_example_wordcount]\nread = [\".\"]\n",
    )
    .unwrap();
    let out = plugins(&[
        "--plugins",
        dir.path().to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert!(out.status.success(), "a warning is not a failure: {text}");
    assert!(
        text.contains(
            "warning: the policy has a section [plugins.toolwright_example_wordcount], but no plugin loaded is named \
             `toolwright_example_wordcount`; did you mean [plugins.toolwright-example-wordcount]?"
        ),
        "{text}"
    );
}

fn cache_command(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(BINARY)
        .arg("cache")
        .args(args)
        .arg("--cache-dir")
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    stdout(&out)
}

#[test]
fn the_component_cache_is_bounded_and_can_be_listed_pruned_and_cleared() {
    let plugins = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let files: Vec<_> = toolwright_tests::programs::EXAMPLES
        .iter()
        .take(2)
        .map(|(name, bytes)| {
            let path = plugins.path().join(format!("{name}.wasm"));
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect();
    let compile = |file: &Path, cap: Option<&str>| {
        let mut command = Command::new(BINARY);
        command
            .arg("check")
            .arg(file)
            .arg("--cache-dir")
            .arg(cache.path());
        if let Some(cap) = cap {
            command.env("TOOLWRIGHT_CACHE_MAX_MIB", cap);
        }
        assert!(command.output().unwrap().status.success());
    };
    compile(&files[0], None);
    compile(&files[1], None);
    let listed = cache_command(cache.path(), &["list"]);
    assert!(listed.contains(": 2 compiled components, "), "{listed}");
    assert!(listed.contains("(cap 2048 MiB)"), "{listed}");
    assert_eq!(listed.lines().count(), 3, "{listed}");

    assert!(cache_command(cache.path(), &["prune"]).starts_with("removed 0 compiled components"));
    let pruned = cache_command(cache.path(), &["prune", "--max-mib", "0"]);
    assert!(pruned.starts_with("removed 2 compiled components ("), "{pruned}");

    // With a cap of 0 MiB, each compile keeps only what it just wrote: the least recently used goes.
    compile(&files[0], Some("0"));
    compile(&files[1], Some("0"));
    assert!(cache_command(cache.path(), &["list"]).contains(": 1 compiled components, "));
    let cleared = cache_command(cache.path(), &["clear"]);
    assert!(
        cleared.starts_with("removed 1 compiled components ("),
        "{cleared}"
    );
    assert!(cache_command(cache.path(), &["list"]).contains(": 0 compiled components, 0.0 MiB"));
}
