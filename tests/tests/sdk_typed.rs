//! A Rust tool as the SDK's typed helpers make it: parameters from `toolwright_sdk::schema::<Args>()` (schemars),
//! arguments read with `toolwright_sdk::args::<Args>()`, and an arguments shim whose flag the SDK sets itself
//! (`ArgumentsShim`): run through a `Session`'s pipeline, so validation uses the derived schema.
#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failure with a message.

use serde_json::{Value, json};
use toolwright::Session;
use toolwright_sdk::{ArgumentsShim, Ctx, Tool, ToolError, ToolResult, ToolSpec};

/// The arguments of `greet`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    /// Who to greet
    name: String,
    /// How many times (default 1)
    times: Option<u8>,
}

struct Greet;

impl Tool for Greet {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "greet".into(),
            label: "greet".into(),
            description: "Greet someone.".into(),
            parameters: toolwright_sdk::schema::<Args>(),
            ..Default::default()
        }
    }

    fn arguments_shim(&self) -> Option<&dyn ArgumentsShim> {
        Some(self)
    }

    fn execute(&self, _call_id: &str, args: Value, _ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        let Args { name, times } = toolwright_sdk::args(args)?;
        let greeting = vec![format!("hi {name}"); usize::from(times.unwrap_or(1))];
        Ok(ToolResult::text(greeting.join(" ")))
    }
}

impl ArgumentsShim for Greet {
    /// The old shape, `{"who": …}`.
    fn prepare_arguments(&self, args: &Value) -> Result<Option<Value>, ToolError> {
        Ok(args.get("who").map(|who| json!({ "name": who })))
    }
}

#[tokio::test]
async fn a_typed_tool_validates_against_its_derived_schema_and_upgrades_old_arguments() {
    let spec = toolwright_sdk::declaration(&Greet);
    assert!(spec.prepares_arguments && !spec.mutates_files && !spec.prepares_loadout);
    assert_eq!(
        spec.parameters["properties"]["name"],
        json!({"type": "string", "description": "Who to greet"})
    );
    assert_eq!(spec.parameters["required"], json!(["name"]));

    let workspace = tempfile::tempdir().unwrap();
    let mut builder = Session::builder(workspace.path());
    for definition in toolwright_tests::programs::native(vec![Greet], workspace.path()) {
        builder = builder.tool(definition);
    }
    let session = builder.build().unwrap();
    let text = |outcome: toolwright::Dispatched| {
        let text = outcome.result.content[0].as_text().unwrap_or_default().to_owned();
        (outcome.is_error(), text)
    };
    assert_eq!(
        text(session.call("greet", json!({"name": "ana", "times": 2})).await),
        (false, "hi ana hi ana".into())
    );
    // The shim runs before validation.
    assert_eq!(
        text(session.call("greet", json!({"who": "bo"})).await),
        (false, "hi bo".into())
    );
    // The derived schema is what the pipeline validates against: the model gets pi's validation error (pi
    // coerces scalars, so `"name": 3` would pass as "3"; a missing name does not).
    let (is_error, message) = text(session.call("greet", json!({"times": 2})).await);
    assert!(is_error);
    assert!(
        message.starts_with("Validation failed for tool \"greet\""),
        "{message}"
    );
    // schemars bounds a u8: 300 is refused before the tool could fail to read it.
    let (is_error, message) = text(session.call("greet", json!({"name": "x", "times": 300})).await);
    assert!(is_error, "{message}");
    assert!(message.contains("times"), "{message}");
}
