//! `toolwright wit [--out DIR]`: the WIT a plugin is built against, from the binary itself — Toolwright's
//! `plugin.wit` and the WASI 0.2 packages its worlds include, at the version the host links.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

/// The WIT tree: (path below the `wit` directory, contents).
pub const FILES: &[(&str, &str)] = &[
    ("plugin.wit", include_str!("../../../../wit/plugin.wit")),
    (
        "deps/cli/package.wit",
        include_str!("../../../../wit/deps/cli/package.wit"),
    ),
    (
        "deps/clocks/package.wit",
        include_str!("../../../../wit/deps/clocks/package.wit"),
    ),
    (
        "deps/filesystem/package.wit",
        include_str!("../../../../wit/deps/filesystem/package.wit"),
    ),
    (
        "deps/io/package.wit",
        include_str!("../../../../wit/deps/io/package.wit"),
    ),
    (
        "deps/random/package.wit",
        include_str!("../../../../wit/deps/random/package.wit"),
    ),
    (
        "deps/sockets/package.wit",
        include_str!("../../../../wit/deps/sockets/package.wit"),
    ),
];

/// Arguments of `toolwright wit`.
#[derive(Debug, Args)]
pub struct WitArgs {
    /// Write the whole tree (plugin.wit and deps/) into this directory, for a build tool's `--wit` option;
    /// without it, print plugin.wit.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Write the WIT tree below `dir` (creating it), replacing files of the same names.
pub fn write_tree(dir: &Path) -> anyhow::Result<()> {
    for (path, text) in FILES {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(())
}

pub fn run(args: WitArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match args.out {
        Some(dir) => {
            write_tree(&dir)?;
            writeln!(
                out,
                "wrote {} WIT files to {} (toolwright:plugin@0.2.0 and the WASI 0.2.12 packages its worlds include)",
                FILES.len(),
                dir.display()
            )?;
        }
        None => out.write_all(FILES[0].1.as_bytes())?,
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_the_repository_wit_directory() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
        let mut on_disk = Vec::new();
        let mut pending = vec![root.clone()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    pending.push(path);
                } else {
                    on_disk.push(path.strip_prefix(&root).unwrap().to_string_lossy().into_owned());
                }
            }
        }
        on_disk.sort();
        let mut embedded: Vec<String> = FILES.iter().map(|(p, _)| (*p).to_owned()).collect();
        embedded.sort();
        assert_eq!(
            on_disk, embedded,
            "wit/ and the files `toolwright wit` writes differ"
        );
        let written = tempfile::tempdir().unwrap();
        write_tree(written.path()).unwrap();
        for (path, text) in FILES {
            assert_eq!(std::fs::read_to_string(root.join(path)).unwrap(), *text);
            assert_eq!(std::fs::read_to_string(written.path().join(path)).unwrap(), *text);
        }
    }
}
