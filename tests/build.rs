//! Builds the test programs (guests that try to cross every sandbox boundary) as `wasm32-wasip2` components,
//! as wasmtime's test-programs do, and exposes their paths; and the example plugins, embedded.

use std::path::PathBuf;

#[path = "../host/wasm/build/wasm.rs"]
mod wasm;

/// The third-party-style example plugins (`plugins/examples`), embedded for the tests.
const EXAMPLES: [&str; 4] = [
    "toolwright-example-wordcount",
    "toolwright-example-guard",
    "toolwright-example-redact",
    "toolwright-example-todos",
];

const PROGRAMS: [&str; 10] = [
    "toolwright-test-probe",
    "toolwright-test-loadout",
    "toolwright-test-nested",
    "toolwright-test-raw",
    "toolwright-test-impostor",
    "toolwright-test-stall",
    "toolwright-test-selfref",
    "toolwright-test-conformance",
    "toolwright-test-bomb",
    "toolwright-test-legacy",
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir.parent().expect("the workspace root").to_path_buf();
    for dir in [
        "sdk",
        "wit",
        "host/wasm/wit-0.1",
        "tests/programs",
        "plugins/examples",
        "host/wasm/build",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    wasm::ensure_target();
    let target_dir = wasm::target_dir(&out_dir);
    // Every program and example in one cargo invocation: shared dependencies, both cores.
    let dirs: Vec<PathBuf> = PROGRAMS
        .iter()
        .map(|p| {
            root.join("tests/programs")
                .join(p.trim_start_matches("toolwright-test-"))
        })
        .chain(EXAMPLES.iter().map(|p| {
            root.join("plugins/examples")
                .join(p.trim_start_matches("toolwright-example-"))
        }))
        .collect();
    let packages: Vec<(&str, &std::path::Path)> = PROGRAMS
        .iter()
        .chain(EXAMPLES.iter())
        .copied()
        .zip(dirs.iter().map(PathBuf::as_path))
        .collect();
    let mut built = wasm::build_all(&packages, &target_dir).into_iter();
    let mut code = String::new();
    for package in PROGRAMS {
        let wasm = built.next().expect("one component per program");
        let name = package.trim_start_matches("toolwright-test-").to_uppercase();
        code.push_str(&format!(
            "/// The `{package}` component.\npub const {name}: &str = {:?};\n",
            wasm.display().to_string()
        ));
    }
    code.push_str(
        "/// The example plugins: (package, component bytes).\npub const EXAMPLES: &[(&str, &[u8])] = &[\n",
    );
    for package in EXAMPLES {
        let wasm = built.next().expect("one component per example");
        code.push_str(&format!(
            "    ({package:?}, include_bytes!({:?})),\n",
            wasm.display().to_string()
        ));
    }
    code.push_str("];\n");
    std::fs::write(out_dir.join("programs.rs"), code).expect("write the generated file");
}
