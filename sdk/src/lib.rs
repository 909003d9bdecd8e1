//! # toolwright-sdk
//!
//! The types a Toolwright tool is written against, shared by the host and by plugins. They serialise with pi's
//! JSON names (camelCase), so a result a plugin returns is the result the model, the UI and the wire see.
//!
//! - [`Content`]: a text or image block of a tool result.
//! - [`ToolResult`]: what a tool returns (pi's `AgentToolResult`): content for the model, details for the UI,
//!   structured content for programs, usage, and the error and terminate flags.
//! - [`Usage`]: token and cost accounting, with pi's [`Usage::combine`] rule.
//! - [`ExecutionMode`], [`Exposure`], [`ToolAnnotations`], [`ToolNamespace`]: tool metadata.
//! - [`Tool`] and [`ToolSpec`]: what a tool implements, once for both builds; [`ToolError`] is its thrown error.
//! - [`Ctx`]: a tool's only door to files ([`Files`]), processes ([`Process`]), updates, cancellation and logs.
//! - [`js`]: JavaScript number, string and JSON semantics that pi's texts depend on.
//! - [`paths`] and [`truncate`]: pi's path resolution and output truncation, shared by the built-in tools.
//!
//! This crate knows nothing of wasmtime, tokio or the host: it compiles natively and for `wasm32-wasip2`.
//!
//! ```
//! use toolwright_sdk::{Content, ToolResult};
//!
//! let result = ToolResult::text("hello").with_details(serde_json::json!({ "lines": 1 }));
//! assert_eq!(result.content, vec![Content::text("hello")]);
//! assert_eq!(
//!     serde_json::to_string(&result).unwrap(),
//!     r#"{"content":[{"type":"text","text":"hello"}],"details":{"lines":1}}"#
//! );
//! ```

mod content;
mod ctx;
mod error;
pub mod js;
mod metadata;
pub mod paths;
mod result;
mod tool;
pub mod truncate;
mod usage;

pub use content::Content;
pub use ctx::{
    Access, Command, Ctx, ExitStatus, FileKind, Files, LogLevel, Metadata, Process, ProcessEvent, TempFile,
};
pub use error::{ToolError, node_code};
pub use metadata::{ExecutionMode, Exposure, ToolAnnotations, ToolNamespace};
pub use result::ToolResult;
pub use tool::{Tool, ToolSpec};
pub use usage::{Cost, Usage};

/// JSON values, re-exported so plugin crates need no direct `serde_json` dependency for the common cases.
pub use serde_json::{Value, json};
