//! The client side: MCP servers whose tools Toolwright offers, with pi 1.6.0's configuration, names, texts and
//! rules, every stdio server confined by the host's process sandbox.
//!
//! - [`config`]: the `mcpServers` files, read and checked with pi's rules and texts ([`config::McpConfig`]).
//! - [`naming`]: `mcp__<server>__<tool>` and the servers' namespaces.
//! - [`prompt`]: the system prompt's `mcp_servers` section.
//! - [`values`]: `${VAR}` in `env` and `headers` values.
//! - [`sandbox`]: a stdio server's sandbox from its `[mcp.NAME]` grant, and its start.
//! - `raw`: the server's own JSON of each result, kept by the transport (rmcp's typed model drops and re-orders).
//! - [`connection`]: one live connection with rmcp's client (stdio or streamable HTTP): pi's `initialize`,
//!   timeouts re-armed by progress, cancellation, error texts.
//! - [`convert`]: results as the model sees them (pi's texts, the 20 KiB bound).
//! - [`servers`]: the configured servers ([`servers::McpServers`]), connected in the background, and their tools
//!   (and the resource tools) as tool definitions.

pub mod config;
pub mod connection;
pub mod convert;
pub mod naming;
pub mod prompt;
mod raw;
pub mod sandbox;
pub mod servers;
pub mod values;
