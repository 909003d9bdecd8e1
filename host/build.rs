//! Builds the reference plugins (the seven built-in tools) as `wasm32-wasip2` components and embeds them, as
//! wasmtime's test-programs do: cargo runs for the wasm target in a target directory of its own, so a plain
//! `cargo build` or `cargo test` needs no other step. Adds the wasm target with rustup when it is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

const PLUGINS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];
/// Third-party-style examples: (package, wasm file stem).
const EXAMPLES: [(&str, &str); 2] = [
    ("toolwright-example-wordcount", "toolwright_example_wordcount"),
    ("toolwright-example-guard", "toolwright_example_guard"),
];
const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().expect("the workspace root").to_path_buf();
    for dir in ["sdk", "plugins", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("Cargo.toml").display());
    println!("cargo:rerun-if-changed={}", root.join("Cargo.lock").display());
    println!("cargo:rerun-if-env-changed=TOOLWRIGHT_SKIP_WASM_BUILD");
    let out_dir = PathBuf::from(env("OUT_DIR"));
    let generated = out_dir.join("builtin_wasm.rs");

    if std::env::var_os("TOOLWRIGHT_SKIP_WASM_BUILD").is_some() {
        println!("cargo:warning=TOOLWRIGHT_SKIP_WASM_BUILD is set: the wasm built-ins are not built");
        std::fs::write(&generated, "/// Not built (TOOLWRIGHT_SKIP_WASM_BUILD).\npub const BUILTINS: Option<&[(&str, &[u8])]> = None;\n/// Not built.\npub const EXAMPLES: Option<&[(&str, &[u8])]> = None;\n")
            .expect("write the generated file");
        return;
    }

    ensure_target();
    let target_dir = wasm_target_dir(&out_dir);
    let cargo = env("CARGO");
    let packages = PLUGINS
        .iter()
        .map(|p| format!("toolwright-tool-{p}"))
        .chain(EXAMPLES.iter().map(|(p, _)| p.to_string()));
    for package in packages {
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(&root)
            .args([
                "rustc",
                "--quiet",
                "--locked",
                "-p",
                &package,
                "--target",
                TARGET,
                "--profile",
                "plugin",
            ])
            .args(["--crate-type", "cdylib", "--target-dir"])
            .arg(&target_dir);
        // Flags meant for the host build must not leak into the guest build.
        for var in [
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTFLAGS",
            "CARGO_BUILD_RUSTFLAGS",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
        ] {
            cmd.env_remove(var);
        }
        let status = cmd
            .status()
            .unwrap_or_else(|e| panic!("cannot run cargo to build {package} for {TARGET}: {e}"));
        assert!(
            status.success(),
            "building {package} for {TARGET} failed (see the errors above)"
        );
    }
    let mut code = String::from(
        "/// The built-in tools as wasm components: (name, component bytes).\npub const BUILTINS: Option<&[(&str, &[u8])]> = Some(&[\n",
    );
    for plugin in PLUGINS {
        let wasm = target_dir
            .join(TARGET)
            .join("plugin")
            .join(format!("toolwright_tool_{plugin}.wasm"));
        assert!(wasm.is_file(), "{} was not produced", wasm.display());
        code.push_str(&format!(
            "    ({plugin:?}, include_bytes!({:?})),\n",
            wasm.display().to_string()
        ));
    }
    code.push_str("]);\n");
    code.push_str("/// Third-party-style example plugins: (name, component bytes).\npub const EXAMPLES: Option<&[(&str, &[u8])]> = Some(&[\n");
    for (package, stem) in EXAMPLES {
        let wasm = target_dir
            .join(TARGET)
            .join("plugin")
            .join(format!("{stem}.wasm"));
        assert!(wasm.is_file(), "{} was not produced", wasm.display());
        code.push_str(&format!(
            "    ({package:?}, include_bytes!({:?})),\n",
            wasm.display().to_string()
        ));
    }
    code.push_str("]);\n");
    std::fs::write(&generated, code).expect("write the generated file");
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("cargo sets {name} for build scripts"))
}

/// `<target dir>/wasm-plugins`: shared by debug and release host builds, apart from the host's own artifacts.
fn wasm_target_dir(out_dir: &Path) -> PathBuf {
    let build = out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .expect("OUT_DIR under a build dir");
    let profile_dir = build.parent().expect("a profile dir");
    let target = profile_dir.parent().expect("a target dir");
    // Cross builds add a triple level: <target>/<triple>/<profile>/build.
    let target = if target.join("CACHEDIR.TAG").is_file() || target.parent().is_none() {
        target
    } else {
        target
            .parent()
            .filter(|p| p.join("CACHEDIR.TAG").is_file())
            .unwrap_or(target)
    };
    target.join("wasm-plugins")
}

/// rust-toolchain.toml lists the wasm target, but rustup does not add it to an installed toolchain.
fn ensure_target() {
    let sysroot = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let installed = sysroot
        .as_ref()
        .is_some_and(|s| Path::new(s).join("lib/rustlib").join(TARGET).is_dir());
    if installed {
        return;
    }
    let added = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        added,
        "the {TARGET} target is missing and `rustup target add {TARGET}` failed; run it yourself, then build again"
    );
}
