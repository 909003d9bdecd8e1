//! # toolwright-test-conformance
//!
//! The fixture tools that the official MCP conformance suite (`@modelcontextprotocol/conformance`) calls, as a
//! wasm tool plugin: the suite's tool scenarios then exercise the real plugin path (the sandbox, the pipeline,
//! the MCP server), not a mock. `tests/tests/mcp_conformance.rs` runs the suite against
//! `toolwright mcp --http` with this plugin loaded.
//!
//! Only what a Toolwright plugin can return is here: text and image content (pi's content types), errors,
//! progress and logs. The suite's audio, embedded-resource, sampling and elicitation tools are not: their
//! scenarios are expected failures (`tests/mcp/conformance-baseline.yml`, `docs/mcp.md`).

use serde_json::{Value, json};
use toolwright_sdk::{Content, Ctx, LogLevel, Tool, ToolError, ToolResult, ToolSpec};

/// A 1×1 red PNG, as the suite's reference server sends it.
pub const RED_PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// One fixture tool, by name.
#[derive(Debug, Clone, Copy)]
pub struct Fixture {
    /// The tool's name, as the suite calls it.
    pub name: &'static str,
    /// Its description (the suite checks every listed tool has one).
    pub description: &'static str,
}

/// The fixture tools.
pub const FIXTURES: [Fixture; 7] = [
    Fixture {
        name: "test_simple_text",
        description: "Returns a simple text response (MCP conformance fixture).",
    },
    Fixture {
        name: "test_image_content",
        description: "Returns a 1x1 PNG image (MCP conformance fixture).",
    },
    Fixture {
        name: "test_tool_with_logging",
        description: "Logs three messages while it runs (MCP conformance fixture).",
    },
    Fixture {
        name: "test_tool_with_progress",
        description: "Reports progress 0, 50 and 100 of 100 while it runs (MCP conformance fixture).",
    },
    Fixture {
        name: "test_error_handling",
        description: "Always returns an error result (MCP conformance fixture).",
    },
    Fixture {
        name: "json_schema_2020_12_tool",
        description: "Declares a JSON Schema 2020-12 input schema with $defs and $ref (MCP conformance fixture).",
    },
    // Not the suite's: Toolwright's own tests of log levels and titles (its label differs from its name).
    Fixture {
        name: "test_log_levels",
        description: "Logs one line at each level: debug, info, warning, error.",
    },
];

/// The parameters of a fixture: `json_schema_2020_12_tool`'s exercise JSON Schema 2020-12 as the suite checks it
/// (`$schema`, `$defs`, `$ref`, `additionalProperties: false`); the others take none.
fn parameters(name: &str) -> Value {
    if name != "json_schema_2020_12_tool" {
        return json!({"type": "object", "properties": {}});
    }
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
            }
        },
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": false
    })
}

impl Tool for Fixture {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.into(),
            label: if self.name == "test_log_levels" {
                "Log at every level".into()
            } else {
                self.name.into()
            },
            description: self.description.into(),
            parameters: parameters(self.name),
            annotations: Some(toolwright_sdk::ToolAnnotations::hints(true, false, true, false)),
            ..Default::default()
        }
    }

    fn execute(&self, _call_id: &str, _args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        Ok(match self.name {
            "test_simple_text" => ToolResult::text("This is a simple text response for testing."),
            "test_image_content" => ToolResult {
                content: vec![Content::image(RED_PIXEL_PNG, "image/png")],
                ..Default::default()
            },
            "json_schema_2020_12_tool" => ToolResult::text("Accepted."),
            "test_tool_with_logging" => {
                for message in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ] {
                    ctx.log(LogLevel::Info, message);
                }
                ToolResult::text("Tool with logging executed successfully")
            }
            "test_tool_with_progress" => {
                for progress in [0, 50, 100] {
                    ctx.update(
                        ToolResult::text(format!("{progress}%"))
                            .with_details(json!({"progress": progress, "total": 100})),
                    );
                }
                ToolResult::text("Progress reported: 0, 50, 100 of 100")
            }
            "test_log_levels" => {
                for (level, line) in [
                    (LogLevel::Debug, "a debug line"),
                    (LogLevel::Info, "an info line"),
                    (LogLevel::Warn, "a warning line"),
                    (LogLevel::Error, "an error line"),
                ] {
                    ctx.log(level, line);
                }
                ToolResult::text("logged at every level")
            }
            // Thrown, as the suite's reference server does: an `isError` result, not a protocol error.
            "test_error_handling" => {
                return Err(ToolError::new(
                    "This tool intentionally returns an error for testing",
                ));
            }
            other => return Err(ToolError::new(format!("no fixture named {other}"))),
        })
    }
}

toolwright_sdk::export_tool!(
    FIXTURES[0],
    FIXTURES[1],
    FIXTURES[2],
    FIXTURES[3],
    FIXTURES[4],
    FIXTURES[5],
    FIXTURES[6]
);
