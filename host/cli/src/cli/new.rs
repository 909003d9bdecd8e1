//! `toolwright new NAME`: a complete plugin project that builds, tests, passes `toolwright check` and runs under
//! `toolwright exec --plugins .`, from templates compiled into the binary.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

/// Arguments of `toolwright new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The plugin's name (`[a-z][a-z0-9-]*`): the project directory, the crate and the plugin's name.
    name: String,
    /// The language of the project.
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
    /// A handler plugin (pi's `tool_call` hook) instead of a tool plugin.
    #[arg(long)]
    handler: bool,
    /// Where to create the project directory (default: the current directory).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The Toolwright SDK to depend on, a `sdk` directory of a Toolwright checkout (default: the checkout this
    /// `toolwright` was built from, if it is still there, else the SDK's git repository).
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

/// The languages `toolwright new` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Lang {
    /// Rust, with the Toolwright SDK (`toolwright-sdk`).
    Rust,
    /// Python, with Toolwright's thin Python SDK, built with componentize-py.
    Python,
    /// JavaScript, with Toolwright's thin JavaScript SDK, built with componentize-js.
    Js,
}

/// The template tool's name: what it does (counts a file's lines, words and bytes), short as pi's `read` and `ls`,
/// the same in every language and project.
const TOOL: &str = "count";

const GIT_SDK: &str = r#"toolwright-sdk = { git = "https://github.com/toolwright/toolwright" }"#;

/// The SDK of the checkout this binary was built from, if it is still there.
fn checkout_sdk() -> Option<PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("sdk"))
        .find(|sdk| {
            std::fs::read_to_string(sdk.join("Cargo.toml"))
                .is_ok_and(|manifest| manifest.contains("name = \"toolwright-sdk\""))
        })
}

/// Whether `name` can be a plugin, a crate and a directory.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
}

/// Fill `{{key}}` in `template`.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut text = template.to_owned();
    for (key, value) in values {
        text = text.replace(&format!("{{{{{key}}}}}"), value);
    }
    text
}

/// The files of a Rust project: (relative path, contents, executable).
fn rust_project(name: &str, handler: bool, sdk: &str) -> Vec<(String, String, bool)> {
    let crate_name = name.replace('-', "_");
    let tool = TOOL.to_owned();
    let (description, grants) = match handler {
        true => handler_texts(name),
        false => tool_texts(name, &tool),
    };
    let (kind, export, world, handler_flag) = match handler {
        true => ("handler", "export_handler", "handler-plugin", " --handler"),
        false => ("tool", "export_tool", "tool-plugin", ""),
    };
    let calls = sample_calls(handler, &tool);
    let values = [
        ("name", name),
        ("crate", crate_name.as_str()),
        ("tool", tool.as_str()),
        ("description", description.as_str()),
        ("sdk", sdk),
        ("kind", kind),
        ("export", export),
        ("world", world),
        ("handler_flag", handler_flag),
        ("grants", grants.as_str()),
    ];
    let source = match handler {
        true => include_str!("../../templates/rust/handler.rs.in"),
        false => include_str!("../../templates/rust/tool.rs.in"),
    };
    vec![
        (
            "Cargo.toml".into(),
            fill(include_str!("../../templates/rust/Cargo.toml.in"), &values),
            false,
        ),
        ("src/lib.rs".into(), fill(source, &values), false),
        (
            "build.sh".into(),
            fill(include_str!("../../templates/rust/build.sh.in"), &values),
            true,
        ),
        (
            "README.md".into(),
            fill(include_str!("../../templates/rust/README.md.in"), &values),
            false,
        ),
        (
            "toolwright.toml".into(),
            fill(include_str!("../../templates/rust/toolwright.toml.in"), &values),
            false,
        ),
        ("calls.json".into(), format!("{calls:#}\n"), false),
        (
            ".gitignore".into(),
            "/target\n/*.wasm\nCargo.lock\n".into(),
            false,
        ),
    ]
}

/// The files of a Python project: (relative path, contents, executable).
fn python_project(name: &str, handler: bool) -> Vec<(String, String, bool)> {
    let module = name.replace('-', "_");
    let tool = TOOL.to_owned();
    let ((description, grants), world) = match handler {
        true => (handler_texts(name), "handler-plugin"),
        false => (tool_texts(name, &tool), "tool-plugin"),
    };
    let values = [
        ("name", name),
        ("crate", module.as_str()),
        ("tool", tool.as_str()),
        ("description", description.as_str()),
        ("grants", grants.as_str()),
        ("world", world),
    ];
    let calls = sample_calls(handler, &tool);
    let (app, test) = match handler {
        true => (
            include_str!("../../templates/python/handler.py.in"),
            include_str!("../../templates/python/test_handler.py.in"),
        ),
        false => (
            include_str!("../../templates/python/app.py.in"),
            include_str!("../../templates/python/test_app.py.in"),
        ),
    };
    let mut files = vec![
        ("app.py".into(), fill(app, &values), false),
        ("test_app.py".into(), fill(test, &values), false),
        (
            "toolwright_plugin.py".into(),
            include_str!("../../../../sdk/python/toolwright_plugin.py").to_owned(),
            false,
        ),
        (
            "build.sh".into(),
            fill(include_str!("../../templates/python/build.sh.in"), &values),
            true,
        ),
        (
            "README.md".into(),
            fill(include_str!("../../templates/python/README.md.in"), &values),
            false,
        ),
        (
            "toolwright.toml".into(),
            fill(include_str!("../../templates/python/toolwright.toml.in"), &values),
            false,
        ),
        (
            "pyproject.toml".into(),
            fill(include_str!("../../templates/python/pyproject.toml.in"), &values),
            false,
        ),
        ("calls.json".into(), format!("{calls:#}\n"), false),
        (
            ".gitignore".into(),
            "/.venv\n/*.wasm\n__pycache__/\n".into(),
            false,
        ),
    ];
    files.extend(wit_tree());
    files
}

/// The WIT tree the host implements (`wit/plugin.wit` and the WASI packages its worlds include), for a project's
/// `wit/` directory.
fn wit_tree() -> impl Iterator<Item = (String, String, bool)> {
    super::wit::FILES
        .iter()
        .map(|(path, text)| (format!("wit/{path}"), (*text).to_owned(), false))
}

/// The calls a new project's `calls.json` makes: a handler's blocked and allowed `bash`; a tool's count of the
/// README and of a missing file.
fn sample_calls(handler: bool, tool: &str) -> serde_json::Value {
    match handler {
        true => serde_json::json!({"toolCalls": [
            {"id": "1", "name": "bash", "arguments": {"command": "rm -rf ./nothing-here"}},
            {"id": "2", "name": "bash", "arguments": {"command": "echo allowed"}},
        ]}),
        false => serde_json::json!({"toolCalls": [
            {"id": "1", "name": tool, "arguments": {"path": "README.md"}},
            {"id": "2", "name": tool, "arguments": {"path": "missing.txt"}},
        ]}),
    }
}

/// What a new handler plugin does, and the policy section it needs (none: a handler sees every call).
fn handler_texts(name: &str) -> (String, String) {
    (
        format!("A Toolwright handler plugin: {name} blocks recursive deletes in bash."),
        format!("[plugins.{name}]\n# A handler sees every call whatever it is granted: it asks for nothing."),
    )
}

/// What a new tool plugin does, and the policy section granting what it requests.
fn tool_texts(name: &str, tool: &str) -> (String, String) {
    (
        format!("A Toolwright tool plugin: {tool} counts the lines, words and bytes of a file."),
        format!("[plugins.{name}]\nread = [\".\"]"),
    )
}

/// The files of a JavaScript project: (relative path, contents, executable).
fn js_project(name: &str, handler: bool) -> Vec<(String, String, bool)> {
    let module = name.replace('-', "_");
    let tool = TOOL.to_owned();
    let ((description, grants), world, what) = match handler {
        true => (
            handler_texts(name),
            "handler-plugin",
            "`plugin.onToolCall(…)`, its `tool_call` hook (return nothing to allow, `block(reason)` or \
             `rewrite(args)`; a throw blocks the call, as pi does)",
        ),
        false => (
            tool_texts(name, &tool),
            "tool-plugin",
            "one `plugin.tool(declaration, run)`",
        ),
    };
    let values = [
        ("name", name),
        ("crate", module.as_str()),
        ("tool", tool.as_str()),
        ("description", description.as_str()),
        ("grants", grants.as_str()),
        ("world", world),
        ("what", what),
    ];
    let (app, entry, test) = match handler {
        true => (
            include_str!("../../templates/js/handler.js.in"),
            include_str!("../../templates/js/component-handler.js.in"),
            include_str!("../../templates/js/test-handler.mjs.in"),
        ),
        false => (
            include_str!("../../templates/js/app.js.in"),
            include_str!("../../templates/js/component.js.in"),
            include_str!("../../templates/js/test.mjs.in"),
        ),
    };
    let template =
        |path: &str, text: &str, executable: bool| (path.to_owned(), fill(text, &values), executable);
    let mut files = vec![
        template("app.js", app, false),
        template("component.js", entry, false),
        template("test.mjs", test, false),
        (
            "toolwright.js".into(),
            include_str!("../../../../sdk/js/toolwright.js").to_owned(),
            false,
        ),
        template(
            "build.mjs",
            include_str!("../../templates/js/build.mjs.in"),
            false,
        ),
        template("build.sh", include_str!("../../templates/js/build.sh.in"), true),
        template(
            "package.json",
            include_str!("../../templates/js/package.json.in"),
            false,
        ),
        template(
            "README.md",
            include_str!("../../templates/js/README.md.in"),
            false,
        ),
        template(
            "toolwright.toml",
            include_str!("../../templates/js/toolwright.toml.in"),
            false,
        ),
        (
            "calls.json".into(),
            format!("{:#}\n", sample_calls(handler, &tool)),
            false,
        ),
        ("package.js".into(), js_package_module(name, &description), false),
        (".gitignore".into(), "/node_modules\n/*.wasm\n".into(), false),
    ];
    files.extend(wit_tree());
    files
}

/// `package.js`, as `build.mjs` writes it from `package.json`: the plugin's metadata for `app.js` (a component
/// cannot read `package.json`). Written by `new` too, so the unit tests run before the first build.
fn js_package_module(name: &str, description: &str) -> String {
    let metadata = serde_json::json!({"name": name, "version": "0.1.0", "description": description});
    format!(
        "// Written by build.mjs from package.json: edit package.json, not this file.\nexport default {};\n",
        serde_json::to_string_pretty(&metadata).unwrap_or_default()
    )
}

pub fn run(args: NewArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        valid_name(&args.name),
        "`{}` cannot name a plugin: use lower-case letters, digits and `-`, starting with a letter (my-tool)",
        args.name
    );
    let parent = match args.dir {
        Some(dir) => dir,
        None => std::env::current_dir().context("cannot determine the current directory")?,
    };
    let root = parent.join(&args.name);
    anyhow::ensure!(
        !root.exists(),
        "{} already exists: choose another name or --dir",
        root.display()
    );
    let sdk = match args.sdk.or_else(checkout_sdk) {
        Some(sdk) => {
            let sdk = std::path::absolute(&sdk).unwrap_or(sdk);
            anyhow::ensure!(
                sdk.join("Cargo.toml").is_file(),
                "{} is not the Toolwright SDK (no Cargo.toml)",
                sdk.display()
            );
            format!("toolwright-sdk = {{ path = {:?} }}", sdk.display().to_string())
        }
        None => GIT_SDK.to_owned(),
    };
    let files = match args.lang {
        Lang::Rust => rust_project(&args.name, args.handler, &sdk),
        Lang::Python => python_project(&args.name, args.handler),
        Lang::Js => js_project(&args.name, args.handler),
    };
    for (path, contents, executable) in &files {
        let file = root.join(path);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&file, contents).with_context(|| format!("cannot write {}", file.display()))?;
        if *executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", file.display()))?;
        }
    }
    let kind = if args.handler { "handler" } else { "tool" };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "created the {kind} plugin {} in {}",
        args.name,
        root.display()
    )?;
    writeln!(
        out,
        "next: cd {} && ./build.sh && toolwright exec --plugins . calls.json",
        root.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_templates_filled() {
        assert!(valid_name("my-tool2"));
        for bad in ["My-tool", "2tool", "my_tool", "my-", "", "a b"] {
            assert!(!valid_name(bad), "{bad}");
        }
        assert_eq!(fill("{{a}}-{{b}}-{{a}}", &[("a", "x"), ("b", "y")]), "x-y-x");
        for handler in [false, true] {
            for (path, text, _) in rust_project("my-tool", handler, GIT_SDK) {
                assert!(
                    !text.contains("{{"),
                    "{path} has an unfilled placeholder:\n{text}"
                );
            }
            for (path, text, _) in python_project("my-tool", handler)
                .into_iter()
                .chain(js_project("my-tool", handler))
            {
                assert!(!text.contains("{{"), "{path} has an unfilled placeholder");
            }
        }
    }
}
