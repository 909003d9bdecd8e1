//! The connections the HTTP server holds: at most a bound of them, and none that stays silent.
//!
//! - [`Connections::admit`]: a connection beyond the bound closes the oldest one that has not yet sent a request
//!   carrying the token (the ones a client without it can open), or, when every connection has, is itself closed
//!   at once. So connections opened and left idle by someone without the token never keep the one who has it
//!   out, and the server never runs out of file descriptors (where `accept` would fail and leave every new client
//!   waiting in the backlog).
//! - [`Watched`]: notes when a connection last moved a byte, either way; [`silence`] ends when it has moved none
//!   for the idle timeout (a stalled body, a client that stopped reading). A healthy event stream is never
//!   silent: rmcp sends a keep-alive comment on it every 15 s.

use std::collections::BTreeMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The open connections, oldest first, by the number they were admitted with.
#[derive(Debug)]
pub(super) struct Connections {
    max: usize,
    open: Mutex<(u64, BTreeMap<u64, Held>)>,
}

/// What the table keeps of one admitted connection: whether it sent the token, and how to close it.
#[derive(Debug)]
struct Held {
    authorized: Arc<AtomicBool>,
    evict: CancellationToken,
}

/// One admitted connection: mark it [`Admitted::authorized`] once it sent a request with the token; it must
/// close when `evict` is cancelled. Leaves the table when dropped.
#[derive(Debug)]
pub(super) struct Admitted {
    pub authorized: Arc<AtomicBool>,
    pub evict: CancellationToken,
    number: u64,
    connections: Arc<Connections>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.connections.lock().1.remove(&self.number);
    }
}

impl Connections {
    /// At most `max` connections (at least one).
    pub(super) fn new(max: usize) -> Arc<Self> {
        Arc::new(Connections {
            max: max.max(1),
            open: Mutex::new((0, BTreeMap::new())),
        })
    }

    fn lock(&self) -> MutexGuard<'_, (u64, BTreeMap<u64, Held>)> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admit a new connection, closing the oldest that never sent the token if the bound is reached; `None`
    /// when every open connection has sent it (the new one is to be closed).
    pub(super) fn admit(self: &Arc<Self>) -> Option<Admitted> {
        let mut open = self.lock();
        if open.1.len() >= self.max {
            let oldest = open
                .1
                .iter()
                .find(|(_, held)| !held.authorized.load(Ordering::Relaxed))
                .map(|(number, _)| *number)?;
            if let Some(held) = open.1.remove(&oldest) {
                held.evict.cancel();
            }
        }
        let number = open.0;
        open.0 += 1;
        let held = Held {
            authorized: Arc::default(),
            evict: CancellationToken::new(),
        };
        let admitted = Admitted {
            authorized: held.authorized.clone(),
            evict: held.evict.clone(),
            number,
            connections: self.clone(),
        };
        open.1.insert(number, held);
        Some(admitted)
    }

    /// How many connections are open.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().1.len()
    }
}

/// When a connection last moved a byte.
#[derive(Debug)]
pub(super) struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last: AtomicU64,
}

impl Activity {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Activity {
            start: Instant::now(),
            last: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last.load(Ordering::Relaxed))
    }
}

/// Ends once the connection has moved no byte for `idle`.
pub(super) async fn silence(activity: &Activity, idle: Duration) {
    loop {
        let deadline = activity.last() + idle;
        if Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep_until(deadline).await;
    }
}

/// A stream that notes its reads and writes in an [`Activity`].
#[derive(Debug)]
pub(super) struct Watched<T> {
    pub io: T,
    pub activity: Arc<Activity>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.touch();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_the_bound_the_oldest_connection_without_the_token_goes() {
        let connections = Connections::new(3);
        let first = connections.admit().unwrap();
        let second = connections.admit().unwrap();
        let third = connections.admit().unwrap();
        first.authorized.store(true, Ordering::Relaxed);
        let fourth = connections.admit().unwrap();
        assert!(!first.evict.is_cancelled());
        assert!(second.evict.is_cancelled());
        assert!(!third.evict.is_cancelled());
        assert_eq!(connections.len(), 3);
        // The evicted connection ends later: its leaving removes nothing else.
        drop(second);
        assert_eq!(connections.len(), 3);
        third.authorized.store(true, Ordering::Relaxed);
        fourth.authorized.store(true, Ordering::Relaxed);
        assert!(connections.admit().is_none(), "every connection has the token");
        drop(fourth);
        assert!(connections.admit().is_some());
    }

    #[tokio::test]
    async fn silence_ends_after_the_idle_time_without_a_byte() {
        let activity = Activity::new();
        let started = Instant::now();
        tokio::time::sleep(Duration::from_millis(100)).await;
        activity.touch();
        silence(&activity, Duration::from_millis(300)).await;
        assert!(started.elapsed() >= Duration::from_millis(400));
    }
}
