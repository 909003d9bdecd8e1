//! The `toolwright` command line: [`toolwright_cli::main`] with the process's allocator. The integration tests
//! (`tests/Cargo.toml`) build their `toolwright-cli` binary from this file.

/// mimalloc rather than the system's allocator: a batch of small calls allocates and frees every call's
/// arguments, results and event lines, and glibc's malloc took a fifth of such a batch (docs/performance.md).
///
/// Built `no_thp` (the workspace's `Cargo.toml`): its heap asks for no transparent huge pages. Each fresh 2 MiB
/// page is zeroed whole by the thread that first touches it, on the batch's path; on a virtual machine whose
/// free memory goes back to the host (free page reporting), that page must first come back from the host, and a
/// batch of 1000 parallel `read`s took 20 ms or 45–90 ms depending on which pages it drew (`perf record`: up to
/// 80 % in `clear_page_erms` under `do_huge_pmd_anonymous_page`). Small pages come from the kernel's recently
/// freed ones: a steady figure.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    toolwright_cli::main()
}
