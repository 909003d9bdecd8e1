//! Tells the crates that embed this tool as a wasm component where its source is
//! (`DEP_TOOLWRIGHT_TOOL_POWERSHELL_SRC`, through `links`), so they can build it wherever this crate sits.

// A build script runs on the host, where `ctx.env()` (what plugins/clippy.toml asks for instead) does not exist.
#[allow(clippy::disallowed_methods)]
fn main() {
    // Read when the script runs, not when it was compiled: a target directory shared by two checkouts (a
    // worktree, a CI clone) shares this script's binary, and a path baked into it would name the other one.
    let src = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo::metadata=src={src}");
}
