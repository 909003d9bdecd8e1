//! [`SharedRegistry`]: one registry used by a whole session (the pipeline, nested calls, `tool_search`, an MCP
//! server), with no lock held while a loadout hook runs.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::Registry;

/// A registry shared by a session. Reads and updates take its lock for as long as their closure runs; the
/// loadout hooks an update sets off run afterwards, with the lock released, and their changes are committed
/// unless a later update superseded them. Between an update and the commit of its hooks, readers see the new
/// active set with its registered descriptions and the previous hidden declarations (of the tools still active);
/// [`Registry::revision`] changes again at the commit. When two threads update at once, one of them runs both
/// plans' hooks, and the other's `update` may return before the commit.
#[derive(Clone)]
pub struct SharedRegistry {
    inner: Arc<Mutex<Registry>>,
}

impl std::fmt::Debug for SharedRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.read(|r| r.fmt(f))
    }
}

/// A [`SharedRegistry`] that does not keep the registry alive (what `tool_search`, a tool of the registry,
/// holds of it).
#[derive(Clone, Debug, Default)]
pub struct WeakRegistry {
    inner: Weak<Mutex<Registry>>,
}

impl WeakRegistry {
    /// The registry, while something else keeps it.
    pub fn upgrade(&self) -> Option<SharedRegistry> {
        self.inner.upgrade().map(|inner| SharedRegistry { inner })
    }
}

impl SharedRegistry {
    /// Share `registry`.
    pub fn new(registry: Registry) -> Self {
        Self::new_cyclic(|_| registry)
    }

    /// Share the registry `make` builds from a handle to itself (for tools of the registry that act on it, such
    /// as `tool_search`). The hooks its first active set sets off run before this returns.
    pub fn new_cyclic(make: impl FnOnce(WeakRegistry) -> Registry) -> Self {
        let inner = Arc::new_cyclic(|weak| {
            let mut registry = make(WeakRegistry { inner: weak.clone() });
            registry.deferred = true;
            Mutex::new(registry)
        });
        let shared = SharedRegistry { inner };
        shared.settle();
        shared
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A handle that does not keep the registry alive.
    pub fn downgrade(&self) -> WeakRegistry {
        WeakRegistry {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Read the registry. Do not call the session from `f`: the registry is locked while it runs.
    pub fn read<R>(&self, f: impl FnOnce(&Registry) -> R) -> R {
        f(&self.lock())
    }

    /// Change the registry, then run the loadout hooks the change set off, with no lock held.
    pub fn update<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> R {
        let result = f(&mut self.lock());
        self.settle();
        result
    }

    /// Run planned loadout hooks until none is left (a commit can be superseded by a newer plan).
    fn settle(&self) {
        loop {
            let Some(plan) = self.lock().take_planned_loadout() else {
                return;
            };
            let outcome = plan.run();
            self.lock().commit_loadout(plan, outcome);
        }
    }
}
