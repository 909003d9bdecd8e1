//! The live MCP sessions of 2025-11-25 clients, bounded: rmcp's in-memory session manager behind a table that
//! knows when each session was last used and whether a request of it is running. A new session beyond the bound
//! closes the least recently used one with no request running (its client gets 404 next and starts a new one, as
//! the spec has clients do); when every session has a request running, the new one is refused.
//!
//! Without the bound a client could open sessions until the host ran out of memory: rmcp keeps an idle one for
//! five minutes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

use super::polling::{Polling, Resumed};

/// Why a session could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// Every session holds a running request: none could make room.
    #[error(
        "the server holds its maximum of {max} MCP sessions (--max-sessions), each with a request running: try again when one ends"
    )]
    Full {
        /// The bound.
        max: usize,
    },
    /// rmcp's session manager failed.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// How one session is used.
#[derive(Debug)]
struct Use {
    /// When a request last came or ended.
    last: Instant,
    /// Its requests whose response streams are open.
    running: usize,
}

/// rmcp's [`LocalSessionManager`] with at most `max` sessions (see the module docs).
#[derive(Debug)]
pub(super) struct BoundedSessions {
    local: LocalSessionManager,
    max: usize,
    table: Arc<Mutex<HashMap<SessionId, Use>>>,
    /// Makes room and creates one session at a time, so concurrent handshakes cannot pass the bound together.
    creating: tokio::sync::Mutex<()>,
    /// Request streams closed for polling, with `--poll-after`.
    polling: Option<Arc<Polling>>,
}

fn lock(table: &Mutex<HashMap<SessionId, Use>>) -> MutexGuard<'_, HashMap<SessionId, Use>> {
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Marks a session's request as ended when its response stream goes.
struct Running {
    table: Arc<Mutex<HashMap<SessionId, Use>>>,
    id: SessionId,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(session) = lock(&self.table).get_mut(&self.id) {
            session.running = session.running.saturating_sub(1);
            session.last = Instant::now();
        }
    }
}

impl BoundedSessions {
    /// At most `max` sessions (at least one); a request's stream closed for polling after `poll_after`.
    pub(super) fn new(max: usize, poll_after: Option<Duration>) -> Self {
        BoundedSessions {
            local: LocalSessionManager::default(),
            max: max.max(1),
            table: Arc::default(),
            creating: tokio::sync::Mutex::new(()),
            polling: poll_after.map(Polling::new),
        }
    }

    /// How many sessions are live.
    #[cfg(test)]
    fn live(&self) -> usize {
        lock(&self.table).len()
    }

    fn touch(&self, id: &SessionId) {
        if let Some(session) = lock(&self.table).get_mut(id) {
            session.last = Instant::now();
        }
    }

    /// The least recently used session with no request running, taken out of the table; `None` when every
    /// session has one running.
    fn take_idlest(&self) -> Option<SessionId> {
        let mut table = lock(&self.table);
        let id = table
            .iter()
            .filter(|(_, session)| session.running == 0)
            .min_by_key(|(_, session)| session.last)
            .map(|(id, _)| id.clone())?;
        table.remove(&id);
        Some(id)
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _creating = self.creating.lock().await;
        while lock(&self.table).len() >= self.max {
            let Some(idlest) = self.take_idlest() else {
                tracing::warn!(
                    max = self.max,
                    "a new MCP session was refused: every session is busy"
                );
                return Err(SessionsError::Full { max: self.max });
            };
            tracing::info!(
                session = %idlest,
                max = self.max,
                "closing the least recently used MCP session to make room"
            );
            if let Err(error) = self.local.close_session(&idlest).await {
                tracing::debug!(session = %idlest, "closing the session: {error}");
            }
        }
        let (id, transport) = self.local.create_session().await?;
        lock(&self.table).insert(
            id.clone(),
            Use {
                last: Instant::now(),
                running: 0,
            },
        );
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        Ok(self.local.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(lock(&self.table).contains_key(id) && self.local.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        lock(&self.table).remove(id);
        if let Some(polling) = &self.polling {
            polling.forget(id);
        }
        Ok(self.local.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let running = {
            let mut table = lock(&self.table);
            let session = table
                .get_mut(id)
                .ok_or_else(|| LocalSessionManagerError::SessionNotFound(id.clone()))?;
            session.running += 1;
            session.last = Instant::now();
            Running {
                table: self.table.clone(),
                id: id.clone(),
            }
        };
        let stream = self.local.create_stream(id, message).await?.map(move |message| {
            let _running = &running;
            message
        });
        Ok(match &self.polling {
            // The stream, and with it the session's running request, lasts until rmcp ends it.
            Some(polling) => polling.hold(id.clone(), stream).left_stream(),
            None => stream.right_stream(),
        })
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        self.touch(id);
        Ok(self.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.local.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        match self
            .polling
            .as_ref()
            .map(|polling| polling.resume(id, &last_event_id))
        {
            Some(Resumed::Held(held)) => Ok(held.left_stream()),
            // Not held (past its time, or never): rmcp's resumption would take the stream from under its reader.
            Some(Resumed::Unknown) => Ok(futures::stream::empty().left_stream().right_stream()),
            Some(Resumed::NotOurs) | None => Ok(self
                .local
                .resume(id, last_event_id)
                .await?
                .right_stream()
                .right_stream()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_least_recently_used_idle_session_makes_room() {
        let sessions = BoundedSessions::new(2, None);
        let (first, _t1) = sessions.create_session().await.unwrap();
        let (second, _t2) = sessions.create_session().await.unwrap();
        sessions.touch(&first);
        let (third, _t3) = sessions.create_session().await.unwrap();
        assert_eq!(sessions.live(), 2);
        assert!(!sessions.has_session(&second).await.unwrap());
        assert!(sessions.has_session(&first).await.unwrap());
        assert!(sessions.has_session(&third).await.unwrap());
    }

    #[tokio::test]
    async fn with_every_session_busy_a_new_one_is_refused() {
        let sessions = BoundedSessions::new(1, None);
        let (only, _t) = sessions.create_session().await.unwrap();
        lock(&sessions.table).get_mut(&only).unwrap().running = 1;
        let refused = sessions.create_session().await.err().unwrap();
        assert_eq!(
            refused.to_string(),
            "the server holds its maximum of 1 MCP sessions (--max-sessions), each with a request running: try again when one ends"
        );
        assert!(sessions.has_session(&only).await.unwrap());
    }
}
