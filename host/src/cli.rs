//! Command-line parsing and dispatch. Only the binary uses `clap` and `anyhow`.

mod exec;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Toolwright: run AI-agent tool calls through pi's pipeline, natively or in a WebAssembly sandbox.
#[derive(Debug, Parser)]
#[command(name = "toolwright", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one batch of tool calls (as one assistant message carries them) and print the events.
    Exec(exec::ExecArgs),
}

pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("TOOLWRIGHT_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Exec(args) => exec::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("toolwright: {error:#}");
            }
            ExitCode::from(2)
        }
    }
}
