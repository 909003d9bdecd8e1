//! # toolwright-test-loadout
//!
//! A test program for the registry: one tool of each exposure, a tool that starts inactive, and two loadout hooks
//! (one that rewrites descriptions and hides a declaration, one that fails). `tests/oracle/record-registry.mjs`
//! defines the same tools in JavaScript, so pi 1.6.0's sets, prompt and declarations can be compared with
//! Toolwright's for these tools linked natively and loaded as a wasm component.
//!
//! ```
//! use toolwright_sdk::Tool;
//! let names: Vec<String> = toolwright_test_loadout::tools().iter().map(|t| t.spec().name).collect();
//! assert_eq!(names, ["echo", "assist", "run_tools", "weather_lookup", "secret", "later", "broken"]);
//! ```

use serde_json::{Value, json};
use toolwright_sdk::{
    Ctx, Exposure, Loadout, LoadoutChanges, LoadoutHook, Tool, ToolError, ToolNamespace, ToolResult, ToolSpec,
};

/// One tool of the program, described by data.
#[derive(Debug, Clone, Copy)]
pub struct TestTool {
    name: &'static str,
}

/// The program's tools, in registration order.
pub fn tools() -> Vec<TestTool> {
    [
        "echo",
        "assist",
        "run_tools",
        "weather_lookup",
        "secret",
        "later",
        "broken",
    ]
    .into_iter()
    .map(|name| TestTool { name })
    .collect()
}

fn text_schema(property: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {property: {"type": "string", "description": description}},
        "required": [property]
    })
}

impl Tool for TestTool {
    fn spec(&self) -> ToolSpec {
        let base = ToolSpec {
            name: self.name.into(),
            label: self.name.into(),
            parameters: json!({"type": "object", "properties": {}}),
            ..Default::default()
        };
        match self.name {
            "echo" => ToolSpec {
                description: "Echo text back.".into(),
                parameters: text_schema("text", "Text to echo"),
                prompt_snippet: Some("Echo   text\nback".into()),
                prompt_guidelines: vec![
                    "Use echo to repeat text.".into(),
                    "  Use echo to repeat text.  ".into(),
                ],
                ..base
            },
            "assist" => ToolSpec {
                description: "Assist with a task.\nSecond line of the description.".into(),
                parameters: text_schema("task", "The task to assist with"),
                exposure: Exposure::Codemode,
                ..base
            },
            "run_tools" => ToolSpec {
                description: "Run tools.".into(),
                prompt_snippet: Some("Run other tools".into()),
                exposure: Exposure::ModelOnly,
                ..base
            },
            "weather_lookup" => ToolSpec {
                description: "Look up the weather forecast for a city.".into(),
                parameters: text_schema("city", "City name"),
                exposure: Exposure::Deferred,
                namespace: Some(ToolNamespace {
                    name: "weather".into(),
                    description: Some("Weather services".into()),
                    ..Default::default()
                }),
                ..base
            },
            "secret" => ToolSpec {
                description: "Never reachable.".into(),
                exposure: Exposure::Hidden,
                ..base
            },
            "later" => ToolSpec {
                description: "A tool that starts inactive.".into(),
                prompt_snippet: Some("Starts inactive".into()),
                prompt_guidelines: vec!["Use later only when asked.".into()],
                default_active: Some(false),
                ..base
            },
            _ => ToolSpec {
                description: "A tool whose loadout hook fails.".into(),
                ..base
            },
        }
    }

    fn loadout_hook(&self) -> Option<&dyn LoadoutHook> {
        matches!(self.name, "run_tools" | "broken").then_some(self as &dyn LoadoutHook)
    }

    fn execute(&self, _call_id: &str, args: Value, _ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        Ok(ToolResult::text(format!("{} {}", self.name, args)))
    }
}

impl LoadoutHook for TestTool {
    fn prepare_loadout(&self, loadout: &Loadout) -> Result<Option<LoadoutChanges>, ToolError> {
        match self.name {
            "run_tools" => {
                let callable: Vec<&str> = loadout.callable.iter().map(|t| t.name.as_str()).collect();
                let mut changes = LoadoutChanges::default();
                changes
                    .descriptions
                    .insert("run_tools".into(), format!("Runs tools: {}", callable.join(", ")));
                changes
                    .descriptions
                    .insert("echo".into(), "Echo text (also callable from run_tools).".into());
                changes.hidden_declarations.push("echo".into());
                Ok(Some(changes))
            }
            "broken" => Err(ToolError::new("loadout exploded")),
            _ => Ok(None),
        }
    }
}

toolwright_sdk::export_tool!(
    TestTool { name: "echo" },
    TestTool { name: "assist" },
    TestTool { name: "run_tools" },
    TestTool {
        name: "weather_lookup"
    },
    TestTool { name: "secret" },
    TestTool { name: "later" },
    TestTool { name: "broken" }
);
