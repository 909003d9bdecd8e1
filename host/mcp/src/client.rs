//! The client side: MCP servers whose tools Toolwright offers (issue 45), with pi 1.6.0's configuration and names.
//!
//! - [`config`]: the `mcpServers` files, read and checked with pi's rules and texts ([`config::McpConfig`]).
//! - [`naming`]: `mcp__<server>__<tool>` and the servers' namespaces.
//!
//! Connecting (a stdio server started in the host's sandbox, streamable HTTP) and registering the tools come
//! next; nothing here starts a process or opens a connection yet.

pub mod config;
pub mod naming;
