//! # toolwright-test-conformance
//!
//! The fixture tools that the official MCP conformance suite (`@modelcontextprotocol/conformance`) calls, as a
//! wasm tool plugin: the suite's tool scenarios then exercise the real plugin path (the sandbox, the pipeline,
//! the MCP server), not a mock. `tests/tests/mcp_conformance.rs` runs the suite against
//! `toolwright mcp --http` with this plugin loaded.
//!
//! Only what a Toolwright plugin can do is here: text and image content (pi's content types), errors, progress,
//! logs, JSON Schema 2020-12 parameters, parameters mirrored in HTTP headers (`x-mcp-header`), questions for
//! the client (`ctx.ask`: forms, sampling, roots; `input_required` rounds for a 2026-07-28 client), and the
//! suite's fixture resources, resource template and prompts (`export_offers!`, [`ConformanceOffers`]). The
//! suite's audio and embedded-resource tools are not: their scenarios are expected failures (`tests/mcp/conformance-baseline.yml`, `tests/mcp/conformance-2026-07-28-baseline.yml`,
//! `docs/mcp.md`). `tests/tests/mcp_conformance_2026.rs` runs the prerelease that tests the 2026-07-28 revision.

use serde_json::{Value, json};
use toolwright_sdk::{
    Completing, Content, Ctx, FilledPrompt, InputRequest, LogLevel, OfferError, Offers, Prompt,
    PromptMessage, Resource, ResourceContents, Tool, ToolError, ToolResult, ToolSpec,
};

/// A 1×1 red PNG, as the suite's reference server sends it.
pub const RED_PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A minimal WAV file (a 44-byte header, 8 kHz mono 8-bit, one silent sample), base64-encoded.
pub const SILENT_WAV: &str = "UklGRiUAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQEAAACA";

/// One fixture tool, by name.
#[derive(Debug, Clone, Copy)]
pub struct Fixture {
    /// The tool's name, as the suite calls it.
    pub name: &'static str,
    /// Its description (the suite checks every listed tool has one).
    pub description: &'static str,
}

/// The fixture tools.
pub const FIXTURES: [Fixture; 30] = [
    Fixture {
        name: "test_audio_content",
        description: "Returns a short WAV clip (MCP conformance fixture).",
    },
    Fixture {
        name: "test_embedded_resource",
        description: "Returns an embedded text resource (MCP conformance fixture).",
    },
    Fixture {
        name: "test_multiple_content_types",
        description: "Returns text, an image and an embedded resource (MCP conformance fixture).",
    },
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
    // The prerelease's (2026-07-28) name for a tool that logs: no `notifications/message` may reach a client that
    // set no log level in the request's `_meta`.
    Fixture {
        name: "test_logging_tool",
        description: "Logs three messages while it runs (MCP conformance fixture, 2026-07-28).",
    },
    Fixture {
        name: "test_custom_headers",
        description: "Echoes its arguments; `region` and `priority` are mirrored in Mcp-Param headers (MCP conformance fixture, SEP-2243).",
    },
    // SEP-1699's polling: the call outlasts the server's `--poll-after 3`, so its stream is closed mid-call and the
    // client reconnects with `Last-Event-ID` for the answer.
    Fixture {
        name: "test_reconnection",
        description: "Answers after 3.3 s, so a server run with --poll-after 3 ends its stream mid-call (MCP conformance fixture, SEP-1699).",
    },
    // Not the suite's: Toolwright's own tests of log levels and titles (its label differs from its name).
    Fixture {
        name: "test_log_levels",
        description: "Logs one line at each level: debug, info, warning, error.",
    },
    // A careless plugin's `x-mcp-header` mark (on an array parameter): not listed to 2026-07-28 clients.
    Fixture {
        name: "test_bad_header_mark",
        description: "Marks an array parameter with x-mcp-header, which SEP-2243 forbids.",
    },
    // Questions for the client (SEP-2322's `input_required` for 2026-07-28, requests of the session before).
    Fixture {
        name: "test_input_required_result_elicitation",
        description: "Asks the user's name with a form, then greets them (MCP conformance fixture).",
    },
    Fixture {
        name: "test_input_required_result_sampling",
        description: "Asks the client's model the capital of France (MCP conformance fixture).",
    },
    Fixture {
        name: "test_input_required_result_list_roots",
        description: "Asks the client's roots and names them (MCP conformance fixture).",
    },
    Fixture {
        name: "test_input_required_result_request_state",
        description: "Asks for a confirmation; the answer comes back with the request state (MCP conformance fixture).",
    },
    Fixture {
        name: "test_input_required_result_multiple_inputs",
        description: "Asks a form, the client's model and its roots at once (MCP conformance fixture).",
    },
    Fixture {
        name: "test_input_required_result_multi_round",
        description: "Asks a name, then a favourite colour, in two rounds (MCP conformance fixture).",
    },
    Fixture {
        name: "test_input_required_result_tampered_state",
        description: "Asks a question whose request state is sealed (MCP conformance fixture).",
    },
    Fixture {
        name: "test_input_required_result_capabilities",
        description: "Asks with a form when the client answers forms, else asks its model (MCP conformance fixture).",
    },
    Fixture {
        name: "test_missing_capability",
        description: "Asks the client's model: a client without sampling cannot call it (MCP conformance fixture).",
    },
    Fixture {
        name: "test_streaming_elicitation",
        description: "Asks the user with a form while it runs (MCP conformance fixture).",
    },
    // The 2025-11-25 suite's (0.1.16): the session's client is asked while the call waits.
    Fixture {
        name: "test_sampling",
        description: "Asks the client's model to answer `prompt` (MCP conformance fixture).",
    },
    Fixture {
        name: "test_elicitation",
        description: "Asks the user for a username and an email, showing `message` (MCP conformance fixture).",
    },
    Fixture {
        name: "test_elicitation_sep1034_defaults",
        description: "Asks with a form whose fields have default values (MCP conformance fixture, SEP-1034).",
    },
    Fixture {
        name: "test_elicitation_sep1330_enums",
        description: "Asks with a form of every kind of enum field (MCP conformance fixture, SEP-1330).",
    },
    // The tasks extension's (2026-07-28): questions asked from a task (`input_required`, `tasks/update`).
    Fixture {
        name: "confirm_delete",
        description: "Asks the user to confirm deleting `filename` (MCP conformance fixture, tasks).",
    },
    Fixture {
        name: "multi_input",
        description: "Asks two questions at once (MCP conformance fixture, tasks).",
    },
];

/// A form with one required property `name` of `kind` (`string`, `boolean`).
fn form(key: &str, message: &str, name: &str, kind: &str) -> InputRequest {
    InputRequest::form(
        key,
        message,
        json!({"type": "object", "properties": {name: {"type": kind}}, "required": [name]}),
    )
}

/// A question for the client's model.
fn sample(key: &str, text: &str, max_tokens: u32) -> InputRequest {
    InputRequest::sample(
        key,
        json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens,
        }),
    )
}

/// Ask `questions`; the answers, or the reason as a thrown error.
fn ask(ctx: &dyn Ctx, questions: &[InputRequest]) -> Result<Vec<Value>, ToolError> {
    ctx.ask(questions).map_err(ToolError::new)
}

/// The field `name` of an accepted form, as text; what the user did instead otherwise.
fn field(answer: &Value, name: &str) -> String {
    match answer["action"].as_str() {
        Some("accept") => match &answer["content"][name] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        },
        Some(other) => format!("({other})"),
        None => "(no answer)".into(),
    }
}

/// The text of a sampling result.
fn sampled(answer: &Value) -> String {
    answer["content"]["text"]
        .as_str()
        .unwrap_or("(no text)")
        .to_owned()
}

/// The roots of a `roots/list` result, as `uri (name)` separated by commas.
fn roots(answer: &Value) -> String {
    let roots = answer["roots"].as_array().cloned().unwrap_or_default();
    roots
        .iter()
        .map(|r| {
            format!(
                "{} ({})",
                r["uri"].as_str().unwrap_or("?"),
                r["name"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The parameters of a fixture: `json_schema_2020_12_tool`'s exercise JSON Schema 2020-12 as the suite's prerelease
/// checks it (SEP-1613: `$schema`, `$defs`, `$ref`, `additionalProperties: false`; SEP-2106: `$anchor`,
/// `allOf`/`anyOf`, `if`/`then`/`else`); `test_custom_headers`' mark two parameters with `x-mcp-header` (SEP-2243:
/// a 2026-07-28 client mirrors them in `Mcp-Param-Region` and `Mcp-Param-Priority`, and the server checks that the
/// headers match the body); the others take none.
fn parameters(name: &str) -> Value {
    match name {
        "test_custom_headers" => json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "priority": {"type": "integer", "x-mcp-header": "Priority"},
                "query": {"type": "string"}
            },
            "required": ["region", "query"]
        }),
        "test_bad_header_mark" => json!({
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"}, "x-mcp-header": "Tags"}}
        }),
        "json_schema_2020_12_tool" => json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                }
            },
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"}
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false
        }),
        "test_sampling" => json!({
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "What to ask the model"}},
            "required": ["prompt"],
        }),
        "confirm_delete" => json!({
            "type": "object",
            "properties": {"filename": {"type": "string", "description": "The file to delete"}},
            "required": ["filename"],
        }),
        "test_elicitation" => json!({
            "type": "object",
            "properties": {"message": {"type": "string", "description": "What the user is shown"}},
            "required": ["message"],
        }),
        _ => json!({"type": "object", "properties": {}}),
    }
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

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        Ok(match self.name {
            "test_simple_text" => ToolResult::text("This is a simple text response for testing."),
            "test_reconnection" => {
                std::thread::sleep(std::time::Duration::from_millis(3300));
                ToolResult::text("Reconnection test completed")
            }
            "test_image_content" => ToolResult {
                content: vec![Content::image(RED_PIXEL_PNG, "image/png")],
                ..Default::default()
            },
            "test_audio_content" => ToolResult {
                content: vec![Content::audio(SILENT_WAV, "audio/wav")],
                ..Default::default()
            },
            "test_embedded_resource" => ToolResult {
                content: vec![Content::resource_text(
                    "test://embedded-resource",
                    Some("text/plain".into()),
                    "This is an embedded resource content.",
                )],
                ..Default::default()
            },
            "test_multiple_content_types" => ToolResult {
                content: vec![
                    Content::text("Multiple content types test:"),
                    Content::image(RED_PIXEL_PNG, "image/png"),
                    Content::resource_text(
                        "test://mixed-content-resource",
                        Some("application/json".into()),
                        r#"{"test":"data","value":123}"#,
                    ),
                ],
                ..Default::default()
            },
            "json_schema_2020_12_tool" => ToolResult::text("Accepted."),
            "test_custom_headers" | "test_bad_header_mark" => ToolResult::text(format!("arguments: {args}")),
            "test_tool_with_logging" | "test_logging_tool" => {
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
            "test_input_required_result_elicitation" | "test_streaming_elicitation" => {
                let answers = ask(ctx, &[form("user_name", "What is your name?", "name", "string")])?;
                ToolResult::text(format!("Hello, {}!", field(&answers[0], "name")))
            }
            "test_input_required_result_sampling" | "test_missing_capability" => {
                let answers = ask(
                    ctx,
                    &[sample("capital_question", "What is the capital of France?", 100)],
                )?;
                ToolResult::text(sampled(&answers[0]))
            }
            "test_input_required_result_list_roots" => {
                let answers = ask(ctx, &[InputRequest::roots("client_roots")])?;
                ToolResult::text(format!("The client's roots: {}", roots(&answers[0])))
            }
            // The answer reaches the tool only through a request state the host sealed and opened again (or with
            // no state at all): "state-ok" is the suite's word for it.
            "test_input_required_result_request_state" => {
                let answers = ask(ctx, &[form("confirm", "Please confirm", "ok", "boolean")])?;
                ToolResult::text(format!("state-ok: confirmed {}", field(&answers[0], "ok")))
            }
            "test_input_required_result_multiple_inputs" => {
                let answers = ask(
                    ctx,
                    &[
                        form("user_name", "What is your name?", "name", "string"),
                        sample("greeting", "Generate a greeting", 50),
                        InputRequest::roots("client_roots"),
                    ],
                )?;
                ToolResult::text(format!(
                    "{} {}; roots: {}",
                    sampled(&answers[1]),
                    field(&answers[0], "name"),
                    roots(&answers[2])
                ))
            }
            "test_input_required_result_multi_round" => {
                let name = ask(
                    ctx,
                    &[form("step1", "Step 1: What is your name?", "name", "string")],
                )?;
                let color = ask(
                    ctx,
                    &[form(
                        "step2",
                        "Step 2: What is your favorite color?",
                        "color",
                        "string",
                    )],
                )?;
                ToolResult::text(format!(
                    "{}'s favourite colour is {}",
                    field(&name[0], "name"),
                    field(&color[0], "color")
                ))
            }
            // Only what the client declared: a form, else its model.
            "test_input_required_result_capabilities" => {
                let can = ctx.client_answers();
                if can.iter().any(|m| m == "elicitation/create") {
                    let answers = ask(ctx, &[form("user_name", "What is your name?", "name", "string")])?;
                    ToolResult::text(format!("Hello, {}!", field(&answers[0], "name")))
                } else if can.iter().any(|m| m == "sampling/createMessage") {
                    let answers = ask(ctx, &[sample("user_name", "Make up a name.", 20)])?;
                    ToolResult::text(format!("Hello, {}!", sampled(&answers[0])))
                } else {
                    return Err(ToolError::new("the client answers neither forms nor sampling"));
                }
            }
            "test_sampling" => {
                let prompt = args["prompt"].as_str().unwrap_or_default();
                let answers = ask(ctx, &[sample("answer", prompt, 100)])?;
                ToolResult::text(format!("LLM response: {}", sampled(&answers[0])))
            }
            "test_elicitation" => {
                let message = args["message"].as_str().unwrap_or_default();
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "username": {"type": "string", "description": "User's response"},
                        "email": {"type": "string", "description": "User's email address"},
                    },
                    "required": ["username", "email"],
                });
                let answers = ask(ctx, &[InputRequest::form("user", message, schema)])?;
                ToolResult::text(format!("User response: {}", answers[0]))
            }
            "test_elicitation_sep1034_defaults" => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "default": "John Doe"},
                        "age": {"type": "integer", "default": 30},
                        "score": {"type": "number", "default": 95.5},
                        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                        "verified": {"type": "boolean", "default": true},
                    },
                });
                let answers = ask(
                    ctx,
                    &[InputRequest::form("profile", "Check your profile", schema)],
                )?;
                ToolResult::text(format!("Elicitation completed: {}", answers[0]))
            }
            "test_elicitation_sep1330_enums" => {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                        "titledSingle": {"type": "string", "oneOf": [
                            {"const": "value1", "title": "First Option"},
                            {"const": "value2", "title": "Second Option"},
                            {"const": "value3", "title": "Third Option"},
                        ]},
                        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"]},
                        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                        "titledMulti": {"type": "array", "items": {"anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]}},
                    },
                });
                let answers = ask(ctx, &[InputRequest::form("choices", "Choose", schema)])?;
                ToolResult::text(format!("Elicitation completed: {}", answers[0]))
            }
            // Nothing is deleted: the fixture only says what it would do.
            "confirm_delete" => {
                let filename = args["filename"].as_str().unwrap_or_default();
                let message = format!("Delete {filename}?");
                let answers = ask(ctx, &[form("confirm", &message, "confirm", "boolean")])?;
                let confirmed = field(&answers[0], "confirm") == "true";
                ToolResult::text(format!(
                    "{} {filename}",
                    if confirmed { "Deleted" } else { "Kept" }
                ))
            }
            "multi_input" => {
                let answers = ask(
                    ctx,
                    &[
                        form("first", "First name?", "name", "string"),
                        form("second", "Second name?", "name", "string"),
                    ],
                )?;
                ToolResult::text(format!(
                    "{} and {}",
                    field(&answers[0], "name"),
                    field(&answers[1], "name")
                ))
            }
            "test_input_required_result_tampered_state" => {
                let answers = ask(ctx, &[form("confirm", "Please confirm", "ok", "boolean")])?;
                ToolResult::text(format!("confirmed {}", field(&answers[0], "ok")))
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
    FIXTURES[6],
    FIXTURES[7],
    FIXTURES[8],
    FIXTURES[9],
    FIXTURES[10],
    FIXTURES[11],
    FIXTURES[12],
    FIXTURES[13],
    FIXTURES[14],
    FIXTURES[15],
    FIXTURES[16],
    FIXTURES[17],
    FIXTURES[18],
    FIXTURES[19],
    FIXTURES[20],
    FIXTURES[21],
    FIXTURES[22],
    FIXTURES[23],
    FIXTURES[24],
    FIXTURES[25],
    FIXTURES[26],
    FIXTURES[27],
    FIXTURES[28],
    FIXTURES[29]
);

/// The suite's fixture resources (`test://static-text`, `test://static-binary`, `test://watched-resource`), its
/// template
/// (`test://template/{id}/data`) and its prompts, as a plugin offers them.
pub struct ConformanceOffers;

/// The text of `test://static-text`.
pub const STATIC_TEXT: &str = "This is the content of the static text resource.";

impl Offers for ConformanceOffers {
    fn resources(&self) -> Vec<Resource> {
        vec![
            Resource::new("test://static-text", "static-text")
                .with_description("A static text resource (MCP conformance fixture)")
                .with_mime_type("text/plain"),
            Resource::new("test://static-binary", "static-binary")
                .with_description("A static binary resource: a 1x1 PNG (MCP conformance fixture)")
                .with_mime_type("image/png"),
            Resource::new("test://watched-resource", "watched-resource")
                .with_description("A resource to subscribe to (MCP conformance fixture)")
                .with_mime_type("text/plain"),
            // Not the suite's: a read that asks its reader (SEP-2322's `input_required` for `resources/read`).
            Resource::new("test://asking-resource", "asking-resource")
                .with_description("A resource whose read asks the client which variant to give")
                .with_mime_type("text/plain"),
        ]
    }

    /// `test://asking-resource` asks the client which variant it wants (a form for `variant`); the others are read
    /// at once.
    fn read_asking(
        &self,
        uri: &str,
        client: &dyn toolwright_sdk::OfferClient,
    ) -> Result<Vec<ResourceContents>, OfferError> {
        if uri != "test://asking-resource" {
            return self.read(uri);
        }
        let question = form("variant", "Which variant?", "variant", "string");
        let answers = client.ask(&[question]).map_err(OfferError::Failed)?;
        let variant = field(&answers[0], "variant");
        Ok(vec![
            ResourceContents::text(uri, format!("the {variant} variant")).with_mime_type("text/plain"),
        ])
    }

    fn resource_templates(&self) -> Vec<Resource> {
        vec![
            Resource::new("test://template/{id}/data", "template")
                .with_description("Data for an ID (MCP conformance fixture)")
                .with_mime_type("application/json"),
        ]
    }

    fn read(&self, uri: &str) -> Result<Vec<ResourceContents>, OfferError> {
        match uri {
            "test://static-text" => Ok(vec![
                ResourceContents::text(uri, STATIC_TEXT).with_mime_type("text/plain"),
            ]),
            "test://watched-resource" => Ok(vec![
                ResourceContents::text(uri, "Watched resource content").with_mime_type("text/plain"),
            ]),
            "test://static-binary" => {
                use base64::Engine as _;
                let png = base64::engine::general_purpose::STANDARD
                    .decode(RED_PIXEL_PNG)
                    .map_err(|e| OfferError::Failed(format!("the fixture PNG: {e}")))?;
                Ok(vec![ResourceContents::blob(uri, png).with_mime_type("image/png")])
            }
            _ => {
                let id = uri
                    .strip_prefix("test://template/")
                    .and_then(|rest| rest.strip_suffix("/data"))
                    .filter(|id| !id.is_empty() && !id.contains('/'))
                    .ok_or(OfferError::NotFound)?;
                let data = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                Ok(vec![
                    ResourceContents::text(uri, data.to_string()).with_mime_type("application/json"),
                ])
            }
        }
    }

    fn prompts(&self) -> Vec<Prompt> {
        vec![
            Prompt::new("test_simple_prompt").with_description("A simple prompt without arguments"),
            Prompt::new("test_prompt_with_arguments")
                .with_description("A prompt with arguments")
                .with_argument("arg1", "First test argument", true)
                .with_argument("arg2", "Second test argument", true),
            Prompt::new("test_prompt_with_embedded_resource")
                .with_description("A prompt with an embedded resource")
                .with_argument("resourceUri", "URI of the resource to embed", true),
            Prompt::new("test_prompt_with_image").with_description("A prompt with an image"),
            Prompt::new("test_input_required_result_prompt")
                .with_description("A prompt that asks the client for its context (MCP conformance fixture)"),
        ]
    }

    /// `test_input_required_result_prompt` asks the client (a form for `user_context`); the others are filled in
    /// at once.
    fn prompt_asking(
        &self,
        name: &str,
        arguments: &[(String, String)],
        client: &dyn toolwright_sdk::OfferClient,
    ) -> Result<FilledPrompt, OfferError> {
        if name != "test_input_required_result_prompt" {
            return self.prompt(name, arguments);
        }
        let question = form(
            "user_context",
            "What context should the prompt use?",
            "context",
            "string",
        );
        let answers = client.ask(&[question]).map_err(OfferError::Failed)?;
        let context = field(&answers[0], "context");
        Ok(FilledPrompt::new(vec![PromptMessage::user_text(format!(
            "Use this context: {context}"
        ))]))
    }

    fn prompt(&self, name: &str, arguments: &[(String, String)]) -> Result<FilledPrompt, OfferError> {
        let arg = |key: &str| {
            arguments
                .iter()
                .find(|(k, _)| k == key)
                .map_or(String::new(), |(_, v)| v.clone())
        };
        let messages = match name {
            "test_simple_prompt" => vec![PromptMessage::user_text("This is a simple prompt for testing.")],
            "test_prompt_with_arguments" => vec![PromptMessage::user_text(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            ))],
            "test_prompt_with_embedded_resource" => vec![
                PromptMessage::user(json!({
                    "type": "resource",
                    "resource": {
                        "uri": arg("resourceUri"),
                        "mimeType": "text/plain",
                        "text": "Embedded resource content for testing.",
                    },
                })),
                PromptMessage::user_text("Please process the embedded resource above."),
            ],
            "test_prompt_with_image" => vec![
                PromptMessage::user(json!({"type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png"})),
                PromptMessage::user_text("Please analyze the image above."),
            ],
            _ => return Err(OfferError::NotFound),
        };
        Ok(FilledPrompt::new(messages))
    }

    fn complete(&self, completing: Completing, name: &str, argument: &str, value: &str) -> Vec<String> {
        let candidates: &[&str] = match (completing, name, argument) {
            (Completing::Prompt, "test_prompt_with_arguments", "arg1" | "arg2") => {
                &["paris", "park", "party", "test"]
            }
            _ => &[],
        };
        candidates
            .iter()
            .filter(|c| c.starts_with(value))
            .map(|c| (*c).to_owned())
            .collect()
    }
}

toolwright_sdk::export_offers!(ConformanceOffers);
