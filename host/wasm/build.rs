//! Builds the reference plugins (the built-in tools, and codemode with the `codemode` feature) as
//! `wasm32-wasip2` components from their crates' sources and embeds them, so a plain `cargo build` needs no
//! other step. Adds the wasm target with rustup when it is missing.
//!
//! Each plugin crate is a dependency of this one and says where its source is through `links` metadata
//! (`DEP_TOOLWRIGHT_TOOL_<NAME>_SRC`), so this works wherever the crates sit: in this workspace, in a git
//! checkout, or unpacked from a registry.

use std::path::PathBuf;

#[path = "build/wasm.rs"]
mod wasm;

/// A copy of the component `wasm` in this build's `out_dir`, which is what is embedded and hashed: the build
/// directory of the components is shared by every profile and feature set, so another build may rewrite a
/// component there after this one hashed it, and before (or long after) this crate includes it.
fn embed(wasm: &std::path::Path, out_dir: &std::path::Path) -> PathBuf {
    let copy = out_dir.join(wasm.file_name().expect("a component file"));
    std::fs::copy(wasm, &copy)
        .unwrap_or_else(|e| panic!("cannot copy {} to {}: {e}", wasm.display(), copy.display()));
    copy
}

/// The SHA-256 of `wasm`, as the Rust expression of a `[u8; 32]`: the digest a start would otherwise compute from
/// the embedded bytes every time (about 1 ms per MB).
fn digest_literal(wasm: &std::path::Path) -> String {
    use sha2::Digest as _;
    let bytes = std::fs::read(wasm).unwrap_or_else(|e| panic!("read {}: {e}", wasm.display()));
    let bytes: Vec<String> = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:#04x}"))
        .collect();
    format!("[{}]", bytes.join(", "))
}

/// pi's order of its built-ins, which the registry keeps (declarations, the prompt, `toolwright tools`); a
/// built-in it does not name comes after them, by name.
const PI_ORDER: [&str; 8] = [
    "read",
    "bash",
    "powershell",
    "edit",
    "write",
    "grep",
    "find",
    "ls",
];

/// The built-in tools, in pi's order: every dependency with `links = "toolwright-tool-<name>"` but codemode.
/// Found in the environment when the script runs, not compiled in: a target directory shared by two checkouts
/// shares this script's binary, and a list baked into it would be the other checkout's.
fn plugins() -> Vec<String> {
    let mut names: Vec<String> = std::env::vars()
        .filter_map(|(key, _)| {
            let name = key.strip_prefix("DEP_TOOLWRIGHT_TOOL_")?.strip_suffix("_SRC")?;
            Some(name.to_lowercase().replace('_', "-"))
        })
        .filter(|name| name != "codemode")
        .collect();
    names.sort_by_key(|name| {
        let at = PI_ORDER.iter().position(|p| p == name);
        (at.unwrap_or(PI_ORDER.len()), name.clone())
    });
    names
}

/// Where cargo says the dependency `links = "toolwright-<name>"` has its source.
fn source(name: &str) -> PathBuf {
    let var = format!("DEP_TOOLWRIGHT_{}_SRC", name.replace('-', "_").to_uppercase());
    println!("cargo:rerun-if-env-changed={var}");
    PathBuf::from(std::env::var(&var).unwrap_or_else(|_| panic!("{var} is set by cargo through `links`")))
}

fn main() {
    println!("cargo:rerun-if-env-changed=TOOLWRIGHT_SKIP_WASM_BUILD");
    println!("cargo:rerun-if-changed=build");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    let generated = out_dir.join("components.rs");
    let codemode = std::env::var_os("CARGO_FEATURE_CODEMODE").is_some();

    if std::env::var_os("TOOLWRIGHT_SKIP_WASM_BUILD").is_some() {
        println!("cargo:warning=TOOLWRIGHT_SKIP_WASM_BUILD is set: the wasm built-ins are not built");
        let code = "/// Not built (TOOLWRIGHT_SKIP_WASM_BUILD).\npub const BUILTINS: Option<&[(&str, &[u8])]> = None;\n\
                    /// Not built.\npub const BUILTIN_DIGESTS: Option<&[(&str, [u8; 32])]> = None;\n\
                    /// Not built.\npub const CODEMODE: Option<&[u8]> = None;\n\
                    /// Not built.\npub const CODEMODE_DIGEST: Option<[u8; 32]> = None;\n";
        std::fs::write(&generated, code).expect("write the generated file");
        return;
    }
    let sdk = source("sdk");
    println!("cargo:rerun-if-changed={}", sdk.display());
    wasm::ensure_target();
    let target_dir = wasm::target_dir(&out_dir);
    let mut code = String::from(
        "/// The built-in tools as wasm components: (name, component bytes).\npub const BUILTINS: Option<&[(&str, &[u8])]> = Some(&[\n",
    );
    let mut digests = String::from(
        "/// The SHA-256 of each of [`BUILTINS`], in the same order, computed when they were built.\npub const BUILTIN_DIGESTS: Option<&[(&str, [u8; 32])]> = Some(&[\n",
    );
    // One cargo invocation for all of them (codemode too, when asked): shared dependencies, both cores.
    let plugins = plugins();
    let mut packages: Vec<(String, PathBuf)> = plugins
        .iter()
        .map(|plugin| {
            (
                format!("toolwright-tool-{plugin}"),
                source(&format!("tool-{plugin}")),
            )
        })
        .collect();
    if codemode {
        packages.push(("toolwright-tool-codemode".into(), source("tool-codemode")));
    }
    for (_, dir) in &packages {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    let asked: Vec<(&str, &std::path::Path)> =
        packages.iter().map(|(p, d)| (p.as_str(), d.as_path())).collect();
    let mut built = wasm::build_all(&asked, &target_dir).into_iter();
    for plugin in &plugins {
        let wasm = embed(&built.next().expect("one component per plugin"), &out_dir);
        code.push_str(&format!(
            "    ({plugin:?}, include_bytes!({:?})),\n",
            wasm.display().to_string()
        ));
        digests.push_str(&format!("    ({plugin:?}, {}),\n", digest_literal(&wasm)));
    }
    code.push_str("]);\n");
    digests.push_str("]);\n");
    code.push_str(&digests);
    if codemode {
        let wasm = embed(&built.next().expect("the codemode component"), &out_dir);
        code.push_str(&format!(
            "/// The codemode tool (the Boa engine inside) as a wasm component.\npub const CODEMODE: Option<&[u8]> = Some(include_bytes!({:?}));\n\
             /// The SHA-256 of [`CODEMODE`], computed when it was built.\npub const CODEMODE_DIGEST: Option<[u8; 32]> = Some({});\n",
            wasm.display().to_string(),
            digest_literal(&wasm)
        ));
    } else {
        code.push_str(
            "/// Built without the `codemode` feature.\npub const CODEMODE: Option<&[u8]> = None;\n\
             /// Built without the `codemode` feature.\npub const CODEMODE_DIGEST: Option<[u8; 32]> = None;\n",
        );
    }
    std::fs::write(&generated, code).expect("write the generated file");
}
