//! Tells the crates that build plugins from source where the SDK (and the WIT it binds) is
//! (`DEP_TOOLWRIGHT_SDK_SRC`, through `links`), so their build scripts know what to watch.

fn main() {
    // Read when the script runs, not when it was compiled: a target directory shared by two checkouts (a
    // worktree, a CI clone) shares this script's binary, and a path baked into it would name the other one.
    let src = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo::metadata=src={src}");
}
