//! Resource subscriptions: `resources/subscribe` and `resources/unsubscribe` of a 2025-11-25 session, the
//! `resourceSubscriptions` of a 2026-07-28 `subscriptions/listen` stream; `notifications/resources/updated` when
//! a subscribed resource changes.
//!
//! What a subscription watches is decided when it is made ([`crate::resources::Served::watched`]): a workspace
//! file must be readable then, as `resources/read` would read it, and its directory is watched (inotify, through
//! the `notify` crate, not recursive; the file's real path, which lies in the workspace) — a change, a removal or
//! a file put in its place is an update, bursts folded into one within [`SETTLE`]. When the directory itself is
//! removed or moved (perhaps out of the workspace), its files' subscribers are told once and the subscriptions
//! end: nothing is watched where the workspace no longer is. A plugin's resource is updated when the plugins are
//! loaded again (`Subscriptions::plugins_reloaded`): plugins cannot say when their resources change. A subscriber
//! holds at most [`MAX_PER_SUBSCRIBER`] URIs, the server [`MAX_WATCHED`] files; beyond, a subscription is refused
//! by name. A session's subscriptions end with it, a stream's with the stream.
//!
//! Locks: the watcher's callback (notify's thread) takes only the pending paths, a leaf; calls into notify (which
//! wait for that thread) are made holding the watcher's lock alone, never the subscribers'. Subscribers are told
//! side by side, each at most [`SEND_WAIT`] a change.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
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

/// How long one subscriber may take to take a change's notifications before it is given up on for that change.
pub const SEND_WAIT: Duration = Duration::from_secs(1);

/// The paths of events kept until the teller takes them; beyond, every watched file counts as changed.
const MAX_PENDING: usize = 4096;

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

/// How telling a subscriber went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Told {
    Yes,
    /// Too slow this time: the rest of this change is not sent to it; the subscription stays.
    Slow,
    /// It cannot be told any more: its subscriptions end.
    Gone,
}

impl Subscriber {
    /// Tell it that `uri` was updated.
    async fn updated(&self, uri: &str) -> Told {
        let sent = match self {
            Subscriber::Session(peer) => {
                if peer.is_transport_closed() {
                    return Told::Gone;
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
            Subscriber::Nobody => return Told::Yes,
        };
        match sent {
            Ok(Ok(())) => Told::Yes,
            Ok(Err(error)) => {
                tracing::debug!(uri, "cannot send resources/updated: {error}");
                match self {
                    Subscriber::Session(peer) if !peer.is_transport_closed() => Told::Slow,
                    _ => Told::Gone,
                }
            }
            Err(_) => Told::Slow,
        }
    }
}

struct Subscription {
    to: Subscriber,
    uris: BTreeMap<String, Watched>,
}

/// The subscribers, under their own lock (never held while calling into notify).
#[derive(Default)]
struct Subscribers(BTreeMap<Key, Subscription>);

impl Subscribers {
    /// Every subscribed file.
    fn files(&self) -> BTreeSet<&Path> {
        self.0
            .values()
            .flat_map(|s| s.uris.values())
            .filter_map(|w| match w {
                Watched::File(path) => Some(path.as_path()),
                Watched::Plugins => None,
            })
            .collect()
    }

    /// The directories the subscribed files are in.
    fn directories(&self) -> BTreeSet<PathBuf> {
        self.files()
            .into_iter()
            .filter_map(|f| f.parent().map(Path::to_path_buf))
            .collect()
    }
}

/// The watcher and the directories it watches, under their own lock.
#[derive(Default)]
struct Watching {
    watcher: Option<notify::RecommendedWatcher>,
    directories: BTreeSet<PathBuf>,
}

/// The paths of the watcher's events not taken yet (a leaf lock: the watcher's thread takes nothing else).
#[derive(Default)]
struct Pending {
    paths: BTreeSet<PathBuf>,
    /// More came than were kept: every watched file counts as changed.
    overflowed: bool,
}

/// The server's resource subscriptions.
#[derive(Default)]
pub(crate) struct Subscriptions {
    subscribers: Arc<Mutex<Subscribers>>,
    watching: Arc<Mutex<Watching>>,
    pending: Arc<Mutex<Pending>>,
    /// Wakes the teller when files changed.
    wake: Arc<tokio::sync::Notify>,
    /// Whether the teller runs.
    started: std::sync::OnceLock<()>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Subscriptions {
    /// Subscribe `key` (told through `to`) to `uri`, which watches `watched`. The error names what is exceeded, or
    /// that the file's directory cannot be watched. The teller starts with the first subscription (on the current
    /// runtime, until `shutdown`).
    pub(crate) fn subscribe(
        &self,
        key: Key,
        to: Subscriber,
        uri: &str,
        watched: Watched,
        shutdown: &CancellationToken,
    ) -> Result<(), String> {
        {
            let mut subscribers = lock(&self.subscribers);
            // Sessions that ended are forgotten first.
            subscribers
                .0
                .retain(|_, s| !matches!(&s.to, Subscriber::Session(peer) if peer.is_transport_closed()));
            let held = subscribers.0.get(&key).map_or(0, |s| s.uris.len());
            let already = subscribers.0.get(&key).is_some_and(|s| s.uris.contains_key(uri));
            if !already && held >= MAX_PER_SUBSCRIBER {
                return Err(format!(
                    "Too many subscriptions: at most {MAX_PER_SUBSCRIBER} resources at once (unsubscribe from one first)"
                ));
            }
            if let Watched::File(path) = &watched {
                let files = subscribers.files();
                if !files.contains(path.as_path()) && files.len() >= MAX_WATCHED {
                    return Err(format!(
                        "Too many subscriptions: the server watches at most {MAX_WATCHED} files for its clients"
                    ));
                }
            }
            subscribers
                .0
                .entry(key)
                .or_insert_with(|| Subscription {
                    to,
                    uris: BTreeMap::new(),
                })
                .uris
                .insert(uri.to_owned(), watched.clone());
        }
        if let Watched::File(path) = &watched {
            let directory = path.parent().map(Path::to_path_buf);
            let failed = self.rewatch().err();
            let watching = directory.is_some_and(|d| lock(&self.watching).directories.contains(&d));
            if !watching {
                self.unsubscribe(key, uri);
                return Err(format!(
                    "Resource not watched: {uri} ({})",
                    failed.unwrap_or_else(|| "its directory cannot be watched".into())
                ));
            }
        }
        if self.started.set(()).is_ok() {
            tokio::spawn(teller(self.shared(), shutdown.clone()));
        }
        Ok(())
    }

    /// End `key`'s subscription to `uri` (none: nothing happens).
    pub(crate) fn unsubscribe(&self, key: Key, uri: &str) {
        {
            let mut subscribers = lock(&self.subscribers);
            if let Some(subscription) = subscribers.0.get_mut(&key) {
                subscription.uris.remove(uri);
                if subscription.uris.is_empty() {
                    subscribers.0.remove(&key);
                }
            }
        }
        let _ = self.rewatch();
    }

    /// End every subscription of `key`.
    pub(crate) fn end(&self, key: Key) {
        let removed = lock(&self.subscribers).0.remove(&key).is_some();
        if removed {
            let _ = self.rewatch();
        }
    }

    /// The URIs `key` is subscribed to.
    #[cfg(test)]
    fn uris(&self, key: Key) -> Vec<String> {
        lock(&self.subscribers)
            .0
            .get(&key)
            .map(|s| s.uris.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The plugins were loaded again: tell every subscriber of a plugin's resource (off the caller's task).
    pub(crate) fn plugins_reloaded(&self) {
        let told = {
            let subscribers = lock(&self.subscribers);
            subscribers
                .0
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
                .collect::<Vec<_>>()
        };
        if !told.is_empty() {
            tokio::spawn(tell(self.shared(), told));
        }
    }

    fn shared(&self) -> Shared {
        Shared {
            subscribers: self.subscribers.clone(),
            watching: self.watching.clone(),
            pending: self.pending.clone(),
            wake: self.wake.clone(),
        }
    }

    /// Watch exactly the directories of the subscribed files; the first error, if a watch could not be made.
    fn rewatch(&self) -> Result<(), String> {
        self.shared().rewatch()
    }
}

/// What the teller and the watcher's callback share with the subscriptions.
#[derive(Clone)]
struct Shared {
    subscribers: Arc<Mutex<Subscribers>>,
    watching: Arc<Mutex<Watching>>,
    pending: Arc<Mutex<Pending>>,
    wake: Arc<tokio::sync::Notify>,
}

impl Shared {
    /// Watch exactly the directories of the subscribed files (the watcher's lock held throughout, the subscribers'
    /// only to read them); a directory whose watch failed is not recorded as watched.
    fn rewatch(&self) -> Result<(), String> {
        let mut watching = lock(&self.watching);
        let wanted = lock(&self.subscribers).directories();
        if watching.watcher.is_none() {
            if wanted.is_empty() {
                return Ok(());
            }
            watching.watcher = Some(self.watcher().map_err(|e| format!("cannot watch files: {e}"))?);
        }
        let Watching { watcher, directories } = &mut *watching;
        let Some(watcher) = watcher.as_mut() else {
            return Ok(());
        };
        for gone in directories.iter().filter(|d| !wanted.contains(*d)) {
            let _ = watcher.unwatch(gone);
        }
        directories.retain(|d| wanted.contains(d));
        let mut failed = None;
        let new: Vec<&PathBuf> = wanted.iter().filter(|d| !directories.contains(*d)).collect();
        for new in new {
            match watcher.watch(new, notify::RecursiveMode::NonRecursive) {
                Ok(()) => {
                    directories.insert(new.clone());
                }
                Err(error) => {
                    tracing::warn!(directory = %new.display(), "cannot watch for subscriptions: {error}");
                    failed.get_or_insert_with(|| error.to_string());
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// A watcher whose events are kept (bounded) for the teller, which they wake.
    fn watcher(&self) -> notify::Result<notify::RecommendedWatcher> {
        let pending = Arc::downgrade(&self.pending);
        let wake = self.wake.clone();
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Some(pending) = pending.upgrade() else { return };
            let mut pending = lock(&pending);
            match event {
                Ok(event) if matches!(event.kind, notify::EventKind::Access(_)) => return,
                Ok(event) => {
                    for path in event.paths {
                        if pending.paths.len() < MAX_PENDING {
                            pending.paths.insert(path);
                        } else {
                            pending.overflowed = true;
                        }
                    }
                }
                // Events were lost (the kernel's queue overflowed): every watched file may have changed.
                Err(_) => pending.overflowed = true,
            }
            drop(pending);
            wake.notify_one();
        })
    }
}

/// Tell the subscribers of changed files, [`SETTLE`] after the first change, until `shutdown`. A watched
/// directory's own removal or move ends the subscriptions of its files, after they are told.
async fn teller(shared: Shared, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = shared.wake.notified() => {}
            () = shutdown.cancelled() => return,
        }
        tokio::time::sleep(SETTLE).await;
        let Pending { paths, overflowed } = std::mem::take(&mut *lock(&shared.pending));
        let gone_directories: BTreeSet<PathBuf> = {
            let watching = lock(&shared.watching);
            paths
                .iter()
                .filter(|p| watching.directories.contains(*p) && !p.is_dir())
                .cloned()
                .collect()
        };
        let changed = |path: &PathBuf| {
            overflowed || paths.contains(path) || path.parent().is_some_and(|d| gone_directories.contains(d))
        };
        let told = {
            let mut subscribers = lock(&shared.subscribers);
            let told: Vec<(Key, Subscriber, Vec<String>)> = subscribers
                .0
                .iter()
                .map(|(key, s)| {
                    let uris = s
                        .uris
                        .iter()
                        .filter(|(_, w)| matches!(w, Watched::File(path) if changed(path)))
                        .map(|(uri, _)| uri.clone())
                        .collect::<Vec<_>>();
                    (*key, s.to.clone(), uris)
                })
                .filter(|(_, _, uris)| !uris.is_empty())
                .collect();
            // The files of a directory that is gone (or moved away) are watched no more.
            if !gone_directories.is_empty() {
                for subscription in subscribers.0.values_mut() {
                    subscription.uris.retain(|_, w| {
                        !matches!(w, Watched::File(path) if path.parent().is_some_and(|d| gone_directories.contains(d)))
                    });
                }
                subscribers.0.retain(|_, s| !s.uris.is_empty());
            }
            told
        };
        if !gone_directories.is_empty() {
            let _ = shared.rewatch();
        }
        tell(shared.clone(), told).await;
    }
}

/// Send each subscriber its updated URIs, side by side; one too slow is skipped for the rest of this change, one
/// that cannot be told any more loses its subscriptions.
async fn tell(shared: Shared, told: Vec<(Key, Subscriber, Vec<String>)>) {
    let sends = told.into_iter().map(|(key, to, uris)| async move {
        for uri in uris {
            match to.updated(&uri).await {
                Told::Yes => {}
                Told::Slow => return None,
                Told::Gone => return Some(key),
            }
        }
        None
    });
    let gone: Vec<Key> = futures::future::join_all(sends)
        .await
        .into_iter()
        .flatten()
        .collect();
    if !gone.is_empty() {
        {
            let mut subscribers = lock(&shared.subscribers);
            for key in gone {
                subscribers.0.remove(&key);
            }
        }
        let _ = shared.rewatch();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_subscriber_is_held_to_its_bound_and_unsubscribing_frees_a_place() {
        let subscriptions = Subscriptions::default();
        let key = Key::Stream(1);
        let runtime = runtime();
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

    #[test]
    fn a_file_whose_directory_cannot_be_watched_is_not_subscribed_to() {
        let subscriptions = Subscriptions::default();
        let runtime = runtime();
        let _entered = runtime.enter();
        let shutdown = CancellationToken::new();
        let missing = PathBuf::from("/nonexistent-toolwright-dir/file.txt");
        let refused = subscriptions.subscribe(
            Key::Stream(1),
            Subscriber::Nobody,
            "file:///nonexistent-toolwright-dir/file.txt",
            Watched::File(missing),
            &shutdown,
        );
        assert!(refused.unwrap_err().starts_with("Resource not watched: "));
        assert!(subscriptions.uris(Key::Stream(1)).is_empty());
        shutdown.cancel();
    }
}
