//! The `toolwright` command line: [`toolwright_cli::main`] with the process's allocator. The integration tests
//! (`tests/Cargo.toml`) build their `toolwright-cli` binary from this file.

/// mimalloc rather than the system's allocator: a batch of small calls allocates and frees every call's
/// arguments, results and event lines, and glibc's malloc took a fifth of such a batch (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    toolwright_cli::main()
}
