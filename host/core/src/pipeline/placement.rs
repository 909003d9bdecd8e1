//! Where a call's blocking work runs: its [`Placement`], decided in one place ([`Placement::of`]) from what the
//! work may do ([`Work`]) and whether its call runs alone, and run there ([`Placement::run`]).
//!
//! The words, each used for this and nothing else across the crates:
//!
//! - A call runs **alone** when nothing else of its batch waits to be polled beside it — the current call of a
//!   sequential batch, or the only call a batch executes — under a pipeline
//!   [`with_work_here`](super::Pipeline::with_work_here). Otherwise, and always for a nested call, it runs
//!   **beside** others ([`beside`]).
//! - [`Placement::Here`]: the work runs on the thread that polls its call, inside tokio's `block_in_place` (the
//!   worker's other tasks are handed to another thread first), for a call that runs alone on a multi-threaded
//!   runtime. A small call's largest single cost is the thread wake each way of a round trip through a pool,
//!   with the caller parked in between; here there is none.
//! - [`Placement::Short`]: on one of a few threads for short work ([`short`]), for short work beside others: a
//!   thousand calls at once share them instead of each waking (or starting) a thread of tokio's blocking pool.
//! - [`Placement::Blocking`]: on a thread of tokio's blocking pool.
//!
//! The trade of work placed here: while it runs, nothing else in the *task* that polls the batch is polled. A
//! batch is stopped through its cancellation token, which the tools check, never by dropping its future: a
//! `tokio::time::timeout` around it fires only when the work returns. What the futures it blocks still owe
//! (the call's updates, its batch's nested events) the work serves itself ([`owed`]: [`flush_owed`],
//! [`serve_others`], [`block_on_nested`]), so nothing waits for a task that cannot run.

mod owed;
mod short;

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio_util::sync::CancellationToken;

pub(crate) use owed::{Owed, owing};
pub use owed::{flush_owed, runs_here, serve_others};
pub use short::thread_count as short_threads;

tokio::task_local! {
    static ALONE: bool;
}

/// What a tool's blocking work may do, as far as where it may run is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Brief, and never waits for its batch nor for another call: it sends no update that waits for room and
    /// makes no nested call (the built-ins but `bash`, native or wasm). Here when its call runs alone, else on a
    /// short-work thread.
    Short,
    /// It may send updates and make nested calls, and serves what its batch owes itself when placed here
    /// ([`flush_owed`], [`block_on_nested`]): a wasm plugin's call. Here when its call runs alone, else on a
    /// thread of tokio's blocking pool.
    Relaying,
    /// It may wait for its batch (updates, nested calls) or for another call, and serves nothing itself (a native
    /// tool that streams or nests, as `bash`): always on a thread of tokio's blocking pool.
    Waiting,
}

/// Where a call's blocking work runs (see the module's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On the thread that polls its call, inside tokio's `block_in_place`.
    Here,
    /// On one of a few threads for short work, shared by every call beside others.
    Short,
    /// On a thread of tokio's blocking pool.
    Blocking,
}

impl Placement {
    /// Where `work` of the call being executed runs: here when the call runs alone (see the module's words) on a multi-threaded
    /// runtime (whose worker hands its other tasks off first) and the work is not [`Work::Waiting`]; else on a
    /// short-work thread for [`Work::Short`], on tokio's blocking pool for the rest. The one place this is
    /// decided.
    pub fn of(work: Work) -> Placement {
        let here = work != Work::Waiting
            && runs_alone()
            && Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
        match work {
            _ if here => Placement::Here,
            Work::Short => Placement::Short,
            Work::Relaying | Work::Waiting => Placement::Blocking,
        }
    }

    /// Run `work`, a tool's blocking work, where this placement says. Here, where tokio refuses to block in place
    /// (a `LocalSet`), it runs on tokio's blocking pool instead. On a short-work thread, `cancel` takes it back
    /// while it waits for one; once started, work runs to its end wherever it is.
    pub async fn run<T: Send + 'static>(
        self,
        cancel: &CancellationToken,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Blocked> {
        let mut work = Some(work);
        match self {
            Placement::Here => {
                let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    tokio::task::block_in_place(|| work.take().map(owed::here))
                }));
                match ran {
                    Ok(Some(value)) => {
                        // A sequential batch of such calls would otherwise never yield: let the task's other
                        // futures and the worker's other tasks run when its budget is spent.
                        tokio::task::consume_budget().await;
                        return Ok(value);
                    }
                    Ok(None) => return Err(Blocked::Aborted),
                    Err(payload) if work.is_none() => return Err(Blocked::Panicked(payload)),
                    // tokio refused before the work started.
                    Err(_) => {}
                }
            }
            Placement::Short => {
                let Some(work) = work.take() else {
                    return Err(Blocked::Aborted);
                };
                return short::run(cancel, work).await;
            }
            Placement::Blocking => {}
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
}

/// How a tool's blocking work ended without a value.
pub enum Blocked {
    /// It panicked, with this payload.
    Panicked(Box<dyn Any + Send>),
    /// The runtime shut down before it ran, or it was cancelled while it waited for a short-work thread.
    Aborted,
}

/// `runtime.block_on(fut)`, from work that may be placed here and waits for nested calls in `fut`: they run
/// beside others (never here inside it), and their events are served meanwhile ([`serve_others`]).
pub fn block_on_nested<F: Future>(runtime: &Handle, fut: F) -> F::Output {
    serve_others(runtime);
    runtime.block_on(beside(fut))
}

/// Run `fut` as a call beside others: work inside it is never placed here.
pub async fn beside<F: Future>(fut: F) -> F::Output {
    scoped(false, fut).await
}

/// Whether the call being executed runs alone: nothing else of its batch waits to be polled beside it, and its
/// pipeline lets work run here (see [`Pipeline::with_work_here`](super::Pipeline::with_work_here)).
fn runs_alone() -> bool {
    ALONE.try_with(|alone| *alone).unwrap_or(false)
}

/// Run `call` as a call that runs alone (`true`) or beside others (`false`): whatever it runs inside (an
/// async tool's nested calls) sees this, until a nested scope says otherwise.
pub(super) async fn scoped<F: Future>(alone: bool, call: F) -> F::Output {
    ALONE.scope(alone, call).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread `work`'s placement runs it on.
    async fn thread_of(work: Work) -> std::thread::ThreadId {
        Placement::of(work)
            .run(&CancellationToken::new(), || std::thread::current().id())
            .await
            .unwrap_or_else(|_| panic!("the work ran"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_runs_here_only_when_the_call_runs_alone_and_the_work_allows_it() {
        let caller = std::thread::current().id();
        assert_ne!(
            thread_of(Work::Short).await,
            caller,
            "not alone: a short-work thread"
        );
        assert_ne!(
            thread_of(Work::Relaying).await,
            caller,
            "not alone: the blocking pool"
        );
        assert_eq!(
            scoped(true, thread_of(Work::Short)).await,
            caller,
            "alone: the calling thread"
        );
        assert_eq!(scoped(true, thread_of(Work::Relaying)).await, caller);
        assert_ne!(
            scoped(true, thread_of(Work::Waiting)).await,
            caller,
            "work that may wait for its batch: the blocking pool"
        );
        // A nested scope (a nested call inside an alone call) runs beside others again.
        assert_ne!(scoped(true, scoped(false, thread_of(Work::Short))).await, caller);
        assert!(!runs_alone());
    }

    #[test]
    fn placement_is_decided_from_the_work_and_whether_its_call_runs_alone() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let of = |alone: bool| {
            runtime.block_on(scoped(alone, async {
                [Work::Short, Work::Relaying, Work::Waiting].map(Placement::of)
            }))
        };
        use Placement::*;
        assert_eq!(of(true), [Here, Here, Blocking]);
        assert_eq!(of(false), [Short, Blocking, Blocking]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_single_threaded_runtime_keeps_its_thread_free() {
        assert!(
            scoped(true, async {
                runs_alone() && Placement::of(Work::Short) == Placement::Short
            })
            .await
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_local_set_where_tokio_refuses_falls_back_to_the_blocking_pool() {
        let local = tokio::task::LocalSet::new();
        let caller = std::thread::current().id();
        let id = local.run_until(scoped(true, thread_of(Work::Relaying))).await;
        assert_ne!(id, caller);
    }

    /// Owes one flush, and a message to whoever waits for it (as a nested call waits for its event's write).
    struct Owing {
        flushed: std::sync::atomic::AtomicUsize,
        message: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<&'static str>>>,
    }

    impl Owed for Owing {
        fn flush(&self) -> Option<crate::tool::BoxFuture<'_, ()>> {
            Some(Box::pin(async {
                self.flushed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }))
        }

        fn poll_serve(&self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
            if let Some(tx) = self.message.lock().unwrap().take() {
                let _ = tx.send("served");
            }
            std::task::Poll::Pending
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_placed_here_serves_what_the_futures_it_blocks_owe_and_other_work_does_not() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let owed = Owing {
            flushed: 0.into(),
            message: std::sync::Mutex::new(Some(tx)),
        };
        let cancel = CancellationToken::new();
        let work = move || {
            let runtime = Handle::current();
            let here = runs_here();
            flush_owed(&runtime);
            // Only serving what the futures it blocks owe (on the helper thread) can answer this wait.
            let answer = block_on_nested(&runtime, async {
                (
                    Placement::of(Work::Short) != Placement::Here,
                    rx.await.unwrap_or("dropped"),
                )
            });
            (here, answer)
        };
        let ran = owing(&owed, scoped(true, Placement::Here.run(&cancel, work))).await;
        let (here, (beside, answer)) = ran.unwrap_or_else(|_| panic!("the work ran"));
        assert!(here);
        assert_eq!(answer, "served");
        assert!(beside, "what it waits for runs beside others");
        assert_eq!(owed.flushed.load(std::sync::atomic::Ordering::Relaxed), 1);
        // On another thread (the blocking pool) nothing is served from the work: the futures are polled as usual.
        let elsewhere = owing(
            &owed,
            Placement::Blocking.run(&cancel, || {
                flush_owed(&Handle::current());
                runs_here()
            }),
        )
        .await;
        assert!(matches!(elsewhere, Ok(false)));
        assert_eq!(owed.flushed.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_here_is_reported_not_propagated() {
        let outcome = scoped(
            true,
            Placement::Here.run(&CancellationToken::new(), || -> u8 { panic!("boom") }),
        )
        .await;
        assert!(matches!(outcome, Err(Blocked::Panicked(_))));
    }
}
