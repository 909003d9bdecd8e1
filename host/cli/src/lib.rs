//! # toolwright-cli
//!
//! The `toolwright` command line, as a library with one entry, [`main`]: the binary (`src/main.rs`) is that
//! call and its allocator, and the integration tests (`tests/`) build the same binary from the same two lines
//! by depending on this crate. The only crate of the house that uses `clap` and `anyhow`.
//!
//! ## Map
//!
//! - `cli`: the arguments (clap) and the dispatch to one module per command: `exec` (a batch of tool calls),
//!   `mcp` (the MCP server), `dev` (a plugin project built, served by `mcp` and rebuilt on change), `plugins` (what is loaded, granted and refused) with `install` (`plugins add |
//!   approve | update | remove | publish`, through `oci` for registries) and `check` (one plugin file), `registry`
//!   (`tools`, `prompt`, `declarations`), `audit`, `trust`, `cache`, `new`, `wit`.
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     toolwright_cli::main()
//! }
//! ```

mod cli;

pub use cli::main;
