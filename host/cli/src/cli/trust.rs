//! `toolwright trust [DIR]`: trust a project as it is now (its own plugins and grants load from then on), take
//! the trust back (`--remove`), or list the trusted projects (`--list`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use toolwright::trust::project::{self as trust, ProjectTrust};

/// Arguments of `toolwright trust`.
#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// The project (default: the current directory).
    dir: Option<PathBuf>,
    /// Stop trusting it.
    #[arg(long, conflicts_with = "list")]
    remove: bool,
    /// List the trusted projects and whether each still ships what was trusted.
    #[arg(long)]
    list: bool,
}

#[allow(clippy::print_stdout)]
pub fn run(args: TrustArgs) -> anyhow::Result<ExitCode> {
    let file = trust::trust_file().context("no configuration directory: set HOME or XDG_CONFIG_HOME")?;
    if args.list {
        for (path, state) in trust::list_in(&file)? {
            let state = match state {
                ProjectTrust::Trusted => "trusted",
                ProjectTrust::Changed => "changed since trusted (not loaded)",
                ProjectTrust::Untrusted | ProjectTrust::Nothing => "ships nothing now",
            };
            println!("{}  {state}", toolwright::text::escape(&path));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let dir = match args.dir {
        Some(dir) => dir,
        None => std::env::current_dir().context("the current directory")?,
    };
    let dir = dir
        .canonicalize()
        .with_context(|| format!("the project {}", dir.display()))?;
    if args.remove {
        if trust::untrust_in(&file, &dir)? {
            println!("{} is no longer trusted", dir.display());
        } else {
            println!("{} was not trusted", dir.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let digest = trust::trust_in(&file, &dir)?;
    println!(
        "trusted {} as it is now (sha256 {digest}): its plugins, handlers and grants load until what it ships \
         changes",
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
