//! The server's own JSON of the results pi shows as they are: rmcp decodes every reply into its typed model,
//! which drops fields it does not know, re-orders the rest and fails a whole `tools/call` result on one content
//! block of a type it does not know. The transport keeps the raw `result` of the requests that need it, by
//! request id, before rmcp sees the reply: [`RawResults`], and [`RawLines`] (a stdio transport that records).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt as _;
use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio_util::codec::{FramedRead, LinesCodec};

/// The longest line a server may send (rmcp's own bound): a longer one ends the connection.
const MAX_LINE: usize = 16 << 20;

/// The raw `result`s of the requests whose method needs them, by request id.
#[derive(Clone, Default)]
pub(crate) struct RawResults(Arc<Mutex<RawState>>);

#[derive(Default)]
struct RawState {
    wanted: HashSet<RequestId>,
    got: HashMap<RequestId, Value>,
}

impl RawResults {
    const METHODS: &[&str] = &[
        "tools/call",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    ];

    fn state(&self) -> std::sync::MutexGuard<'_, RawState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every message sent: the ids whose results are wanted; a cancelled request's are forgotten.
    pub(crate) fn on_send(&self, message: &ClientJsonRpcMessage) {
        let mut state = self.state();
        match message {
            JsonRpcMessage::Request(r) if Self::METHODS.contains(&r.request.method()) => {
                state.wanted.insert(r.id.clone());
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    state.wanted.remove(id);
                    state.got.remove(id);
                }
            }
            _ => {}
        }
    }

    /// Every message received, before rmcp decodes it.
    pub(crate) fn on_receive(&self, value: &Value) {
        let Some(id) = value
            .get("id")
            .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok())
        else {
            return;
        };
        let mut state = self.state();
        if state.wanted.remove(&id)
            && let Some(result) = value.get("result")
        {
            state.got.insert(id, result.clone());
        }
    }

    /// The raw result of the request `id` (once its reply arrived), forgotten here.
    pub(crate) fn take(&self, id: &RequestId) -> Option<Value> {
        let mut state = self.state();
        state.wanted.remove(id);
        state.got.remove(id)
    }
}

/// A stdio transport (newline-delimited JSON-RPC over a server's standard streams) that records raw results.
pub(crate) struct RawLines<R, W> {
    lines: FramedRead<R, LinesCodec>,
    write: Arc<tokio::sync::Mutex<Option<W>>>,
    raw: RawResults,
}

impl<R: AsyncRead, W> RawLines<R, W> {
    pub(crate) fn new(read: R, write: W, raw: RawResults) -> Self {
        RawLines {
            lines: FramedRead::new(read, LinesCodec::new_with_max_length(MAX_LINE)),
            write: Arc::new(tokio::sync::Mutex::new(Some(write))),
            raw,
        }
    }
}

impl<R, W> Transport<RoleClient> for RawLines<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.raw.on_send(&item);
        let write = Arc::clone(&self.write);
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let mut guard = write.lock().await;
            let Some(w) = guard.as_mut() else {
                return Err(std::io::ErrorKind::NotConnected.into());
            };
            w.write_all(&line).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            // A line past the bound, or not UTF-8, ends the connection: the server broke the protocol.
            let line = self.lines.next().await?.ok()?;
            let line = line.trim_start_matches('\u{feff}').trim_end_matches('\r');
            // What is not JSON is a server's noise on stdout (pi skips it too).
            let Ok(value) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            self.raw.on_receive(&value);
            match serde_json::from_value::<ServerJsonRpcMessage>(value) {
                Ok(message) => return Some(message),
                Err(error) => {
                    tracing::debug!(%error, "an MCP message that is no JSON-RPC message was skipped")
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // The server's stdin closes: its end of file.
        self.write.lock().await.take();
        Ok(())
    }
}
