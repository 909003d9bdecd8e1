//! Polling (2025-11-25, SEP-1699): with `--poll-after SECS`, a request of a session whose answer has not come
//! after SECS has its event stream ended, and the client reconnects (`GET` with `Last-Event-ID`) for the rest. A
//! long call then holds a connection at most SECS at a time (each counts against `--max-connections`).
//!
//! rmcp's session manager can end a request's stream itself, but it forgets the stream once its answer is sent, so
//! an answer that comes while the client is away is lost. So the server reads each request's stream itself
//! ([`Polling::hold`]): what it reads goes to the client's current connection, if any, and into a record of the
//! stream's last events; a reconnection naming one of them ([`Polling::resume`]) gets those after it, then the
//! rest as it comes. A client that stops reading has its stream ended too (the record keeps what it missed).
//!
//! Bounded: a stream's record keeps its last [`KEPT_EVENTS`] events and at most [`KEPT_BYTES_PER_STREAM`] (the
//! last event always); an answered stream's record is dropped [`KEPT_AFTER_END`] after its answer, with its
//! session, or sooner to keep every record under [`KEPT_BYTES`] together; a session holds at most
//! [`MAX_HELD_PER_SESSION`] streams and the server [`MAX_HELD`] (the oldest answered one makes room, the session's
//! own first; while all run, a new stream is served without polling).
//!
//! Streams are a session's: a reconnection of another session never finds them. Event ids are rmcp's
//! (`INDEX/REQUEST`, no event store is configured: its ids would be opaque and nothing would be polled).

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

/// The bytes of one stream's kept events: older ones go first, the last one stays.
pub(super) const KEPT_BYTES_PER_STREAM: usize = 16 << 20;

/// The bytes of every stream's kept events together: the oldest answered records go first.
pub(super) const KEPT_BYTES: usize = 64 << 20;

/// How long an answered stream's record is kept for a client that reconnects late.
pub(super) const KEPT_AFTER_END: Duration = Duration::from_secs(60);

/// How long a client may take to read an event once its stream's channel is full, before the stream is ended.
pub(super) const SLOW_CLIENT: Duration = Duration::from_secs(5);

/// At most this many streams held.
pub(super) const MAX_HELD: usize = 1024;

/// At most this many streams of one session held.
pub(super) const MAX_HELD_PER_SESSION: usize = 64;

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
    /// The last events read, oldest first, with their sizes.
    events: VecDeque<(ServerSseMessage, usize)>,
    /// Their bytes.
    bytes: usize,
    /// The client's current connection.
    live: Option<mpsc::Sender<ServerSseMessage>>,
    /// When the current connection is to be ended.
    deadline: Option<Instant>,
    /// When the answer came (rmcp ended the stream).
    ended: Option<Instant>,
}

impl State {
    /// Keep `event`, dropping the oldest beyond the bounds; its size.
    fn keep(&mut self, event: ServerSseMessage) -> usize {
        let size = size_of_event(&event);
        self.events.push_back((event, size));
        self.bytes += size;
        while self.events.len() > 1 && (self.events.len() > KEPT_EVENTS || self.bytes > KEPT_BYTES_PER_STREAM)
        {
            if let Some((_, size)) = self.events.pop_front() {
                self.bytes -= size;
            }
        }
        size
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The bytes an event's message takes as JSON (counted, not kept).
fn size_of_event(event: &ServerSseMessage) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(64);
    if let Some(message) = &event.message {
        let _ = serde_json::to_writer(&mut count, message.as_ref());
    }
    count.0
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

/// What a reconnection gets.
pub(super) enum Resumed {
    /// A held stream's rest.
    Held(ReceiverStream<ServerSseMessage>),
    /// A request stream's event that no held stream of the session has: nothing (rmcp's resumption would take the
    /// stream from under its reader).
    Unknown,
    /// Not a request stream's event id: rmcp's to resume (the session's standalone stream).
    NotOurs,
}

impl Polling {
    /// Streams ended after `after`.
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

    /// Reads rmcp's stream to its end, passing each event to the client's connection and keeping the last ones;
    /// then keeps the record [`KEPT_AFTER_END`].
    async fn read<S>(self: Arc<Self>, session: SessionId, held: Arc<Held>, stream: S)
    where
        S: Stream<Item = ServerSseMessage> + Send + 'static,
    {
        let mut stream = std::pin::pin!(stream);
        let mut key = None;
        let mut tried = false;
        // Whether the last event went to a connection (so the answer, when the stream ends).
        let mut delivered_last = false;
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
            let Some(event) = event else { break };
            if !tried && let Some((_, request)) = event.event_id.as_deref().and_then(parse_event_id) {
                tried = true;
                let candidate = (session.clone(), request);
                if self.register(candidate.clone(), &held) {
                    lock(&held.state).deadline = Some(Instant::now() + self.after);
                    key = Some(candidate);
                }
            }
            // A big event may take the bytes past the budget: older answered records make room.
            let kept = key.is_some().then(|| lock(&held.state).keep(event.clone()));
            if kept.is_some_and(|size| size > 1 << 20) {
                self.make_room(Some(&held));
            }
            delivered_last = false;
            let live = lock(&held.state).live.clone();
            let Some(live) = live else { continue };
            // A client slower than the events gets [`SLOW_CLIENT`] to take one; one that does not read has its
            // stream ended: it reconnects for what it missed (and the session's other streams go on meanwhile).
            let delivered = match live.try_send(event) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(event)) => {
                    matches!(
                        tokio::time::timeout(SLOW_CLIENT, live.send(event)).await,
                        Ok(Ok(()))
                    )
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            };
            delivered_last = delivered;
            if !delivered {
                let mut state = lock(&held.state);
                if state
                    .live
                    .as_ref()
                    .is_some_and(|current| current.same_channel(&live))
                {
                    state.live = None;
                    state.deadline = None;
                }
            }
        }
        {
            let mut state = lock(&held.state);
            state.ended = Some(Instant::now());
            state.live = None;
            state.deadline = None;
        }
        let Some(key) = key else { return };
        // An answer that went to the client's connection needs no record (as rmcp's own streams: a stream is
        // forgotten once answered); one that came while the client was away is kept for its reconnection.
        if delivered_last {
            self.forget_stream(&key, &held);
            return;
        }
        self.make_room(None);
        tokio::time::sleep(KEPT_AFTER_END).await;
        self.forget_stream(&key, &held);
    }

    /// Drops the record of `key` if it is still `held`'s.
    fn forget_stream(&self, key: &Key, held: &Arc<Held>) {
        let mut streams = lock(&self.held);
        if streams.get(key).is_some_and(|kept| Arc::ptr_eq(kept, held)) {
            streams.remove(key);
        }
    }

    /// Records a stream under `key`; false when it cannot be held (it is then served without polling).
    fn register(&self, key: Key, held: &Arc<Held>) -> bool {
        let mut streams = lock(&self.held);
        let session = key.0.clone();
        let room = |streams: &mut HashMap<Key, Arc<Held>>, own: bool| {
            let oldest = streams
                .iter()
                .filter(|(key, _)| !own || key.0 == session)
                .filter_map(|(key, held)| lock(&held.state).ended.map(|at| (at, key.clone())))
                .min_by_key(|(at, _)| *at)
                .map(|(_, key)| key);
            oldest.is_some_and(|key| streams.remove(&key).is_some())
        };
        while streams.keys().filter(|key| key.0 == session).count() >= MAX_HELD_PER_SESSION {
            if !room(&mut streams, true) {
                tracing::warn!(
                    "a session holds {MAX_HELD_PER_SESSION} event streams for polling: one more is not"
                );
                return false;
            }
        }
        while streams.len() >= MAX_HELD {
            if !room(&mut streams, false) {
                tracing::warn!("{MAX_HELD} event streams are held for polling: one more is not");
                return false;
            }
        }
        streams.insert(key, held.clone());
        true
    }

    /// Drops the oldest answered records (but `keep`) until every record's events take at most [`KEPT_BYTES`].
    fn make_room(&self, keep: Option<&Arc<Held>>) {
        let mut streams = lock(&self.held);
        let mut total: usize = streams.values().map(|held| lock(&held.state).bytes).sum();
        while total > KEPT_BYTES {
            let oldest = streams
                .iter()
                .filter(|(_, held)| keep.is_none_or(|keep| !Arc::ptr_eq(keep, held)))
                .filter_map(|(key, held)| {
                    let state = lock(&held.state);
                    state.ended.map(|at| (at, key.clone(), state.bytes))
                })
                .min_by_key(|(at, _, _)| *at);
            let Some((_, key, bytes)) = oldest else { break };
            streams.remove(&key);
            total -= bytes;
        }
    }

    /// The rest of the held stream `last_event_id` names, for `session` reconnecting: the kept events after it,
    /// then the others as they come (until this connection too is ended, or the answer came).
    pub(super) fn resume(&self, session: &SessionId, last_event_id: &str) -> Resumed {
        let Some((after, request)) = parse_event_id(last_event_id) else {
            return Resumed::NotOurs;
        };
        let Some(held) = lock(&self.held).get(&(session.clone(), request)).cloned() else {
            return Resumed::Unknown;
        };
        let (tx, rx) = connection();
        let mut state = lock(&held.state);
        for (event, _) in &state.events {
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
        Resumed::Held(ReceiverStream::new(rx))
    }

    /// Forgets the streams of `session` (it was closed).
    pub(super) fn forget(&self, session: &SessionId) {
        lock(&self.held).retain(|key, _| &key.0 != session);
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

    fn held(resumed: Resumed) -> ReceiverStream<ServerSseMessage> {
        match resumed {
            Resumed::Held(stream) => stream,
            Resumed::Unknown => panic!("an unknown stream"),
            Resumed::NotOurs => panic!("not a request stream's event"),
        }
    }

    /// A request stream of `session` held by `polling`, and what rmcp would send on it (a channel of
    /// `capacity`).
    fn held_stream(
        polling: &Arc<Polling>,
        session: &SessionId,
        capacity: usize,
    ) -> (mpsc::Sender<ServerSseMessage>, ReceiverStream<ServerSseMessage>) {
        let (tx, rx) = mpsc::channel(capacity);
        (tx, polling.hold(session.clone(), ReceiverStream::new(rx)))
    }

    fn ids(events: &[ServerSseMessage]) -> Vec<String> {
        events.iter().filter_map(|event| event.event_id.clone()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_closed_mid_call_resumes_after_the_last_event_and_keeps_the_answer_that_came_meanwhile()
    {
        let polling = Polling::new(Duration::from_secs(1));
        let session: SessionId = "s".to_owned().into();
        let (rmcp_tx, mut first) = held_stream(&polling, &session, 8);
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
        assert!(matches!(
            polling.resume(&"other".to_owned().into(), "1/7"),
            Resumed::Unknown
        ));
        let again: Vec<_> = held(polling.resume(&session, "1/7")).collect().await;
        assert_eq!(ids(&again), ["2/7"]);
        // Kept a while for a client that missed it, then dropped.
        let late: Vec<_> = held(polling.resume(&session, "0/7")).collect().await;
        assert_eq!(ids(&late), ["1/7", "2/7"]);
        assert_eq!(polling.held(), 1);
        tokio::time::sleep(KEPT_AFTER_END + Duration::from_secs(1)).await;
        assert_eq!(polling.held(), 0, "the answered stream was dropped");
        assert!(matches!(polling.resume(&session, "1/7"), Resumed::Unknown));
        // The session's standalone stream (`INDEX` alone) is rmcp's.
        assert!(matches!(polling.resume(&session, "3"), Resumed::NotOurs));
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_does_not_read_has_its_stream_ended_and_a_closed_session_s_streams_go() {
        let polling = Polling::new(Duration::from_secs(60));
        let session: SessionId = "s".to_owned().into();
        let (rmcp_tx, first) = held_stream(&polling, &session, 8);
        // Never read: once its channel is full, and a while after, the connection is ended; the events are kept.
        for index in 0..=KEPT_EVENTS + 16 {
            rmcp_tx.send(event(index, 5)).await.unwrap();
        }
        tokio::time::sleep(SLOW_CLIENT + Duration::from_secs(1)).await;
        let got: Vec<_> = first.collect().await;
        assert_eq!(got.len(), KEPT_EVENTS + 16, "what the channel held, then the end");
        let rest: Vec<_> = held(polling.resume(&session, &format!("{}/5", KEPT_EVENTS + 15)))
            .take(1)
            .collect()
            .await;
        assert_eq!(ids(&rest), [format!("{}/5", KEPT_EVENTS + 16)]);
        polling.forget(&session);
        assert!(matches!(polling.resume(&session, "0/5"), Resumed::Unknown));
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_holds_a_bounded_number_of_streams_its_oldest_answered_one_making_room() {
        let polling = Polling::new(Duration::from_secs(60));
        let session: SessionId = "s".to_owned().into();
        let mut running = Vec::new();
        for request in 0..MAX_HELD_PER_SESSION as u64 {
            let (tx, _stream) = held_stream(&polling, &session, 1);
            tx.send(event(0, request)).await.unwrap();
            running.push(tx);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(polling.held(), MAX_HELD_PER_SESSION);
        // All running: one more is served without polling.
        let (tx, _extra) = held_stream(&polling, &session, 1);
        tx.send(event(0, 1000)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(matches!(polling.resume(&session, "0/1000"), Resumed::Unknown));
        // One answered: the next takes its place; another session is not limited by this one.
        drop(running.remove(0));
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (tx, _next) = held_stream(&polling, &session, 1);
        tx.send(event(0, 2000)).await.unwrap();
        let (other_tx, _other) = held_stream(&polling, &"t".to_owned().into(), 1);
        other_tx.send(event(0, 0)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            matches!(polling.resume(&session, "0/0"), Resumed::Unknown),
            "the answered one went"
        );
        assert!(matches!(polling.resume(&session, "0/2000"), Resumed::Held(_)));
        assert!(matches!(
            polling.resume(&"t".to_owned().into(), "0/0"),
            Resumed::Held(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconnection_while_the_call_runs_gets_the_rest_live_and_is_closed_again_at_its_own_deadline() {
        let polling = Polling::new(Duration::from_secs(1));
        let session: SessionId = "s".to_owned().into();
        let (rmcp_tx, first) = held_stream(&polling, &session, 8);
        rmcp_tx.send(event(0, 3)).await.unwrap();
        assert_eq!(ids(&first.collect::<Vec<_>>().await), ["0/3"]);
        let mut second = held(polling.resume(&session, "0/3"));
        rmcp_tx.send(event(1, 3)).await.unwrap();
        assert_eq!(ids(&[second.next().await.unwrap()]), ["1/3"]);
        assert!(second.next().await.is_none(), "closed again after a second");
        let third = held(polling.resume(&session, "1/3"));
        rmcp_tx.send(event(2, 3)).await.unwrap();
        drop(rmcp_tx);
        assert_eq!(ids(&third.collect::<Vec<_>>().await), ["2/3"]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_that_reached_the_client_s_connection_leaves_no_record() {
        let polling = Polling::new(Duration::from_secs(60));
        let session: SessionId = "s".to_owned().into();
        let (tx, stream) = held_stream(&polling, &session, 1);
        tx.send(event(0, 1)).await.unwrap();
        tx.send(event(1, 1)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(polling.held(), 1, "held while it runs");
        drop(tx);
        assert_eq!(ids(&stream.collect::<Vec<_>>().await), ["0/1", "1/1"]);
        assert_eq!(polling.held(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn answered_records_beyond_the_byte_budget_go_oldest_first() {
        let polling = Polling::new(Duration::from_secs(60));
        let session: SessionId = "s".to_owned().into();
        let big = "x".repeat(2 << 20);
        let streams = 40u64;
        for request in 0..streams {
            // The client is away when the answer comes: it is kept.
            let (tx, away) = held_stream(&polling, &session, 1);
            drop(away);
            let answer = ServerJsonRpcMessage::response(
                ServerResult::CallToolResult(rmcp::model::CallToolResult::success(vec![
                    rmcp::model::ContentBlock::text(big.clone()),
                ])),
                rmcp::model::NumberOrString::Number(1),
            );
            let mut event = ServerSseMessage::from_message(answer);
            event.event_id = Some(format!("0/{request}"));
            tx.send(event).await.unwrap();
            drop(tx);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let kept = polling.held() as u64;
        assert!(
            kept < streams && kept * 2 <= (KEPT_BYTES >> 20) as u64,
            "{kept} kept"
        );
        // The newest are the ones kept.
        assert!(matches!(polling.resume(&session, "0/0"), Resumed::Unknown));
        assert!(matches!(
            polling.resume(&session, &format!("0/{}", streams - 1)),
            Resumed::Held(_)
        ));
    }

    #[test]
    fn event_ids_other_than_rmcp_s_request_ones_are_not_held_streams() {
        assert_eq!(parse_event_id("3/12"), Some((3, 12)));
        for id in ["0", "", "a/1", "1/b", "1/2/3", "-1/2"] {
            assert_eq!(parse_event_id(id), None, "{id}");
        }
    }
}
