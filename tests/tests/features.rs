//! The crates an embedder can take one at a time: `toolwright` with only the `native` feature resolves without
//! the wasm runtime, the MCP server, the command line's crates or ICU, and the full build has them all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// The packages `cargo tree` resolves for `toolwright` with `features` (none: the defaults), linked ones only.
fn tree(features: &[&str]) -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(root).args([
        "tree",
        "--locked",
        "--offline",
        "-p",
        "toolwright",
        // Proc-macros run at build time only (wasmtime's use anyhow): what is linked is what counts.
        "-e",
        "normal,no-proc-macro",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ]);
    if !features.is_empty() {
        cmd.args(["--no-default-features", "--features", &features.join(",")]);
    }
    let out = cmd.output().expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// Packages of `packages` whose names start with one of `prefixes`.
fn having<'a>(packages: &'a [String], prefixes: &[&str]) -> Vec<&'a String> {
    let mut found: Vec<&String> = packages
        .iter()
        .filter(|p| prefixes.iter().any(|x| p.starts_with(x)))
        .collect();
    found.sort();
    found.dedup();
    found
}

const HEAVY: [&str; 7] = [
    "wasmtime",
    "cranelift",
    "rmcp",
    "clap",
    "anyhow",
    "icu_",
    "tracing-subscriber",
];

#[test]
fn native_only_pulls_no_wasm_runtime_mcp_cli_or_icu() {
    let packages = tree(&["native"]);
    assert!(packages.iter().any(|p| p == "toolwright-native"), "{packages:?}");
    assert!(packages.iter().any(|p| p == "toolwright-core"));
    assert_eq!(having(&packages, &HEAVY), Vec::<&String>::new());
    assert!(
        !packages
            .iter()
            .any(|p| p == "toolwright-wasm" || p == "toolwright-mcp")
    );
}

#[test]
fn the_default_features_have_every_part() {
    let packages = tree(&[]);
    for part in [
        "toolwright-wasm",
        "toolwright-mcp",
        "wasmtime",
        "rmcp",
        "icu_segmenter",
        "icu_collator",
    ] {
        assert!(
            packages.iter().any(|p| p == part),
            "{part} is missing from the default build"
        );
    }
    assert_eq!(
        having(&packages, &["clap", "tracing-subscriber"]),
        Vec::<&String>::new()
    );
}

#[test]
fn only_the_command_line_uses_clap_and_anyhow() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new(env!("CARGO"))
        .current_dir(root)
        .args([
            "metadata",
            "--locked",
            "--offline",
            "--no-deps",
            "--format-version",
            "1",
        ])
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut libraries = 0;
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        if !name.starts_with("toolwright") || name == "toolwright-cli" || name == "toolwright-tests" {
            continue;
        }
        libraries += 1;
        for dependency in package["dependencies"].as_array().unwrap() {
            let dep = dependency["name"].as_str().unwrap();
            let normal = dependency["kind"].is_null();
            assert!(
                !(normal && ["clap", "anyhow", "tracing-subscriber"].contains(&dep)),
                "{name} depends on {dep}: only the command line may"
            );
        }
    }
    assert!(libraries >= 6, "the host's library crates were not found");
}
