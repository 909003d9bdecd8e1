//! Resource subscriptions: `resources/subscribe` and `resources/unsubscribe` of a 2025-11-25 session, the
//! `resourceSubscriptions` of a 2026-07-28 `subscriptions/listen` stream; `notifications/resources/updated` when
//! a subscribed resource changes.
//!
//! What a subscription watches is decided when it is made ([`crate::resources::Served::watched`]): a workspace
//! file must be readable then, as `resources/read` would read it, and its directory is watched (inotify, through
//! the `notify` crate, not recursive; the file's real path, which lies in the workspace) — a change, a removal or
//! a file put in its place is an update, bursts folded into one within [`SETTLE`]. A plugin's resource is updated
//! when the plugins are loaded again (`Subscriptions::plugins_reloaded`): plugins cannot say when their
//! resources change. A subscriber holds at most [`MAX_PER_SUBSCRIBER`] URIs, the server [`MAX_WATCHED`] files;
//! beyond, a subscription is refused by name. A session's subscriptions end with it, a stream's with the stream.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use notify::Watcher as _;
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{Peer, RoleServer, SubscriptionSink};
use tokio_util::sync::CancellationToken;

/// The URIs one subscriber may hold at once.
pub const MAX_PER_SUBSCRIBER: usize = 256;

/// The files the server watches for all subscribers at once.
pub const MAX_WATCHED: usize = 4096;

/// How long changes are gathered before the subscribers are told (an editor's save is several events).
pub const SETTLE: Duration = Duration::from_millis(100);

/// How long one subscriber may take to take a notification before it is given up on for this change.
const SEND_WAIT: Duration = Duration::from_secs(1);

/// What a subscription watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Watched {
    /// A workspace file, by its real path.
    File(PathBuf),
    /// A plugin's resource: updated when the plugins are loaded again.
    Plugins,
}

/// Who is told: a 2025-11-25 session (by its server number), or a 2026-07-28 listen stream (by its number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Key {
    Session(u64),
    Stream(u64),
}

/// Where a subscriber's notifications go.
#[derive(Clone)]
pub(crate) enum Subscriber {
    Session(Peer<RoleServer>),
    Stream(SubscriptionSink),
    /// Told nothing (the bookkeeping's tests).
    #[cfg(test)]
    Nobody,
}

impl Subscriber {
    /// Tell it that `uri` was updated; false when it cannot be told any more.
    async fn updated(&self, uri: &str) -> bool {
        let sent = match self {
            Subscriber::Session(peer) => {
                if peer.is_transport_closed() {
                    return false;
                }
                let params = ResourceUpdatedNotificationParam::new(uri);
                tokio::time::timeout(SEND_WAIT, peer.notify_resource_updated(params))
                    .await
                    .map(|r| r.map_err(|e| e.to_string()))
            }
            Subscriber::Stream(sink) => tokio::time::timeout(SEND_WAIT, sink.notify_resource_updated(uri))
                .await
                .map(|r| r.map_err(|e| e.to_string())),
            #[cfg(test)]
            Subscriber::Nobody => return true,
        };
        match sent {
            Ok(Ok(())) => true,
            Ok(Err(error)) => {
                tracing::debug!(uri, "cannot send resources/updated: {error}");
                !matches!(self, Subscriber::Session(peer) if peer.is_transport_closed())
            }
            // Slow: this change is not waited for; the subscription stays.
            Err(_) => true,
        }
    }
}

struct Subscription {
    to: Subscriber,
    uris: BTreeMap<String, Watched>,
}

#[derive(Default)]
struct State {
    subscribers: BTreeMap<Key, Subscription>,
    /// The directories watched, with how many subscribed files each holds.
    directories: BTreeMap<PathBuf, usize>,
    /// The changed subscribed files not told yet.
    changed: BTreeSet<PathBuf>,
    watcher: Option<notify::RecommendedWatcher>,
}

impl State {
    /// Every subscribed file.
    fn files(&self) -> BTreeSet<&Path> {
        self.subscribers
            .values()
            .flat_map(|s| s.uris.values())
            .filter_map(|w| match w {
                Watched::File(path) => Some(path.as_path()),
                Watched::Plugins => None,
            })
            .collect()
    }

    /// Watch exactly the directories of the subscribed files.
    fn rewatch(&mut self) {
        let mut wanted: BTreeMap<PathBuf, usize> = BTreeMap::new();
        for file in self.files() {
            if let Some(dir) = file.parent() {
                *wanted.entry(dir.to_path_buf()).or_default() += 1;
            }
        }
        if let Some(watcher) = self.watcher.as_mut() {
            for gone in self.directories.keys().filter(|d| !wanted.contains_key(*d)) {
                let _ = watcher.unwatch(gone);
            }
            for new in wanted.keys().filter(|d| !self.directories.contains_key(*d)) {
                if let Err(error) = watcher.watch(new, notify::RecursiveMode::NonRecursive) {
                    tracing::warn!(directory = %new.display(), "cannot watch for subscriptions: {error}");
                }
            }
        }
        self.directories = wanted;
    }
}

/// The server's resource subscriptions.
#[derive(Default)]
pub(crate) struct Subscriptions {
    state: Arc<Mutex<State>>,
    /// Wakes the teller when files changed.
    wake: Arc<tokio::sync::Notify>,
    /// Whether the teller runs.
    started: std::sync::OnceLock<()>,
}

impl Subscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Subscribe `key` (told through `to`) to `uri`, which watches `watched`. The error names what is exceeded.
    /// The teller starts with the first subscription (on the current runtime, until `shutdown`).
    pub(crate) fn subscribe(
        &self,
        key: Key,
        to: Subscriber,
        uri: &str,
        watched: Watched,
        shutdown: &CancellationToken,
    ) -> Result<(), String> {
        let mut state = self.lock();
        // Sessions that ended are forgotten first.
        state
            .subscribers
            .retain(|_, s| !matches!(&s.to, Subscriber::Session(peer) if peer.is_transport_closed()));
        let held = state.subscribers.get(&key).map_or(0, |s| s.uris.len());
        let already = state
            .subscribers
            .get(&key)
            .is_some_and(|s| s.uris.contains_key(uri));
        if !already && held >= MAX_PER_SUBSCRIBER {
            return Err(format!(
                "Too many subscriptions: at most {MAX_PER_SUBSCRIBER} resources at once (unsubscribe from one first)"
            ));
        }
        if let Watched::File(path) = &watched {
            let files = state.files();
            if !files.contains(path.as_path()) && files.len() >= MAX_WATCHED {
                return Err(format!(
                    "Too many subscriptions: the server watches at most {MAX_WATCHED} files for its clients"
                ));
            }
            if state.watcher.is_none() {
                state.watcher = Some(self.watcher().map_err(|e| format!("cannot watch files: {e}"))?);
            }
        }
        state
            .subscribers
            .entry(key)
            .or_insert_with(|| Subscription {
                to,
                uris: BTreeMap::new(),
            })
            .uris
            .insert(uri.to_owned(), watched);
        state.rewatch();
        drop(state);
        if self.started.set(()).is_ok() {
            tokio::spawn(teller(self.state.clone(), self.wake.clone(), shutdown.clone()));
        }
        Ok(())
    }

    /// End `key`'s subscription to `uri` (none: nothing happens).
    pub(crate) fn unsubscribe(&self, key: Key, uri: &str) {
        let mut state = self.lock();
        if let Some(subscription) = state.subscribers.get_mut(&key) {
            subscription.uris.remove(uri);
            if subscription.uris.is_empty() {
                state.subscribers.remove(&key);
            }
        }
        state.rewatch();
    }

    /// End every subscription of `key`.
    pub(crate) fn end(&self, key: Key) {
        let mut state = self.lock();
        if state.subscribers.remove(&key).is_some() {
            state.rewatch();
        }
    }

    /// The URIs `key` is subscribed to.
    #[cfg(test)]
    fn uris(&self, key: Key) -> Vec<String> {
        self.lock()
            .subscribers
            .get(&key)
            .map(|s| s.uris.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The plugins were loaded again: tell every subscriber of a plugin's resource.
    pub(crate) async fn plugins_reloaded(&self) {
        let told: Vec<(Key, Subscriber, Vec<String>)> = {
            let state = self.lock();
            state
                .subscribers
                .iter()
                .map(|(key, s)| {
                    let uris = s
                        .uris
                        .iter()
                        .filter(|(_, w)| **w == Watched::Plugins)
                        .map(|(uri, _)| uri.clone())
                        .collect::<Vec<_>>();
                    (*key, s.to.clone(), uris)
                })
                .filter(|(_, _, uris)| !uris.is_empty())
                .collect()
        };
        tell(&self.state, told).await;
    }

    /// A watcher whose events mark subscribed files changed and wake the teller.
    fn watcher(&self) -> notify::Result<notify::RecommendedWatcher> {
        let state = Arc::downgrade(&self.state);
        let wake = self.wake.clone();
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            if matches!(event.kind, notify::EventKind::Access(_)) {
                return;
            }
            let Some(state) = state.upgrade() else { return };
            let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
            let files = state.files();
            let changed: Vec<PathBuf> = event
                .paths
                .iter()
                .filter(|p| files.contains(p.as_path()))
                .cloned()
                .collect();
            if !changed.is_empty() {
                state.changed.extend(changed);
                wake.notify_one();
            }
        })
    }
}

/// Tell the subscribers of changed files, [`SETTLE`] after the first change, until `shutdown`.
async fn teller(state: Arc<Mutex<State>>, wake: Arc<tokio::sync::Notify>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = wake.notified() => {}
            () = shutdown.cancelled() => return,
        }
        tokio::time::sleep(SETTLE).await;
        let told: Vec<(Key, Subscriber, Vec<String>)> = {
            let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
            let changed = std::mem::take(&mut state.changed);
            state
                .subscribers
                .iter()
                .map(|(key, s)| {
                    let uris = s
                        .uris
                        .iter()
                        .filter(|(_, w)| matches!(w, Watched::File(path) if changed.contains(path)))
                        .map(|(uri, _)| uri.clone())
                        .collect::<Vec<_>>();
                    (*key, s.to.clone(), uris)
                })
                .filter(|(_, _, uris)| !uris.is_empty())
                .collect()
        };
        tell(&state, told).await;
    }
}

/// Send each subscriber its updated URIs; one that cannot be told any more loses its subscriptions.
async fn tell(state: &Mutex<State>, told: Vec<(Key, Subscriber, Vec<String>)>) {
    let mut gone = Vec::new();
    for (key, to, uris) in told {
        for uri in uris {
            if !to.updated(&uri).await {
                gone.push(key);
                break;
            }
        }
    }
    if !gone.is_empty() {
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        for key in gone {
            state.subscribers.remove(&key);
        }
        state.rewatch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscriber_is_held_to_its_bound_and_unsubscribing_frees_a_place() {
        let subscriptions = Subscriptions::default();
        let key = Key::Stream(1);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _entered = runtime.enter();
        let shutdown = CancellationToken::new();
        // A subscriber that is never told: only the bookkeeping is tried here.
        let to = Subscriber::Nobody;
        for n in 0..MAX_PER_SUBSCRIBER {
            let uri = format!("test://{n}");
            subscriptions
                .subscribe(key, to.clone(), &uri, Watched::Plugins, &shutdown)
                .unwrap();
        }
        let over = subscriptions.subscribe(key, to.clone(), "test://over", Watched::Plugins, &shutdown);
        assert!(over.unwrap_err().starts_with("Too many subscriptions"));
        // The same URI again is no new place.
        subscriptions
            .subscribe(key, to.clone(), "test://0", Watched::Plugins, &shutdown)
            .unwrap();
        subscriptions.unsubscribe(key, "test://0");
        subscriptions
            .subscribe(key, to.clone(), "test://over", Watched::Plugins, &shutdown)
            .unwrap();
        assert_eq!(subscriptions.uris(key).len(), MAX_PER_SUBSCRIBER);
        subscriptions.end(key);
        assert!(subscriptions.uris(key).is_empty());
        shutdown.cancel();
    }
}
