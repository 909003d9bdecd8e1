//! The streamable-HTTP transport: rmcp's `StreamableHttpService` at `/mcp`, behind a bearer-token check, on a
//! listener of the caller's.
//!
//! - `Host` and `Origin` are validated by rmcp against allow-lists (a foreign one gets 403): loopback names and
//!   loopback origins by default, plus what [`HttpOptions`] adds.
//! - With a token, every request must carry `Authorization: Bearer <token>` (else 401 and
//!   `WWW-Authenticate: Bearer`, and the connection closes); the comparison takes the same time wherever the
//!   first difference is.
//! - Hostile clients are bounded ([`HttpOptions`]): a request head must arrive within the header timeout (also
//!   the wait for the next request on a kept-alive connection); a connection that moves no byte for the idle
//!   timeout is closed; `connections` bounds the connections (the oldest one that never sent the token makes
//!   room) and `sessions` the live MCP sessions (the least recently used idle one makes room); bodies over
//!   4 MiB get 413 (rmcp).
//! - 2025-11-25 clients get sessions (`Mcp-Session-Id`); 2026-07-28 clients are served statelessly, and closing a
//!   request's stream cancels its call.
//! - Shutdown (the `shutdown` token, which the CLI cancels on SIGINT and SIGTERM) stops accepting, cancels
//!   every running call (their processes are killed) and waits for them, then closes the connections.

mod connections;
mod polling;
mod sessions;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{McpServeError, McpServer};
use connections::{Activity, Admitted, Connections, Watched};
use sessions::BoundedSessions;

/// The path the server answers on.
pub const MCP_PATH: &str = "/mcp";

/// How long connections may take to close once the calls have finished at shutdown.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// How `toolwright mcp --http` serves.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// `Host` values accepted besides the loopback names (`localhost`, `127.0.0.1`, `::1`), as `host` or
    /// `host:port`.
    pub allowed_hosts: Vec<String>,
    /// `Origin` values accepted besides loopback origins (`http://localhost:*`, `http://127.0.0.1:*`,
    /// `http://[::1]:*`), with their scheme (`https://app.example:443`). A request without `Origin` (any
    /// non-browser client) passes.
    pub allowed_origins: Vec<String>,
    /// The bearer token every request must carry, when set.
    pub token: Option<String>,
    /// At most this many connections at once ([`DEFAULT_MAX_CONNECTIONS`]); fewer when the open-file limit
    /// leaves less room ([`connection_bound`]).
    pub max_connections: usize,
    /// At most this many live MCP sessions ([`DEFAULT_MAX_SESSIONS`]).
    pub max_sessions: usize,
    /// How long a client may take to send a request head, and to start the next one on a kept-alive connection
    /// ([`DEFAULT_HEADER_TIMEOUT`]).
    pub header_timeout: Duration,
    /// How long a connection may move no byte either way, mid-request ([`IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
    /// When set, a session's request still unanswered after this long has its event stream ended, and the
    /// client reconnects with `Last-Event-ID` for the rest (2025-11-25's polling, SEP-1699).
    pub poll_after: Option<Duration>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            token: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_sessions: DEFAULT_MAX_SESSIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            poll_after: None,
        }
    }
}

/// The default bound on open connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// The default bound on live MCP sessions: a few clients need a few; each costs about 140 KiB while it
/// lives (docs/mcp.md).
pub const DEFAULT_MAX_SESSIONS: usize = 100;

/// The default time a client has to send a request head (hyper's default is 30 s; clients send theirs at once).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection may move no byte mid-request: four times rmcp's event-stream keep-alive (15 s).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// File descriptors kept for everything but connections (plugins, programs and their pipes, logs).
const RESERVED_FDS: u64 = 128;

/// The connections the server holds at most: `configured`, or fewer when the open-file limit leaves less than
/// that beside 128 kept for other files (at the limit, `accept` fails and every new client waits in the
/// backlog).
pub fn connection_bound(configured: usize) -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let room = usize::try_from(limit.saturating_sub(RESERVED_FDS).max(1)).unwrap_or(usize::MAX);
    configured.min(room).max(1)
}

type Body = BoxBody<Bytes, Infallible>;

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Compare without leaking, through timing, how much of the token matched.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let mut difference = u8::from(given.len() != expected.len());
    for (i, e) in expected.iter().enumerate() {
        difference |= given.get(i).copied().unwrap_or(0) ^ e;
    }
    difference == 0
}

/// 401, and the connection closes: a client without the token gets nothing more from it.
fn unauthorized() -> Response<Body> {
    let mut response = plain(
        StatusCode::UNAUTHORIZED,
        "Unauthorized: a bearer token is required",
    );
    let headers = response.headers_mut();
    headers.insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Bearer realm=\"toolwright\""),
    );
    headers.insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    response
}

fn authorized<B>(request: &Request<B>, token: &str) -> bool {
    request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "))
        .is_some_and(|given| same_secret(given, token.as_bytes()))
}

impl McpServer {
    /// Serve on `listener` until `shutdown` is cancelled (then the running calls are cancelled and awaited) or
    /// the listener fails.
    pub async fn serve_http(
        self,
        listener: TcpListener,
        options: HttpOptions,
        shutdown: CancellationToken,
    ) -> Result<(), McpServeError> {
        let local = listener
            .local_addr()
            .map_err(|e| McpServeError::Service(format!("the listener has no address: {e}")))?;
        let rmcp_stop = CancellationToken::new();
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        if !local.ip().is_loopback() && !local.ip().is_unspecified() {
            hosts.push(local.ip().to_string());
        }
        hosts.extend(options.allowed_hosts.iter().cloned());
        let mut origins: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
            .map(String::from)
            .into();
        origins.extend(options.allowed_origins.iter().cloned());
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_cancellation_token(rmcp_stop.clone());
        let server = self.clone();
        let service = StreamableHttpService::new(
            move || Ok(server.session()),
            Arc::new(BoundedSessions::new(options.max_sessions, options.poll_after)),
            config,
        );
        let max_connections = connection_bound(options.max_connections);
        if max_connections < options.max_connections {
            tracing::info!(
                "at most {max_connections} connections (the open-file limit leaves no room for {})",
                options.max_connections
            );
        }
        let admission = Connections::new(max_connections);
        let limits = Arc::new(Limits {
            token: options.token.map(Into::into),
            header_timeout: options.header_timeout,
            idle_timeout: options.idle_timeout,
        });
        let connections = tokio_util::task::TaskTracker::new();
        let closing = CancellationToken::new();
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = shutdown.cancelled() => break,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::warn!("cannot accept a connection: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Some(admitted) = admission.admit() else {
                tracing::warn!(
                    %peer,
                    "connection refused: {max_connections} connections are open, all with the token"
                );
                drop(stream);
                continue;
            };
            let (service, limits, closing) = (service.clone(), limits.clone(), closing.clone());
            connections.spawn(serve_connection(stream, peer, service, limits, admitted, closing));
        }
        drop(listener);
        // Cancel every running call and wait for them (their processes are killed), then end the streams.
        self.finish_calls().await;
        rmcp_stop.cancel();
        closing.cancel();
        connections.close();
        if tokio::time::timeout(CLOSE_GRACE, connections.wait())
            .await
            .is_err()
        {
            tracing::debug!("connections still open after the grace period: dropped");
        }
        Ok(())
    }
}

/// What every connection is held to.
struct Limits {
    token: Option<Arc<str>>,
    header_timeout: Duration,
    idle_timeout: Duration,
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    service: StreamableHttpService<McpServer, BoundedSessions>,
    limits: Arc<Limits>,
    admitted: Admitted,
    closing: CancellationToken,
) {
    // An answer goes out as several small writes (SSE priming event, message, end of stream): with Nagle's
    // algorithm each waits for the client's delayed ACK, 40 ms a call.
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%peer, "cannot set TCP_NODELAY: {error}");
    }
    let authorized_once = admitted.authorized.clone();
    let token = limits.token.clone();
    let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
        let mut service = service.clone();
        let token = token.clone();
        let authorized_once = authorized_once.clone();
        async move {
            if request.uri().path() != MCP_PATH {
                return Ok::<_, Infallible>(plain(
                    StatusCode::NOT_FOUND,
                    "Not Found: the MCP endpoint is /mcp",
                ));
            }
            if let Some(token) = &token
                && !authorized(&request, token)
            {
                return Ok(unauthorized());
            }
            authorized_once.store(true, std::sync::atomic::Ordering::Relaxed);
            let response = tower_service::Service::call(&mut service, request).await;
            Ok(response.unwrap_or_else(|never| match never {}))
        }
    });
    let activity = Activity::new();
    let io = Watched {
        io: stream,
        activity: activity.clone(),
    };
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .serve_connection(TokioIo::new(io), handler);
    tokio::pin!(connection);
    tokio::select! {
        outcome = connection.as_mut() => {
            if let Err(error) = outcome {
                tracing::debug!(%peer, "connection ended: {error}");
            }
        }
        () = connections::silence(&activity, limits.idle_timeout) => {
            tracing::debug!(%peer, "connection closed: no byte moved for {:?}", limits.idle_timeout);
        }
        () = admitted.evict.cancelled() => {
            tracing::debug!(%peer, "connection closed to make room: it never sent the token");
        }
        () = closing.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(CLOSE_GRACE, connection).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_must_match_exactly() {
        assert!(same_secret(b"secret", b"secret"));
        assert!(!same_secret(b"secreT", b"secret"));
        assert!(!same_secret(b"secret2", b"secret"));
        assert!(!same_secret(b"secre", b"secret"));
        assert!(!same_secret(b"", b"secret"));
        let request = Request::builder()
            .header("Authorization", "Bearer secret")
            .body(())
            .unwrap();
        assert!(authorized(&request, "secret"));
        let request = Request::builder()
            .header("Authorization", "secret")
            .body(())
            .unwrap();
        assert!(!authorized(&request, "secret"));
    }
}
