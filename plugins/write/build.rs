//! Tells the crates that embed this tool as a wasm component where its source is
//! (`DEP_TOOLWRIGHT_TOOL_WRITE_SRC`, through `links`), so they can build it wherever this crate sits.

fn main() {
    println!("cargo::metadata=src={}", env!("CARGO_MANIFEST_DIR"));
}
