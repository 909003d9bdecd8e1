//! The `toolwright` command line.

mod cli;

/// mimalloc rather than the system's allocator: a batch of small calls allocates and frees every call's
/// arguments, results and event lines, and glibc's malloc took a fifth of such a batch (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
