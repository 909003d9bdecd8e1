//! # toolwright-tests
//!
//! Integration tests that span crates: the pipeline replayed against golden fixtures recorded from pi 1.6.0,
//! the `toolwright` binary's contract, and (later) native-vs-wasm parity.
//!
//! - [`scenario`]: pipeline scenarios as data, with the test tools and hooks that both the pi driver
//!   (`tests/oracle/record.mjs`) and this crate build from them.
//! - [`normalize`]: event normalisation shared by every golden comparison.
//!
//! ```
//! let fixtures = toolwright_tests::fixtures_dir();
//! assert!(fixtures.ends_with("fixtures"));
//! ```

pub mod golden;

/// Paths of the test programs (wasm components built by `build.rs`).
pub mod programs {
    include!(concat!(env!("OUT_DIR"), "/programs.rs"));
}
pub mod normalize;
pub mod scenario;
pub mod workspace;

use std::path::PathBuf;

/// The `tests/fixtures` directory.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}
