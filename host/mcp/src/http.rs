//! The streamable-HTTP transport: rmcp's `StreamableHttpService` at `/mcp`, behind a bearer-token check, on a
//! listener of the caller's.
//!
//! - `Host` and `Origin` are validated by rmcp against allow-lists (a foreign one gets 403): loopback names and
//!   loopback origins by default, plus what [`HttpOptions`] adds.
//! - With a token, every request must carry `Authorization: Bearer <token>` (else 401 and
//!   `WWW-Authenticate: Bearer`); the comparison takes the same time wherever the first difference is.
//! - 2025-11-25 clients get sessions (`Mcp-Session-Id`); 2026-07-28 clients are served statelessly, and closing a
//!   request's stream cancels its call.
//! - Shutdown (the `shutdown` token, which the CLI cancels on SIGINT and SIGTERM) stops accepting, cancels
//!   every running call (their processes are killed) and waits for them, then closes the connections.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{McpServeError, McpServer};

/// The path the server answers on.
pub const MCP_PATH: &str = "/mcp";

/// How long connections may take to close once the calls have finished at shutdown.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// How `toolwright mcp --http` serves.
#[derive(Debug, Clone, Default)]
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
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let token: Option<Arc<str>> = options.token.map(Into::into);
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
            let (service, token, closing) = (service.clone(), token.clone(), closing.clone());
            connections.spawn(serve_connection(stream, peer, service, token, closing));
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

async fn serve_connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    service: StreamableHttpService<McpServer, LocalSessionManager>,
    token: Option<Arc<str>>,
    closing: CancellationToken,
) {
    // An answer goes out as several small writes (SSE priming event, message, end of stream): with Nagle's
    // algorithm each waits for the client's delayed ACK, 40 ms a call.
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%peer, "cannot set TCP_NODELAY: {error}");
    }
    let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
        let mut service = service.clone();
        let token = token.clone();
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
                let mut response = plain(
                    StatusCode::UNAUTHORIZED,
                    "Unauthorized: a bearer token is required",
                );
                response.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static("Bearer realm=\"toolwright\""),
                );
                return Ok(response);
            }
            let response = tower_service::Service::call(&mut service, request).await;
            Ok(response.unwrap_or_else(|never| match never {}))
        }
    });
    let connection =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), handler);
    tokio::pin!(connection);
    tokio::select! {
        outcome = connection.as_mut() => {
            if let Err(error) = outcome {
                tracing::debug!(%peer, "connection ended: {error}");
            }
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
