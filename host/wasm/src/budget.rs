//! Bounds on the host's memory that plugins control: a host-wide budget for the linear memory of every live
//! instance (each memory growth is charged to it, each store gives its share back when it drops), and a per-call
//! cap on the bytes a call carries into the host (its result, its partial updates and the results of its nested
//! calls). `memory-mib` bounds one guest; these bound what many guests, and what the host copies out of them,
//! may take together.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use wasmtime::{ResourceLimiter, StoreLimits};

/// The host-wide budget for plugins' linear memory when the policy sets none, in bytes. With the per-call cap,
/// sized so that a busy session stays under 512 MiB of resident memory: the guests' memories, plus at most as
/// much again copied out of them while results are lifted, plus the host itself.
pub const DEFAULT_HOST_MEMORY: usize = 192 << 20;
/// The bytes one call may carry into the host when the policy sets none (pi's tools send at most 50 KB of text;
/// images are at most a few MB).
pub const DEFAULT_RESULT_CAP: usize = 16 << 20;

/// The linear memory in use by every live instance of a plugin host, against its cap.
#[derive(Debug)]
pub struct MemoryBudget {
    used: AtomicUsize,
    cap: AtomicUsize,
}

impl MemoryBudget {
    /// A budget of `cap` bytes.
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(MemoryBudget {
            used: AtomicUsize::new(0),
            cap: AtomicUsize::new(cap),
        })
    }

    /// The cap, in bytes.
    pub fn cap(&self) -> usize {
        self.cap.load(Ordering::Relaxed)
    }

    /// Set the cap (calls already holding more keep it until they end).
    pub fn set_cap(&self, cap: usize) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    /// Bytes in use now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Take `bytes` if they fit under the cap.
    fn reserve(&self, bytes: usize) -> bool {
        let cap = self.cap();
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= cap)
            })
            .is_ok()
    }

    fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Why a growth or a result was refused (the trap's cause, named in the error the model sees).
#[derive(Debug, thiserror::Error)]
pub enum OverCap {
    /// The instances together would pass the host-wide memory budget.
    #[error("the plugins together reached the host's memory cap of {} MiB (host-memory-mib)", .0 >> 20)]
    HostMemory(usize),
    /// The call carried more bytes into the host than its cap.
    #[error("its results came to more than the cap of {} MiB a call may carry into the host (result-mib)", .0 >> 20)]
    Result(usize),
}

/// How a budget gets memory back from instances that are not running: drop the idle ones (only the spares made
/// ahead of a call when `true`), saying whether there were any. Given by the owner of the instances
/// (`crate::instances::Instances::reclaim`).
pub type Reclaim = Arc<dyn Fn(bool) -> bool + Send + Sync>;

/// The store's limiter: the instance's own limits, then the host-wide budget.
pub struct Limiter {
    own: StoreLimits,
    budget: Arc<MemoryBudget>,
    reclaim: Reclaim,
    charged: usize,
}

impl Limiter {
    /// `own` limits under the host-wide `budget`, which gets memory back through `reclaim`.
    pub fn new(own: StoreLimits, budget: Arc<MemoryBudget>, reclaim: Reclaim) -> Self {
        Limiter {
            own,
            budget,
            reclaim,
            charged: 0,
        }
    }

    /// Give back what the store was charged, before it drops: its instance runs no more.
    pub fn release(&mut self) {
        self.budget.release(std::mem::take(&mut self.charged));
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if !self.own.memory_growing(current, desired, maximum)? {
            return Ok(false);
        }
        let more = desired.saturating_sub(current);
        // Idle instances give their memory back before a running call is refused any: spares (made ahead of a
        // call, a guess) first, then those kept for reuse.
        let reserved = self.budget.reserve(more)
            || (self.reclaim)(true) && self.budget.reserve(more)
            || (self.reclaim)(false) && self.budget.reserve(more);
        if !reserved {
            return Err(wasmtime::Error::new(OverCap::HostMemory(self.budget.cap())));
        }
        self.charged += more;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.own.table_growing(current, desired, maximum)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.own.memory_grow_failed(error)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.own.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.own.instances()
    }

    fn tables(&self) -> usize {
        self.own.tables()
    }

    fn memories(&self) -> usize {
        self.own.memories()
    }
}

impl Drop for Limiter {
    fn drop(&mut self) {
        self.release();
    }
}

/// The bytes a call carries into the host: what it counts against its cap.
#[derive(Debug)]
pub struct Carried {
    bytes: usize,
    cap: usize,
}

impl Carried {
    /// Nothing carried yet, under `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Carried { bytes: 0, cap }
    }

    /// Count `bytes` more; an error once the total passes the cap.
    pub fn add(&mut self, bytes: usize) -> Result<(), OverCap> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.cap {
            return Err(OverCap::Result(self.cap));
        }
        Ok(())
    }
}

/// The most values one JSON text from a plugin may hold (a result's `details`, a handler's rewritten arguments):
/// parsed, each value takes tens of bytes in the host (80 with ordered maps), so 16 MiB of `[0,0,…]`, within
/// `result-mib`, would take over 600 MB, and more again with every copy the call makes. A million is 80 MB.
pub const MAX_JSON_VALUES: usize = 1_000_000;

/// How many values `text` holds if it is JSON, counted without parsing it: one, plus one per `,` and per `[`
/// or `{` outside strings (an upper bound, exact but for empty arrays and objects).
pub fn json_values(text: &str) -> usize {
    let (mut values, mut in_string, mut escaped) = (1usize, false, false);
    for &b in text.as_bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b'[' | b'{' => values += 1,
                _ => {}
            }
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_values_are_counted_outside_strings() {
        assert_eq!(json_values("3"), 1);
        assert_eq!(json_values("[1,2,3]"), 4);
        assert_eq!(json_values(r#"{"a":1,"b":[2,{"c":"x,[{"}]}"#), 6);
        assert_eq!(json_values(r#"["\",", ","]"#), 3);
        let bomb = format!("[{}0]", "0,".repeat(MAX_JSON_VALUES));
        assert!(json_values(&bomb) > MAX_JSON_VALUES);
    }

    #[test]
    fn the_budget_is_shared_and_given_back() {
        let budget = MemoryBudget::new(100);
        let own = || wasmtime::StoreLimitsBuilder::new().build();
        let none: Reclaim = Arc::new(|_| false);
        let mut a = Limiter::new(own(), budget.clone(), none.clone());
        let mut b = Limiter::new(own(), budget.clone(), none);
        assert!(matches!(a.memory_growing(0, 60, None), Ok(true)));
        let refused = b.memory_growing(0, 60, None).err().map(|e| e.to_string());
        assert_eq!(
            refused.as_deref(),
            Some("the plugins together reached the host's memory cap of 0 MiB (host-memory-mib)")
        );
        assert!(matches!(b.memory_growing(0, 40, None), Ok(true)));
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 40);
        drop(b);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_call_counts_what_it_carries() {
        let mut carried = Carried::new(10);
        assert!(carried.add(6).is_ok());
        assert!(carried.add(4).is_ok());
        let over = carried.add(1).err().map(|e| e.to_string());
        assert_eq!(
            over.as_deref(),
            Some(
                "its results came to more than the cap of 0 MiB a call may carry into the host (result-mib)"
            )
        );
    }
}
