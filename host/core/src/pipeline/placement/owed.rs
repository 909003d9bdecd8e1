//! What the futures that work [placed here](super::Placement::Here) blocks still owe, and the one place where
//! their borrows lose their lifetime.
//!
//! Work placed here may still stream updates and make nested calls (a plugin's tool may do either): the futures
//! it blocks lend what they owe to the thread while they poll it ([`owing`]: the call's updates to forward, its
//! batch's nested events to write). The work hands on what it sends itself ([`flush_owed`]); once it makes a
//! nested call, a helper thread serves what the nested calls send until the work ends ([`serve_others`]), so
//! they run while it goes on. So nothing waits for a task that cannot run.
//!
//! # Safety
//!
//! Each lent [`Owed`] is kept as a pointer whose lifetime is erased (`Erased`). It stays valid because:
//!
//! 1. A future polled under [`owing`] lends its `&dyn Owed`, borrowed for the whole `owing` call, for the length
//!    of one poll: it goes onto this thread's `LENT` when the poll begins and comes off when the poll returns or
//!    unwinds (`Lent`'s drop). `LENT` is thread-local, so its entries are the polls below the current frame on
//!    this thread, innermost last.
//! 2. Work placed here runs inside such a poll, on the same thread ([`here`], called by `block_in_place` from the
//!    poll). It notes how many entries were lent when it began (`HERE`) and reads only those: they were lent by
//!    polls below its frame, which cannot return before it does.
//! 3. On this thread ([`flush_owed`]) they are read while the work runs, so while they are valid (2).
//! 4. On the helper thread ([`serve_others`]) they are read until the helper stops, and the helper is told to
//!    stop and joined when [`here`] ends (`Restore`'s drop, on a panic too), so before those polls return (2).
//!    Every `Owed` is `Sync`, so reading them from the helper is sound.
//!
//! Nothing else reads `LENT`; nothing outside this module sees an `Erased`.

#![allow(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::task::{Context, Poll};

use tokio::runtime::Handle;

use crate::tool::BoxFuture;

/// What a future that polls work placed here still owes while that work blocks it.
pub(crate) trait Owed: Sync {
    /// Hand on what the work itself queued (its partial results and log lines), in order.
    fn flush(&self) -> Option<BoxFuture<'_, ()>> {
        None
    }

    /// Make progress on what others queue (its nested calls' events, from other threads): `Pending` once
    /// nothing more can be done now, `cx` woken when there is. Called from another thread than the one that
    /// polls the future (the helper of [`serve_others`]).
    fn poll_serve(&self, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

/// A lent [`Owed`], its lifetime erased: valid while its lending poll runs (see the module's safety argument).
type Erased = *const (dyn Owed + 'static);

thread_local! {
    /// What the futures being polled on this thread lend, outermost first.
    static LENT: RefCell<Vec<Erased>> = const { RefCell::new(Vec::new()) };
    /// While work placed here runs on this thread: how many of [`LENT`] were lent when it began (what it blocks).
    static HERE: Cell<Option<usize>> = const { Cell::new(None) };
    /// How often work placed here had what others queue served ([`serve_others`]).
    static SERVED: Cell<u64> = const { Cell::new(0) };
    /// The helper serving what others queue for the work placed here on this thread: told to stop by dropping
    /// the sender, joined before the work returns.
    static HELPER: RefCell<Option<(tokio::sync::oneshot::Sender<()>, std::thread::JoinHandle<()>)>> =
        const { RefCell::new(None) };
}

/// The owed work a helper serves.
struct Helped(Vec<Erased>);

// SAFETY: every `Owed` is `Sync`, and the helper that holds these is joined before the work placed here returns
// (`Restore`), so before the polls that lent them end (the module's safety argument, 4).
unsafe impl Send for Helped {}

/// Poll `fut` with `owed` lent to work placed here inside it. A future whose owed work was served from
/// elsewhere during a poll is woken again, so it looks at its queues itself (their wakers now point at the
/// work's).
pub(crate) async fn owing<F: Future>(owed: &dyn Owed, fut: F) -> F::Output {
    /// Takes the lent entry back when the poll returns or unwinds.
    struct Lent;
    impl Drop for Lent {
        fn drop(&mut self) {
            LENT.with_borrow_mut(|lent| lent.pop());
        }
    }
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        let ptr: *const (dyn Owed + '_) = owed;
        // SAFETY: only the lifetime is erased; the entry is read only as the module's safety argument says (1).
        let ptr = unsafe { std::mem::transmute::<*const (dyn Owed + '_), Erased>(ptr) };
        LENT.with_borrow_mut(|lent| lent.push(ptr));
        let lent = Lent;
        let served = SERVED.get();
        let polled = fut.as_mut().poll(cx);
        drop(lent);
        if SERVED.get() != served {
            cx.waker().wake_by_ref();
        }
        polled
    })
    .await
}

/// Run `work` as work placed here: it blocks what the polls below it lent, and serves it through
/// [`flush_owed`] and [`serve_others`] until it returns (its helper, if any, joined then).
pub(super) fn here<T>(work: impl FnOnce() -> T) -> T {
    let lent = LENT.with_borrow(Vec::len);
    let _restore = Restore(HERE.replace(Some(lent)));
    work()
}

/// Stops the helper of the work that was placed here, if any, and puts back [`HERE`]'s outer value, on a panic
/// too.
struct Restore(Option<usize>);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some((stop, helper)) = HELPER.take() {
            drop(stop);
            let _ = helper.join();
        }
        HERE.set(self.0);
    }
}

/// What the futures that the work placed here on this thread blocks owe, innermost first; elsewhere nothing.
fn blocked() -> Vec<Erased> {
    let Some(lent) = HERE.get() else {
        return Vec::new();
    };
    LENT.with_borrow(|all| all[..lent.min(all.len())].iter().rev().copied().collect())
}

/// Whether this thread runs work placed here under futures that it blocks: its updates then go through
/// [`flush_owed`] and its waits for nested calls through
/// [`block_on_nested`](super::block_on_nested).
pub fn runs_here() -> bool {
    HERE.get().is_some_and(|lent| lent > 0)
}

/// From work placed here: hand on what it queued (its updates, its log lines) now, as the futures it blocks
/// would have. Elsewhere nothing.
pub fn flush_owed(runtime: &Handle) {
    for ptr in blocked() {
        // SAFETY: lent by a poll below this frame on this thread (the module's safety argument, 3).
        let owed = unsafe { &*ptr };
        if let Some(flush) = owed.flush() {
            runtime.block_on(flush);
        }
    }
}

/// From work placed here that makes a nested call: serve what the futures it blocks owe to others (the nested
/// calls' events, which each wait until written) on a helper thread, from now until the work returns, so the
/// nested calls run while it goes on. Elsewhere, or once started, nothing.
pub fn serve_others(runtime: &Handle) {
    if HELPER.with_borrow(Option::is_some) {
        return;
    }
    let owed = Helped(blocked());
    if owed.0.is_empty() {
        return;
    }
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let runtime = runtime.clone();
    let helper = std::thread::Builder::new()
        .name("toolwright-serve".into())
        .spawn(move || {
            let owed = owed;
            runtime.block_on(std::future::poll_fn(|cx| {
                if std::pin::Pin::new(&mut stopped).poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                for ptr in &owed.0 {
                    // SAFETY: the helper is joined before the lending polls return (the module's safety
                    // argument, 4).
                    let owed = unsafe { &**ptr };
                    let _ = owed.poll_serve(cx);
                }
                Poll::Pending
            }));
        });
    match helper {
        Ok(helper) => {
            HELPER.set(Some((stop, helper)));
            SERVED.set(SERVED.get() + 1);
        }
        Err(e) => tracing::warn!("cannot start a thread to serve a call's nested events: {e}"),
    }
}
