//! Calls that run alone, and a tool's blocking work done on the calling thread when its call does.
//!
//! A native tool's work is synchronous: it goes to tokio's blocking pool and back for every call (a thread wake
//! each way, the caller parked in between: the largest single cost of a small call). With
//! [`Pipeline::with_work_in_place`](super::Pipeline::with_work_in_place), a call that runs alone — the current
//! call of a sequential batch, or the only call a batch executes — has nothing of its batch to poll beside it, so
//! work that neither streams updates nor makes nested calls runs where the call is polled, inside tokio's
//! `block_in_place` (the worker's other tasks are handed to another thread first).
//!
//! The trade: while such work runs, nothing else in the *task* that polls the batch is polled. A batch is
//! stopped through its cancellation token, which the tools check, never by dropping its future: a
//! `tokio::time::timeout` around it fires only when the work returns.
//!
//! Work in place may still stream updates and make nested calls (a plugin's tool may do either): the futures
//! it blocks register what they owe while they poll it ([`owing`]: the call's updates to forward, its batch's
//! nested events to write). The work hands on what it sends itself ([`flush_owed`]); once it makes a nested call,
//! a helper thread serves what the nested calls send until the work ends ([`serve_others`]), so they run while
//! it goes on. So nothing waits for a task that cannot run.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll};

use tokio::runtime::{Handle, RuntimeFlavor};

use crate::tool::BoxFuture;

tokio::task_local! {
    static ALONE: bool;
}

/// What a future that polls work in place still owes while that work blocks it.
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

/// A registered [`Owed`], its lifetime erased: valid only while the future that registered it is being polled
/// on this thread (see [`owing`]).
type OwedPtr = *const (dyn Owed + 'static);

thread_local! {
    /// What the futures being polled on this thread owe, outermost first.
    static OWED: RefCell<Vec<OwedPtr>> = const { RefCell::new(Vec::new()) };
    /// Whether this thread runs work in place for the futures in [`OWED`] (inside [`run_blocking`]).
    static IN_PLACE: Cell<bool> = const { Cell::new(false) };
    /// How often work in place had what others queue served ([`serve_others`]).
    static SERVED: Cell<u64> = const { Cell::new(0) };
    /// The helper serving what others queue for the work running in place on this thread: told to stop by
    /// dropping the sender, joined before the work returns.
    static HELPER: RefCell<Option<(tokio::sync::oneshot::Sender<()>, std::thread::JoinHandle<()>)>> =
        const { RefCell::new(None) };
}

/// The owed work a helper serves.
struct OwedSet(Vec<OwedPtr>);

// SAFETY: every `Owed` is `Sync`, and the helper that holds these is joined before the work in place returns
// (`Restore`), so before the polls that registered them end.
#[allow(unsafe_code)]
unsafe impl Send for OwedSet {}

/// Poll `fut` with `owed` registered for work that runs in place inside it. A future whose owed work was served
/// from elsewhere during a poll is woken again, so it looks at its queues itself (their wakers now point at the
/// work's).
pub(crate) async fn owing<F: Future>(owed: &dyn Owed, fut: F) -> F::Output {
    struct Registered;
    impl Drop for Registered {
        fn drop(&mut self) {
            OWED.with_borrow_mut(|owed| owed.pop());
        }
    }
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        let ptr: *const (dyn Owed + '_) = owed;
        // SAFETY: only the lifetime is erased. The pointer is in OWED only while this poll runs (`Registered`
        // removes it, on a panic too), and it is read only on this thread, by work this poll runs (`run_blocking`
        // in place, which never outlives the poll), while `owed` is borrowed for the whole `owing` call.
        #[allow(unsafe_code)]
        let ptr = unsafe { std::mem::transmute::<*const (dyn Owed + '_), OwedPtr>(ptr) };
        OWED.with_borrow_mut(|owed| owed.push(ptr));
        let registered = Registered;
        let served = SERVED.get();
        let polled = fut.as_mut().poll(cx);
        drop(registered);
        if SERVED.get() != served {
            cx.waker().wake_by_ref();
        }
        polled
    })
    .await
}

/// The owed work registered on this thread, innermost first, for work running in place.
fn owed_here() -> Vec<OwedPtr> {
    if !IN_PLACE.get() {
        return Vec::new();
    }
    OWED.with_borrow(|owed| owed.iter().rev().copied().collect())
}

/// Whether this thread runs work in place under futures that it blocks: its updates then go through
/// [`flush_owed`] and its waits through [`block_on_serving`].
pub fn serving() -> bool {
    IN_PLACE.get() && OWED.with_borrow(|owed| !owed.is_empty())
}

/// From work running in place: hand on what it queued (its updates, its log lines) now, as the futures it
/// blocks would have. Nothing elsewhere.
pub fn flush_owed(runtime: &Handle) {
    for ptr in owed_here() {
        // SAFETY: see `owing`: the registering poll is below this frame on this thread.
        #[allow(unsafe_code)]
        let owed = unsafe { &*ptr };
        if let Some(flush) = owed.flush() {
            runtime.block_on(flush);
        }
    }
}

/// From work running in place that makes a nested call: serve what the futures it blocks owe to others (the
/// nested calls' events, which each wait until written) on a helper thread, from now until the work returns, so
/// the nested calls run while it goes on. Elsewhere, or once started, nothing.
pub fn serve_others(runtime: &Handle) {
    if !IN_PLACE.get() || HELPER.with_borrow(Option::is_some) {
        return;
    }
    let owed = OwedSet(owed_here());
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
                    // SAFETY: see `OwedSet`: the registering polls outlive this thread.
                    #[allow(unsafe_code)]
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

/// `runtime.block_on(fut)`, from work that may be running in place and waits for nested calls in `fut`: they
/// run beside others (never in place inside it), and their events are served meanwhile ([`serve_others`]).
pub fn block_on_serving<F: Future>(runtime: &Handle, fut: F) -> F::Output {
    serve_others(runtime);
    runtime.block_on(beside(fut))
}

/// Run `fut` as a call beside others: work inside it never runs in place.
pub async fn beside<F: Future>(fut: F) -> F::Output {
    scoped(false, fut).await
}

/// Whether the call being executed runs alone: nothing else of its batch waits to be polled beside it, and its
/// pipeline lets work run in place (see
/// [`Pipeline::with_work_in_place`](super::Pipeline::with_work_in_place)).
pub fn runs_alone() -> bool {
    ALONE.try_with(|alone| *alone).unwrap_or(false)
}

/// Run `call` as a call that runs alone (`true`) or beside others (`false`): whatever it runs inside (an
/// async tool's nested calls) sees this, until a nested scope says otherwise.
pub(super) async fn scoped<F: Future>(alone: bool, call: F) -> F::Output {
    ALONE.scope(alone, call).await
}

/// How a tool's blocking work ended without a value.
pub enum Blocked {
    /// It panicked, with this payload.
    Panicked(Box<dyn Any + Send>),
    /// The runtime shut down before it ran.
    Aborted,
}

/// Whether blocking work may run on the calling thread: the call [runs alone](runs_alone), on a multi-threaded
/// runtime (whose worker hands its other tasks off first). Only for work that neither sends updates nor makes
/// nested calls: both wait for the batch to be polled, which the work would be blocking.
pub fn may_block_here() -> bool {
    runs_alone() && Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Run `work`, a tool's blocking work: with `here` (see [`may_block_here`]) on the calling thread, inside
/// tokio's `block_in_place`; otherwise, or where tokio refuses to block in place (a `LocalSet`), on a thread of
/// tokio's blocking pool.
pub async fn run_blocking<T: Send + 'static>(
    here: bool,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Blocked> {
    let mut work = Some(work);
    if here {
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
            tokio::task::block_in_place(|| {
                let work = work.take()?;
                let outer = IN_PLACE.replace(true);
                let _restore = Restore(outer);
                Some(work())
            })
        }));
        match ran {
            Ok(Some(value)) => {
                // A sequential batch of such calls would otherwise never yield: let the task's other futures
                // and the worker's other tasks run when its budget is spent.
                tokio::task::consume_budget().await;
                return Ok(value);
            }
            Ok(None) => return Err(Blocked::Aborted),
            Err(payload) if work.is_none() => return Err(Blocked::Panicked(payload)),
            // tokio refused before the work started.
            Err(_) => {}
        }
    }
    let Some(work) = work else {
        return Err(Blocked::Aborted);
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => Ok(value),
        Err(join) if join.is_panic() => Err(Blocked::Panicked(join.into_panic())),
        Err(_) => Err(Blocked::Aborted),
    }
}

/// Stops the helper of the work that ran in place, if any, and puts back [`IN_PLACE`]'s outer value, on a panic
/// too.
struct Restore(bool);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some((stop, helper)) = HELPER.take() {
            drop(stop);
            let _ = helper.join();
        }
        IN_PLACE.set(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As a tool's adapter decides: only work that allows it, only in a call that runs alone.
    async fn thread_of(allows: bool) -> std::thread::ThreadId {
        run_blocking(allows && may_block_here(), || std::thread::current().id())
            .await
            .unwrap_or_else(|_| panic!("the work ran"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_runs_here_only_when_the_call_runs_alone_and_the_work_allows_it() {
        let caller = std::thread::current().id();
        assert_ne!(thread_of(true).await, caller, "not alone: the blocking pool");
        assert_eq!(
            scoped(true, thread_of(true)).await,
            caller,
            "alone: the calling thread"
        );
        assert_ne!(
            scoped(true, thread_of(false)).await,
            caller,
            "work that may stream or nest: the blocking pool"
        );
        // A nested scope (a nested call inside an alone call) runs beside others again.
        assert_ne!(scoped(true, scoped(false, thread_of(true))).await, caller);
        assert!(!runs_alone());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_single_threaded_runtime_keeps_its_thread_free() {
        assert!(scoped(true, async { runs_alone() && !may_block_here() }).await);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_local_set_where_tokio_refuses_falls_back_to_the_blocking_pool() {
        let local = tokio::task::LocalSet::new();
        let caller = std::thread::current().id();
        let id = local
            .run_until(scoped(true, async {
                run_blocking(may_block_here(), || std::thread::current().id()).await
            }))
            .await;
        assert_ne!(id.unwrap_or_else(|_| panic!("the work ran")), caller);
    }

    /// Owes one flush, and a message to whoever waits for it (as a nested call waits for its event's write).
    struct Owing {
        flushed: std::sync::atomic::AtomicUsize,
        message: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<&'static str>>>,
    }

    impl Owed for Owing {
        fn flush(&self) -> Option<BoxFuture<'_, ()>> {
            Some(Box::pin(async {
                self.flushed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }))
        }

        fn poll_serve(&self, _cx: &mut Context<'_>) -> Poll<()> {
            if let Some(tx) = self.message.lock().unwrap().take() {
                let _ = tx.send("served");
            }
            Poll::Pending
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_in_place_serves_what_the_futures_it_blocks_owe_and_other_work_does_not() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let owed = Owing {
            flushed: 0.into(),
            message: std::sync::Mutex::new(Some(tx)),
        };
        let work = move || {
            let runtime = Handle::current();
            let in_place = serving();
            flush_owed(&runtime);
            // Only serving what the futures it blocks owe (on the helper thread) can answer this wait.
            let answer = block_on_serving(&runtime, async {
                (!may_block_here(), rx.await.unwrap_or("dropped"))
            });
            (in_place, answer)
        };
        let ran = owing(&owed, scoped(true, run_blocking(true, work))).await;
        let (in_place, (beside, answer)) = ran.unwrap_or_else(|_| panic!("the work ran"));
        assert!(in_place);
        assert_eq!(answer, "served");
        assert!(beside, "what it waits for runs beside others");
        assert_eq!(owed.flushed.load(std::sync::atomic::Ordering::Relaxed), 1);
        // On another thread (the blocking pool) nothing is served from the work: the futures are polled as usual.
        let elsewhere = owing(
            &owed,
            run_blocking(false, || {
                flush_owed(&Handle::current());
                serving()
            }),
        )
        .await;
        assert!(matches!(elsewhere, Ok(false)));
        assert_eq!(owed.flushed.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_place_is_reported_not_propagated() {
        let outcome = scoped(true, run_blocking(true, || -> u8 { panic!("boom") })).await;
        assert!(matches!(outcome, Err(Blocked::Panicked(_))));
    }
}
