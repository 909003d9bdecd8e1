//! The wasmtime engine: the component model, the pooling allocator, epoch interruption, and the fingerprint
//! that keys the compiled-component cache.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How many plugin instances may exist at once; calls beyond wait for a slot (a semaphore in front of the pool).
pub const MAX_INSTANCES: u32 = 256;
/// Memory an instance may grow to, in bytes (DESIGN §5: 256 MiB).
pub const MAX_MEMORY: usize = 256 << 20;
/// How much of a finished instance's linear memory stays resident in its pool slot, reset by copying back
/// the written pages. Every slot that ever served an instance keeps at most this much, and
/// [`TABLE_KEEP_RESIDENT`] of its tables: at most about 1.2 GiB over the pool's 293 slots in the worst case,
/// a few MiB to a few tens in practice (slots are reused most recently used first, so a host uses about as many
/// as it ran instances at once, and a slot keeps only what its instances wrote: a Rust plugin some KiB). 4 MiB:
/// a call of the Python example writes 192 pages spread over 3.9 MiB, which `crate::instances::resident` merges into the 32
/// runs wasmtime's reset reads, and every page past the bound faults again in the next instance (the JavaScript
/// example needs 0.9 MiB; docs/performance.md, "Python and JavaScript plugins").
pub const KEEP_RESIDENT: usize = 4 << 20;
/// The same for an instance's tables.
pub const TABLE_KEEP_RESIDENT: usize = 64 << 10;
/// How many idle pool slots stay affine to a component before wasmtime takes one of them for another.
pub const WARM_SLOTS: u32 = 64;
/// How often the epoch advances: the granularity of deadlines and cancellation inside wasm code.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// An engine and the thread that advances its epoch.
///
/// The thread runs for as long as the engine exists, not as long as this handle: compiled components and
/// instance templates hold the engine too, and a deadline must keep biting for every call they serve, whoever
/// dropped the handle (a reloaded toolset, a finished load).
pub struct PluginEngine {
    engine: Engine,
    pagemap_scan: bool,
}

impl PluginEngine {
    /// A new engine with the pooling allocator sized for `instances` at once (the running ones, at most
    /// [`MAX_INSTANCES`], and the idle ones its owner keeps: `crate::instances::BEYOND_RUNNING`); `metered` turns
    /// on fuel (each store then needs fuel to run; compiled code differs, so the fingerprint does too).
    pub fn new(metered: bool, instances: u32) -> wasmtime::Result<Self> {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(instances)
            .total_core_instances(instances * 8)
            .max_core_instances_per_component(16)
            .total_memories(instances * 2)
            .max_memories_per_component(4)
            .total_tables(instances * 4)
            .max_tables_per_component(8)
            .max_memory_size(MAX_MEMORY)
            // Plugins run synchronously, on the caller's stack: no fiber stacks. The default reserves 1000, each
            // with a guard page set by its own `mprotect` — 5 ms of every start that loads a plugin, and as much
            // again to unmap them at exit.
            .total_stacks(0);
        // A finished instance's memory is reset by copying back only the pages it wrote (found with Linux's
        // PAGEMAP_SCAN, kernel 6.7+), up to KEEP_RESIDENT, instead of `madvise` of everything it touched: no
        // page-table teardown and TLB shootdown per call, no page faults for the next instance in the slot.
        // Elsewhere wasmtime falls back to `madvise`. Not with swap: wasmtime 48.0.10's scan asks for written
        // *present* pages, so a written page swapped out is neither copied back nor decommitted, and the previous
        // instance's bytes reach the next one (fixed in 48.0.11, which does not resolve here). Without the scan
        // wasmtime copies back the first KEEP_RESIDENT bytes, whether written or not, and decommits the rest:
        // correct for swapped pages too.
        let reset = MemoryReset::for_swaps(std::fs::read_to_string("/proc/swaps").ok().as_deref());
        tracing::info!(reset = reset.name(), "memory reset of pooled instances");
        pool.pagemap_scan(reset.pagemap_scan())
            .linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(TABLE_KEEP_RESIDENT)
            .max_unused_warm_slots(WARM_SLOTS);
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            // Plugins are synchronous; component-model async support costs time on every instantiation and call.
            .concurrency_support(false)
            .consume_fuel(metered)
            // `.eh_frame` for every compiled function only helps native unwinders through wasm frames (wasmtime's
            // own traps and backtraces do without it); registering it was a tenth of a cached plugin's first call.
            .native_unwind_info(false)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        // Made while no spawn of the host's forks: wasmtime's first pooling engine registers a fork handler
        // that would hang a child forked meanwhile (`toolwright_native::without_forks`).
        let engine = toolwright_native::without_forks(|| Engine::new(&config))?;
        let ticker = engine.weak();
        std::thread::Builder::new()
            .name("toolwright-epoch".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(EPOCH_TICK);
                    match ticker.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => return,
                    }
                }
            })
            .map_err(|e| wasmtime::format_err!("cannot start the epoch thread: {e}"))?;
        Ok(PluginEngine {
            engine,
            pagemap_scan: reset == MemoryReset::WrittenPages
                && PoolingAllocationConfig::is_pagemap_scan_available(),
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Whether a finished instance's memory is reset by the pages `PAGEMAP_SCAN` finds written (what
    /// `crate::instances::resident` prepares for), rather than by its first [`KEEP_RESIDENT`] bytes.
    pub fn pagemap_scan(&self) -> bool {
        self.pagemap_scan
    }

    /// A fingerprint of everything that makes compiled code incompatible (wasmtime's version and settings).
    pub fn fingerprint(&self) -> String {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut hasher);
        format!("{:016x}", hasher.finish())
    }
}

/// How the pooling allocator resets a finished instance's memory and tables for the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MemoryReset {
    /// The pages `PAGEMAP_SCAN` reports written and present (where the kernel has it): only with no swap active.
    WrittenPages,
    /// The first [`KEEP_RESIDENT`] bytes copied back, the rest decommitted.
    FirstBytes,
}

impl MemoryReset {
    /// The reset for a system whose `/proc/swaps` reads `swaps` (`None`: unreadable, so swap is assumed): any
    /// line after the header is an active swap area (a partition, a file, zram; zswap only compresses what goes
    /// to one of them). Swap turned on after the engine was made is not seen.
    fn for_swaps(swaps: Option<&str>) -> MemoryReset {
        let active = swaps.is_none_or(|swaps| swaps.lines().skip(1).any(|line| !line.trim().is_empty()));
        if active {
            MemoryReset::FirstBytes
        } else {
            MemoryReset::WrittenPages
        }
    }

    fn pagemap_scan(self) -> wasmtime::Enabled {
        match self {
            MemoryReset::WrittenPages => wasmtime::Enabled::Auto,
            MemoryReset::FirstBytes => wasmtime::Enabled::No,
        }
    }

    fn name(self) -> &'static str {
        match self {
            MemoryReset::WrittenPages => {
                "written pages (PAGEMAP_SCAN where the kernel has it; no swap active)"
            }
            MemoryReset::FirstBytes => {
                "first bytes copied back, the rest decommitted (swap active or /proc/swaps unreadable)"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_swap_area_or_an_unreadable_list_turns_the_written_pages_reset_off() {
        let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
        assert_eq!(MemoryReset::for_swaps(Some(header)), MemoryReset::WrittenPages);
        assert_eq!(MemoryReset::for_swaps(Some("")), MemoryReset::WrittenPages);
        let file = format!("{header}/swapfile                               file\t\t2097148\t\t0\t\t-2\n");
        assert_eq!(MemoryReset::for_swaps(Some(&file)), MemoryReset::FirstBytes);
        let zram =
            format!("{header}/dev/zram0                              partition\t8388604\t\t1024\t\t100\n");
        assert_eq!(MemoryReset::for_swaps(Some(&zram)), MemoryReset::FirstBytes);
        assert_eq!(MemoryReset::for_swaps(None), MemoryReset::FirstBytes);
        assert_eq!(
            MemoryReset::for_swaps(Some(&file)).pagemap_scan(),
            wasmtime::Enabled::No
        );
    }
}
