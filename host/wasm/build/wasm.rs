//! Building crates as `wasm32-wasip2` components from a build script, as wasmtime's test-programs do: cargo runs
//! for the wasm target in a target directory of its own. Shared by `host/wasm/build.rs` (the reference plugins,
//! wherever their crates sit) and `tests/build.rs` (the test programs and the examples of this workspace).

use std::path::{Path, PathBuf};
use std::process::Command;

pub const TARGET: &str = "wasm32-wasip2";

/// `<target dir>/wasm-plugins`: shared by debug and release builds, apart from the host's own artifacts.
pub fn target_dir(out_dir: &Path) -> PathBuf {
    let build = out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .expect("OUT_DIR under a build dir");
    let target = build.parent().and_then(Path::parent).expect("a target dir");
    target.join("wasm-plugins")
}

/// rust-toolchain.toml lists the wasm target, but rustup does not add it to an installed toolchain.
pub fn ensure_target() {
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

/// The `plugin` profile, given on the command line so that a crate outside this workspace builds the same way,
/// and the guest's target features: wasm SIMD (wasmtime runs it natively), which memchr and the regex engines
/// use — `grep` over this repository 19 % faster (docs/performance.md).
const PROFILE: [&str; 8] = [
    "target.wasm32-wasip2.rustflags=[\"-C\", \"target-feature=+simd128\"]",
    "profile.plugin.inherits=\"release\"",
    "profile.plugin.opt-level=\"s\"",
    "profile.plugin.lto=true",
    "profile.plugin.codegen-units=1",
    "profile.plugin.panic=\"abort\"",
    "profile.plugin.strip=true",
    "profile.plugin.debug=false",
];

/// Build `package`, found from the directory `dir` (its own or its workspace's), as a component with the
/// `plugin` profile; its `.wasm` path. Dependencies are the lockfile's when one governs `dir`.
pub fn build(dir: &Path, target_dir: &Path, package: &str) -> PathBuf {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(dir)
        .args([
            "rustc",
            "--quiet",
            "-p",
            package,
            "--target",
            TARGET,
            "--profile",
            "plugin",
        ])
        .args(["--crate-type", "cdylib", "--target-dir"])
        .arg(target_dir);
    for setting in PROFILE {
        cmd.args(["--config", setting]);
    }
    if dir.ancestors().any(|d| d.join("Cargo.lock").is_file()) {
        cmd.arg("--locked");
    }
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
    let wasm = target_dir
        .join(TARGET)
        .join("plugin")
        .join(format!("{}.wasm", package.replace('-', "_")));
    assert!(wasm.is_file(), "{} was not produced", wasm.display());
    wasm
}
