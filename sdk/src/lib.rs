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
mod metadata;
mod result;
mod usage;

pub use content::Content;
pub use metadata::{ExecutionMode, Exposure, ToolAnnotations, ToolNamespace};
pub use result::ToolResult;
pub use usage::{Cost, Usage};

/// JSON values, re-exported so plugin crates need no direct `serde_json` dependency for the common cases.
pub use serde_json::{Value, json};
