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

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use tokio::runtime::{Handle, RuntimeFlavor};

tokio::task_local! {
    static ALONE: bool;
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
            tokio::task::block_in_place(|| work.take().map(|work| work()))
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_place_is_reported_not_propagated() {
        let outcome = scoped(true, run_blocking(true, || -> u8 { panic!("boom") })).await;
        assert!(matches!(outcome, Err(Blocked::Panicked(_))));
    }
}
