//! The few threads where short work beside others runs ([`Placement::Short`](super::Placement::Short)): a
//! parallel batch of `read`s, native or the wasm built-ins'.
//!
//! Each such call used to take a permit of a small semaphore, then a thread of tokio's blocking pool: with
//! 1000 calls at once, every permit handed on woke the batch's task, which then woke a blocking thread — two
//! thread wakes per call, the largest cost of a parallel batch of small calls. Here the work goes into one
//! queue that [`thread_count`] threads drain without sleeping while it has work; a call waits only for its own
//! result. pi's file operations share libuv's four threads the same way.
//!
//! A call whose work has not started after `WAIT` (20 ms) takes it back and runs it on a thread of its own: calls that
//! wait for each other (a `read` of a FIFO that a later `write` of the batch opens) then all run, however many
//! there are.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use super::Blocked;
use tokio_util::sync::CancellationToken;

/// How long queued work waits for one of the threads before it takes a thread of its own.
const WAIT: Duration = Duration::from_millis(20);

/// How long one of the threads waits for work before it ends.
const IDLE: Duration = Duration::from_secs(10);

/// How many threads there are at most: twice the cores, at least four.
pub fn thread_count() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    (cores * 2).max(4)
}

type Job = Box<dyn FnOnce() + Send>;

/// One call's queued work: taken once, by one of the threads or by the call itself when it gives up waiting.
struct Queued(Mutex<Option<Job>>);

impl Queued {
    fn take(&self) -> Option<Job> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// The short-work threads and their queue.
struct Threads {
    state: Mutex<State>,
    work: Condvar,
    /// How many threads it runs at most.
    max: usize,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Arc<Queued>>,
    threads: usize,
    idle: usize,
}

fn threads() -> &'static Threads {
    static THREADS: OnceLock<Threads> = OnceLock::new();
    THREADS.get_or_init(|| Threads::new(thread_count()))
}

impl Threads {
    fn new(max: usize) -> Self {
        Threads {
            state: Mutex::default(),
            work: Condvar::new(),
            max,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn submit(&'static self, queued: Arc<Queued>) {
        let mut state = self.state();
        state.queue.push_back(queued);
        if state.idle > 0 {
            drop(state);
            self.work.notify_one();
        } else if state.threads < self.max {
            state.threads += 1;
            drop(state);
            let started = std::thread::Builder::new()
                .name("toolwright-brief".into())
                .spawn(move || self.serve());
            if started.is_err() {
                // No thread: the queued work is taken back by its call after WAIT.
                self.state().threads -= 1;
            }
        }
    }

    fn serve(&self) {
        loop {
            let queued = {
                let mut state = self.state();
                loop {
                    if let Some(queued) = state.queue.pop_front() {
                        break queued;
                    }
                    state.idle += 1;
                    let (next, waited) = self
                        .work
                        .wait_timeout(state, IDLE)
                        .unwrap_or_else(PoisonError::into_inner);
                    state = next;
                    state.idle -= 1;
                    if waited.timed_out() && state.queue.is_empty() {
                        state.threads -= 1;
                        return;
                    }
                }
            };
            if let Some(job) = queued.take() {
                job();
            }
        }
    }
}

/// Run `work` on one of the threads (or, after `WAIT` in the queue, on a thread of its own); while it
/// is queued, `cancel` takes it back. The threads are not the runtime's: `work` must not need it (no updates
/// that wait for room, no nested calls).
pub async fn run<T: Send + 'static>(
    cancel: &CancellationToken,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Blocked> {
    run_on(threads(), cancel, work).await
}

async fn run_on<T: Send + 'static>(
    threads: &'static Threads,
    cancel: &CancellationToken,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Blocked> {
    let (sender, mut done) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = sender.send(std::panic::catch_unwind(AssertUnwindSafe(work)));
    });
    let queued = Arc::new(Queued(Mutex::new(Some(job))));
    threads.submit(queued.clone());
    let ran = tokio::select! {
        ran = &mut done => ran,
        () = tokio::time::sleep(WAIT) => {
            // Not started yet: it runs on a thread of its own. (Started: it is the threads', and ends there.)
            if let Some(job) = queued.take() {
                drop(tokio::task::spawn_blocking(job));
            }
            (&mut done).await
        }
        () = cancel.cancelled() => match queued.take() {
            Some(_) => return Err(Blocked::Aborted),
            None => done.await,
        },
    };
    match ran {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(payload)) => Err(Blocked::Panicked(payload)),
        // The job was dropped unrun: the runtime went away under it.
        Err(_) => Err(Blocked::Aborted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_runs_on_the_pool_and_a_panic_is_reported_not_propagated() {
        let caller = std::thread::current().id();
        let ran = run(&CancellationToken::new(), || std::thread::current().id()).await;
        assert!(matches!(ran, Ok(id) if id != caller));
        let panicked = run(&CancellationToken::new(), || -> u8 { panic!("boom") }).await;
        assert!(matches!(panicked, Err(Blocked::Panicked(_))));
    }

    type Gate = Arc<(Mutex<bool>, Condvar)>;

    /// Short-work threads of one thread, and a call that holds it until the gate opens (for at most 20 s).
    async fn one_thread_held() -> (
        &'static Threads,
        Gate,
        tokio::task::JoinHandle<Result<(), Blocked>>,
    ) {
        let threads: &'static Threads = Box::leak(Box::new(Threads::new(1)));
        let gate: Gate = Arc::default();
        let held = gate.clone();
        let busy = tokio::spawn(async move {
            run_on(threads, &CancellationToken::new(), move || {
                let (open, opened) = &*held;
                let guard = open.lock().unwrap_or_else(PoisonError::into_inner);
                let _unused = opened
                    .wait_timeout_while(guard, Duration::from_secs(20), |open| !*open)
                    .unwrap_or_else(PoisonError::into_inner);
            })
            .await
        });
        // Until its thread has taken the held call's work.
        while {
            let state = threads.state();
            state.threads == 0 || state.idle > 0 || !state.queue.is_empty()
        } {
            tokio::task::yield_now().await;
        }
        (threads, gate, busy)
    }

    fn open(gate: &Gate) {
        let (open, opened) = &**gate;
        *open.lock().unwrap_or_else(PoisonError::into_inner) = true;
        opened.notify_all();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_cancelled_while_it_waits_for_a_thread_never_runs() {
        let (threads, gate, busy) = one_thread_held().await;
        let cancel = CancellationToken::new();
        cancel.cancel();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let outcome = run_on(threads, &cancel, move || flag.store(true, Ordering::SeqCst)).await;
        open(&gate);
        assert!(matches!(busy.await, Ok(Ok(()))));
        assert!(matches!(outcome, Err(Blocked::Aborted)));
        // The emptied entry stays queued until the freed thread comes to it; wait until that thread has taken it
        // and gone idle (the held call's result is sent before its thread looks at the queue again).
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while {
            let state = threads.state();
            !state.queue.is_empty() || state.idle == 0
        } {
            assert!(
                std::time::Instant::now() < deadline,
                "the one thread never came back to its queue"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(!ran.load(Ordering::SeqCst), "cancelled work must not run");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_that_waits_too_long_for_the_pool_runs_on_a_thread_of_its_own() {
        // The one thread is held until this second call has run: only a thread of its own can run it.
        let (threads, gate, busy) = one_thread_held().await;
        let started = std::time::Instant::now();
        let opener = gate.clone();
        let outcome = run_on(threads, &CancellationToken::new(), move || open(&opener)).await;
        assert!(matches!(outcome, Ok(())));
        assert!(started.elapsed() >= WAIT);
        assert!(matches!(busy.await, Ok(Ok(()))));
    }
}
