//! Builds the reference plugins (the seven built-in tools) and the example plugins as `wasm32-wasip2`
//! components and embeds them, so a plain `cargo build` or `cargo test` needs no other step. Adds the wasm target
//! with rustup when it is missing.

use std::path::PathBuf;

#[path = "build/wasm.rs"]
mod wasm;

const PLUGINS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];
/// Third-party-style examples.
const EXAMPLES: [&str; 4] = [
    "toolwright-example-wordcount",
    "toolwright-example-guard",
    "toolwright-example-redact",
    "toolwright-example-todos",
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir.parent().expect("the workspace root").to_path_buf();
    for dir in ["sdk", "plugins", "wit", "host/build"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-changed={}", root.join("Cargo.lock").display());
    println!("cargo:rerun-if-env-changed=TOOLWRIGHT_SKIP_WASM_BUILD");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    let generated = out_dir.join("builtin_wasm.rs");

    if std::env::var_os("TOOLWRIGHT_SKIP_WASM_BUILD").is_some() {
        println!("cargo:warning=TOOLWRIGHT_SKIP_WASM_BUILD is set: the wasm built-ins are not built");
        let code = "/// Not built (TOOLWRIGHT_SKIP_WASM_BUILD).\npub const BUILTINS: Option<&[(&str, &[u8])]> = None;\n\
                    /// Not built.\npub const EXAMPLES: Option<&[(&str, &[u8])]> = None;\n\
                    /// Not built.\npub const CODEMODE: Option<&[u8]> = None;\n";
        std::fs::write(&generated, code).expect("write the generated file");
        return;
    }
    wasm::ensure_target();
    let target_dir = wasm::target_dir(&out_dir);
    let mut code = String::from(
        "/// The built-in tools as wasm components: (name, component bytes).\npub const BUILTINS: Option<&[(&str, &[u8])]> = Some(&[\n",
    );
    for plugin in PLUGINS {
        let wasm = wasm::build(&root, &target_dir, &format!("toolwright-tool-{plugin}"));
        code.push_str(&format!(
            "    ({plugin:?}, include_bytes!({:?})),\n",
            wasm.display().to_string()
        ));
    }
    code.push_str("]);\n/// Third-party-style example plugins: (package, component bytes).\npub const EXAMPLES: Option<&[(&str, &[u8])]> = Some(&[\n");
    for package in EXAMPLES {
        let wasm = wasm::build(&root, &target_dir, package);
        code.push_str(&format!(
            "    ({package:?}, include_bytes!({:?})),\n",
            wasm.display().to_string()
        ));
    }
    code.push_str("]);\n");
    let codemode = wasm::build(&root, &target_dir, "toolwright-tool-codemode");
    code.push_str(&format!(
        "/// The codemode tool (the Boa engine inside) as a wasm component.\npub const CODEMODE: Option<&[u8]> = Some(include_bytes!({:?}));\n",
        codemode.display().to_string()
    ));
    std::fs::write(&generated, code).expect("write the generated file");
}
