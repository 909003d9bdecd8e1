//! `toolwright cache`: the compiled-component cache, listed, pruned to its cap, or cleared.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};

/// Arguments of `toolwright cache`.
#[derive(Debug, Args)]
pub struct CacheArgs {
    #[command(subcommand)]
    action: Action,
    /// The cache directory (default: `$TOOLWRIGHT_CACHE_DIR` or `~/.cache/toolwright/components`).
    #[arg(long, value_name = "DIR", global = true)]
    cache_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// List the compiled components, most recently used first, with their sizes.
    List,
    /// Remove the least recently used components beyond the cap (`$TOOLWRIGHT_CACHE_MAX_MIB`, 2048 by default),
    /// and temporary files of writes that never finished.
    Prune {
        /// The cap, in MiB, instead of the default.
        #[arg(long, value_name = "MIB")]
        max_mib: Option<u64>,
    },
    /// Remove every compiled component: each plugin compiles again, at its first call (the plugins'
    /// descriptions, a few KB each, stay: their tools are listed at once).
    Clear,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

pub fn run(args: CacheArgs) -> anyhow::Result<ExitCode> {
    let dir = args.cache_dir.unwrap_or_else(toolwright::wasm::default_cache_dir);
    let mut out = std::io::stdout().lock();
    match args.action {
        Action::List => {
            let entries = toolwright::wasm::cache_entries(&dir)
                .with_context(|| format!("cannot read the cache {}", dir.display()))?;
            let total: u64 = entries.iter().map(|e| e.size).sum();
            writeln!(
                out,
                "{}: {} compiled components, {:.1} MiB (cap {:.0} MiB)",
                dir.display(),
                entries.len(),
                mib(total),
                mib(toolwright::wasm::cache_max_bytes())
            )?;
            for e in &entries {
                let age = e.last_used.elapsed().unwrap_or_default().as_secs();
                let when = match age {
                    0..120 => format!("{age} s ago"),
                    120..7200 => format!("{} min ago", age / 60),
                    7200..172_800 => format!("{} h ago", age / 3600),
                    _ => format!("{} days ago", age / 86_400),
                };
                writeln!(
                    out,
                    "  {}…  {:>8.1} MiB  used {when}  (engine {})",
                    &e.digest[..e.digest.len().min(16)],
                    mib(e.size),
                    e.fingerprint
                )?;
            }
        }
        Action::Prune { max_mib } => {
            let max = max_mib.map_or_else(toolwright::wasm::cache_max_bytes, |m| m.saturating_mul(1 << 20));
            let removed = toolwright::wasm::prune_cache(&dir, max)
                .with_context(|| format!("cannot prune the cache {}", dir.display()))?;
            let freed: u64 = removed.iter().map(|e| e.size).sum();
            writeln!(
                out,
                "removed {} compiled components ({:.1} MiB) to fit in {:.0} MiB",
                removed.len(),
                mib(freed),
                mib(max)
            )?;
        }
        Action::Clear => {
            let (count, bytes) = toolwright::wasm::clear_cache(&dir)
                .with_context(|| format!("cannot clear the cache {}", dir.display()))?;
            writeln!(out, "removed {count} compiled components ({:.1} MiB)", mib(bytes))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
