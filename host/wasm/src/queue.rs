//! Compiles taken in turn, smallest first: [`CompileQueue`], a field of the [`PluginHost`](crate::PluginHost).
//!
//! Compiling a component already uses every core (wasmtime compiles its functions in parallel), so two compiles
//! at once only make each slower; one at a time, smallest first, the small plugins of a cold start are ready in
//! a fraction of a second instead of queuing behind a 19 MB Python component. Across processes sharing the
//! cache, a lock file (`DIR/.compile.lock`, `flock`) keeps it one at a time, and the second process then finds
//! the component compiled (it waits at most 30 s for another's compile, then compiles beside it).

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The compiles waiting for their turn in one host, and whether one is running.
#[derive(Debug, Default)]
pub(crate) struct CompileQueue {
    state: Mutex<Waiting>,
    turn: Condvar,
}

#[derive(Debug, Default)]
struct Waiting {
    /// (size, ticket) of each compile waiting.
    queue: Vec<(u64, u64)>,
    next_ticket: u64,
    running: bool,
}

/// A compile's turn: held while it compiles, given back when dropped.
#[must_use = "the turn ends when it is dropped"]
pub struct CompileTurn<'a> {
    queue: &'a CompileQueue,
    _lock: Option<std::fs::File>,
}

impl CompileQueue {
    /// Wait for the turn of a compile of `size` bytes: when no other compile of this host runs and none
    /// smaller (or as small and queued earlier) waits; then for the cache's lock file in `cache_dir`, if any
    /// (a lock that cannot be taken is reported in the log and done without).
    pub(crate) fn turn(&self, size: u64, cache_dir: Option<&Path>) -> CompileTurn<'_> {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push((size, ticket));
        while state.running || state.queue.iter().min().is_some_and(|first| first.1 != ticket) {
            state = self.turn.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.queue.retain(|(_, t)| *t != ticket);
        state.running = true;
        drop(state);
        CompileTurn {
            queue: self,
            _lock: cache_dir.and_then(lock_file),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for CompileTurn<'_> {
    fn drop(&mut self) {
        self.queue.lock().running = false;
        self.queue.turn.notify_all();
    }
}

/// How long a compile waits for another process's to end before it goes on without the lock: a process stopped
/// mid-compile (`SIGSTOP`, a debugger) must not hold up every other start for good.
const LOCK_PATIENCE: Duration = Duration::from_secs(30);

/// The cache's lock file, opened and locked (waiting for another process's compile to end, at most
/// [`LOCK_PATIENCE`]).
fn lock_file(dir: &Path) -> Option<std::fs::File> {
    let path: PathBuf = dir.join(LOCK_FILE);
    let opened = std::fs::create_dir_all(dir).and_then(|()| {
        std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
    });
    let file = match opened {
        Ok(file) => file,
        Err(e) => {
            tracing::debug!(path = %path.display(), "compiling without the cache's lock: {e}");
            return None;
        }
    };
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Some(file),
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < LOCK_PATIENCE => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                tracing::debug!(path = %path.display(), "compiling without the cache's lock: {e}");
                return None;
            }
        }
    }
}

/// The name of the lock file in a cache directory that one compile at a time holds.
pub const LOCK_FILE: &str = ".compile.lock";

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn compiles_take_turns_smallest_first() {
        let queue = Arc::new(CompileQueue::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let first = queue.turn(1000, None);
        let mut threads = Vec::new();
        for size in [30u64, 10, 20] {
            let (waiting, order) = (queue.clone(), order.clone());
            threads.push(std::thread::spawn(move || {
                let _turn = waiting.turn(size, None);
                order.lock().unwrap().push(size);
            }));
            // Each is queued before the first turn ends.
            while queue.lock().queue.len() < threads.len() {
                std::thread::yield_now();
            }
        }
        drop(first);
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [10, 20, 30]);
    }
}
