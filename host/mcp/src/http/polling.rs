//! Polling (2025-11-25, SEP-1699): with `--poll-after SECS`, a request of a session whose answer has not come
//! after SECS has its event stream closed, and the client reconnects (`GET` with `Last-Event-ID`) for the rest.
//! A long call then holds no connection (each counts against `--max-connections`) while it runs.
//!
//! rmcp's session manager can close a request's stream itself, but it forgets the stream once its answer is
//! sent, so an answer that comes while the client is away is lost. So the server reads each request's stream
//! itself ([`Polling::hold`]): what it reads goes to the client's current connection, if any, and into a short
//! record of the stream's last events; a reconnection naming one of them ([`Polling::resume`]) gets those after
//! it, then the rest as it comes. A stream's record is kept [`KEPT_AFTER_END`] after its answer, for a client
//! that reconnects late; at most [`MAX_HELD`] streams are held (a new one drops the oldest ended one; while all
//! run, the new one is served without polling).
//!
//! Streams are a session's: a reconnection of another session never finds them.

use std::collections::{HashMap, VecDeque};
use std::future::pending;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::{Stream, StreamExt};
use rmcp::transport::streamable_http_server::SessionId;
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;

/// The last events of a stream kept for a reconnection (the answer is the last, so it is always among them).
pub(super) const KEPT_EVENTS: usize = 64;

/// How long an ended stream's record is kept for a client that reconnects late.
pub(super) const KEPT_AFTER_END: Duration = Duration::from_secs(60);

/// At most this many streams held.
pub(super) const MAX_HELD: usize = 1024;

/// A held stream: (session, rmcp's number of the HTTP request, from its event ids).
type Key = (SessionId, u64);

/// The streams held for polling (see the module docs).
#[derive(Debug)]
pub(super) struct Polling {
    after: Duration,
    held: Mutex<HashMap<Key, Arc<Held>>>,
}

/// One request's stream.
#[derive(Debug, Default)]
struct Held {
    state: Mutex<State>,
    /// Wakes the reader when a reconnection set a new deadline.
    wake: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// The last events read, oldest first.
    events: VecDeque<ServerSseMessage>,
    /// The client's current connection.
    live: Option<mpsc::Sender<ServerSseMessage>>,
    /// When the current connection is to be closed.
    deadline: Option<Instant>,
    /// When the answer came (rmcp ended the stream).
    ended: Option<Instant>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The (index, HTTP request number) of one of rmcp's request-stream event ids (`INDEX/REQUEST`).
fn parse_event_id(id: &str) -> Option<(usize, u64)> {
    let (index, request) = id.split_once('/')?;
    Some((index.parse().ok()?, request.parse().ok()?))
}

fn index_of(event: &ServerSseMessage) -> Option<usize> {
    event
        .event_id
        .as_deref()
        .and_then(parse_event_id)
        .map(|(index, _)| index)
}

/// A connection's channel: room for every kept event, so a reconnection is filled without waiting.
fn connection() -> (mpsc::Sender<ServerSseMessage>, mpsc::Receiver<ServerSseMessage>) {
    mpsc::channel(KEPT_EVENTS + 16)
}

impl Polling {
    /// Streams closed after `after`.
    pub(super) fn new(after: Duration) -> Arc<Self> {
        Arc::new(Polling {
            after,
            held: Mutex::default(),
        })
    }

    /// Serves `stream`, a request's stream of `session`, so that it can be polled: the stream returned is the
    /// client's first connection.
    pub(super) fn hold<S>(self: &Arc<Self>, session: SessionId, stream: S) -> ReceiverStream<ServerSseMessage>
    where
        S: Stream<Item = ServerSseMessage> + Send + 'static,
    {
        let (tx, rx) = connection();
        let held = Arc::new(Held::default());
        lock(&held.state).live = Some(tx);
        let polling = self.clone();
        tokio::spawn(async move { polling.read(session, held, stream).await });
        ReceiverStream::new(rx)
    }

    /// Reads rmcp's stream to its end, passing each event to the client's connection and keeping the last ones.
    async fn read<S>(self: Arc<Self>, session: SessionId, held: Arc<Held>, stream: S)
    where
        S: Stream<Item = ServerSseMessage> + Send + 'static,
    {
        let mut stream = std::pin::pin!(stream);
        let mut registered = false;
        loop {
            let deadline = lock(&held.state).deadline;
            let event = tokio::select! {
                event = stream.next() => event,
                () = async {
                    match deadline {
                        Some(deadline) => tokio::time::sleep_until(deadline).await,
                        None => pending().await,
                    }
                } => {
                    let mut state = lock(&held.state);
                    if state.deadline.is_some_and(|due| due <= Instant::now()) {
                        // Dropping the sender ends the connection's stream once it has sent what it holds.
                        state.live = None;
                        state.deadline = None;
                    }
                    continue;
                }
                () = held.wake.notified() => continue,
            };
            let Some(event) = event else {
                let mut state = lock(&held.state);
                state.ended = Some(Instant::now());
                state.live = None;
                state.deadline = None;
                return;
            };
            if !registered && let Some((_, request)) = event.event_id.as_deref().and_then(parse_event_id) {
                registered = self.register((session.clone(), request), &held);
                if registered {
                    lock(&held.state).deadline = Some(Instant::now() + self.after);
                }
            }
            let live = {
                let mut state = lock(&held.state);
                if state.events.len() == KEPT_EVENTS {
                    state.events.pop_front();
                }
                state.events.push_back(event.clone());
                state.live.clone()
            };
            if let Some(live) = live {
                // A client gone is no error: the event is kept for its reconnection.
                let _ = live.send(event).await;
            }
        }
    }

    /// Records a stream under `key`; false when [`MAX_HELD`] streams run (it is then served without polling).
    fn register(&self, key: Key, held: &Arc<Held>) -> bool {
        let mut streams = lock(&self.held);
        streams.retain(|_, held| {
            lock(&held.state)
                .ended
                .is_none_or(|at| at.elapsed() < KEPT_AFTER_END)
        });
        if streams.len() >= MAX_HELD {
            let oldest_ended = streams
                .iter()
                .filter_map(|(key, held)| lock(&held.state).ended.map(|at| (at, key.clone())))
                .min_by_key(|(at, _)| *at)
                .map(|(_, key)| key);
            match oldest_ended {
                Some(key) => {
                    streams.remove(&key);
                }
                None => {
                    tracing::warn!(
                        max = MAX_HELD,
                        "{MAX_HELD} event streams are held for polling: one more is not"
                    );
                    return false;
                }
            }
        }
        streams.insert(key, held.clone());
        true
    }

    /// The rest of the held stream `last_event_id` names, for `session` reconnecting: the kept events after it,
    /// then the others as they come (until this connection too is closed, or the answer came). `None` when no
    /// held stream of the session has that event (rmcp's own streams are resumed by rmcp).
    pub(super) fn resume(
        &self,
        session: &SessionId,
        last_event_id: &str,
    ) -> Option<ReceiverStream<ServerSseMessage>> {
        let (after, request) = parse_event_id(last_event_id)?;
        let held = lock(&self.held).get(&(session.clone(), request))?.clone();
        let (tx, rx) = connection();
        let mut state = lock(&held.state);
        for event in &state.events {
            if index_of(event).is_some_and(|index| index > after) {
                // The channel has room for every kept event.
                let _ = tx.try_send(event.clone());
            }
        }
        if state.ended.is_none() {
            state.live = Some(tx);
            state.deadline = Some(Instant::now() + self.after);
            held.wake.notify_one();
        }
        Some(ReceiverStream::new(rx))
    }

    /// How many streams are held.
    #[cfg(test)]
    fn held(&self) -> usize {
        lock(&self.held).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ServerJsonRpcMessage, ServerResult};
    use std::time::Duration;

    fn event(index: usize, request: u64) -> ServerSseMessage {
        let mut event = ServerSseMessage::from_message(ServerJsonRpcMessage::response(
            ServerResult::empty(()),
            rmcp::model::NumberOrString::Number(index as i64),
        ));
        event.event_id = Some(format!("{index}/{request}"));
        event
    }

    fn ids(events: &[ServerSseMessage]) -> Vec<String> {
        events.iter().filter_map(|event| event.event_id.clone()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_closed_mid_call_resumes_after_the_last_event_and_keeps_the_answer_that_came_meanwhile()
    {
        let polling = Polling::new(Duration::from_secs(1));
        let session: SessionId = "s".to_owned().into();
        let (rmcp_tx, rmcp_rx) = mpsc::channel(8);
        let mut first = polling.hold(session.clone(), ReceiverStream::new(rmcp_rx));
        rmcp_tx.send(event(0, 7)).await.unwrap();
        rmcp_tx.send(event(1, 7)).await.unwrap();
        // The first connection gets both, then ends at the deadline with no answer.
        let got: Vec<_> = tokio::time::timeout(Duration::from_secs(5), (&mut first).collect::<Vec<_>>())
            .await
            .unwrap();
        assert_eq!(ids(&got), ["0/7", "1/7"]);
        // The answer comes while the client is away, and the stream ends.
        rmcp_tx.send(event(2, 7)).await.unwrap();
        drop(rmcp_tx);
        tokio::time::sleep(Duration::from_millis(10)).await;
        // Another session does not find the stream.
        assert!(polling.resume(&"other".to_owned().into(), "1/7").is_none());
        let again: Vec<_> = polling.resume(&session, "1/7").unwrap().collect().await;
        assert_eq!(ids(&again), ["2/7"]);
        // Kept a while for a client that missed it, then dropped.
        let late: Vec<_> = polling.resume(&session, "0/7").unwrap().collect().await;
        assert_eq!(ids(&late), ["1/7", "2/7"]);
        tokio::time::sleep(KEPT_AFTER_END + Duration::from_secs(1)).await;
        let (_tx, rx) = mpsc::channel(1);
        let _next = polling.hold(session.clone(), ReceiverStream::new(rx));
        let (tx, rx) = mpsc::channel(1);
        let _other = polling.hold(session.clone(), ReceiverStream::new(rx));
        tx.send(event(0, 8)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(polling.held(), 1, "the ended stream was dropped");
        assert!(polling.resume(&session, "1/7").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconnection_while_the_call_runs_gets_the_rest_live_and_is_closed_again_at_its_own_deadline() {
        let polling = Polling::new(Duration::from_secs(1));
        let session: SessionId = "s".to_owned().into();
        let (rmcp_tx, rmcp_rx) = mpsc::channel(8);
        let first = polling.hold(session.clone(), ReceiverStream::new(rmcp_rx));
        rmcp_tx.send(event(0, 3)).await.unwrap();
        assert_eq!(ids(&first.collect::<Vec<_>>().await), ["0/3"]);
        let mut second = polling.resume(&session, "0/3").unwrap();
        rmcp_tx.send(event(1, 3)).await.unwrap();
        assert_eq!(ids(&[second.next().await.unwrap()]), ["1/3"]);
        assert!(second.next().await.is_none(), "closed again after a second");
        let third = polling.resume(&session, "1/3").unwrap();
        rmcp_tx.send(event(2, 3)).await.unwrap();
        drop(rmcp_tx);
        assert_eq!(ids(&third.collect::<Vec<_>>().await), ["2/3"]);
    }

    #[test]
    fn event_ids_other_than_rmcp_s_request_ones_are_not_held_streams() {
        assert_eq!(parse_event_id("3/12"), Some((3, 12)));
        for id in ["0", "", "a/1", "1/b", "1/2/3", "-1/2"] {
            assert_eq!(parse_event_id(id), None, "{id}");
        }
    }
}
