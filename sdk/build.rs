//! Tells the crates that build plugins from source where the SDK (and the WIT it binds) is
//! (`DEP_TOOLWRIGHT_SDK_SRC`, through `links`), so their build scripts know what to watch.

fn main() {
    println!("cargo::metadata=src={}", env!("CARGO_MANIFEST_DIR"));
}
