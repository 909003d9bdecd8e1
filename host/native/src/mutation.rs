//! pi's file mutation queue: calls that modify the same file run one at a time, in call order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// Per-file FIFO locks. A call registers when its execution is first polled, and the pipeline polls a
/// batch's calls in call order, so the queue keeps call order even in parallel batches.
#[derive(Debug, Default)]
pub struct FileMutationQueue {
    locks: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
}

/// Holds a file's place in the queue; dropping it lets the next call in.
pub struct MutationGuard {
    queue: Arc<FileMutationQueue>,
    key: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl FileMutationQueue {
    /// Wait for the turn of `path` (an absolute path). The key is the file's real path, or the path itself
    /// when it does not exist yet.
    pub async fn lock(self: &Arc<Self>, path: &str) -> MutationGuard {
        let key = match std::fs::canonicalize(path) {
            Ok(real) => real.to_string_lossy().into_owned(),
            Err(_) => path.to_owned(),
        };
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            locks.entry(key.clone()).or_default().clone()
        };
        let guard = lock.lock_owned().await;
        MutationGuard {
            queue: self.clone(),
            key,
            guard: Some(guard),
        }
    }
}

impl Drop for MutationGuard {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut locks = self.queue.locks.lock().unwrap_or_else(|e| e.into_inner());
        // Only the map holds the lock now: nobody waits, so the entry can go.
        if locks.get(&self.key).is_some_and(|l| Arc::strong_count(l) == 1) {
            locks.remove(&self.key);
        }
    }
}
