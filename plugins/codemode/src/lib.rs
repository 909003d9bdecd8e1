//! # toolwright-tool-codemode
//!
//! pi 1.6.0's `codemode` tool (spec §11) for Toolwright: the model writes JavaScript that calls other tools, and
//! the script runs in the Boa engine inside a wasm sandbox, where its only way out is a nested tool call the
//! host runs through the full pipeline (validation, hooks, permissions). Only the script's output reaches the
//! model; the nested calls go to the script, to `nestedCalls` and to the UI.
//!
//! - [`source`]: the optional `// @options:` first line (`max_output_tokens`, `timeout_ms`), pi's errors.
//! - [`output`]: the result format: text items, the console block, the error and call summary, the budget.
//! - `engine` (wasm only): the Boa context, the prelude (`src/prelude.js`) and the call loop: the calls a
//!   script waits on go to the host together (`call-tools`), so `Promise.all` runs them concurrently.
//! - [`Codemode`]: the tool: its declaration, its loadout hook (other tools' descriptions say how scripts call
//!   them; codemode's lists the `codemode`-exposure tools), and `execute`.
//!
//! Natively the crate gives the host the declaration, the loadout hook and the formatting; scripts run only in
//! the component (`execute` outside wasm says so).
//!
//! ```
//! use toolwright_sdk::Tool;
//! let spec = toolwright_tool_codemode::Codemode.spec();
//! assert_eq!(spec.name, "codemode");
//! assert_eq!(spec.default_active, Some(false));
//! ```

#[cfg(target_arch = "wasm32")]
mod engine;
pub mod output;
pub mod source;

use serde_json::{Value, json};
use toolwright_sdk::{
    Ctx, Exposure, Loadout, LoadoutChanges, LoadoutHook, LoadoutTool, Tool, ToolError, ToolResult, ToolSpec,
};

/// The tool's name.
pub const CODEMODE_TOOL_NAME: &str = "codemode";

/// The error of a script that waits on nothing that can settle (pi's text).
pub const STALLED: &str = "Error: The script is waiting on a promise that can never settle: no tool call is \
                           pending, and timers do not exist here.";

const DESCRIPTION_INTRO: &str = "Run JavaScript that calls other tools. The input is raw JavaScript (not JSON, no code fence), run as an async function body in a Boa sandbox: top-level `await` and `return` work. No Node, file system, network, or timers.
- `await tools.<name>({ ...args })` resolves to a string, or an object if the tool's declaration says so, and rejects with an Error on failure. A tool whose declaration returns an object resolves on failure too when it returned that object; check its fields. Calls still running when the script ends are cancelled.
- Optional first line: `// @options: {\"max_output_tokens\": 10000, \"timeout_ms\": 60000}`";

const GLOBALS: &str = "Globals:
- `text(value)`, `console.log(...)`, and top-level `return` add output; `exit()` ends the script. With several text items, each starts with a `==> text N/M <==` line, and `console` lines follow the other output in one `<console_output>` block.
- `ALL_TOOLS` lists every tool a script can call, with its declaration.";

/// pi's `toCodemodeIdentifier`: characters not valid in a JavaScript identifier at their position become `_`.
pub fn identifier(name: &str) -> String {
    let mut id = String::new();
    for c in name.chars() {
        let valid = c.is_ascii_alphabetic() || c == '_' || c == '$' || (!id.is_empty() && c.is_ascii_digit());
        id.push(if valid { c } else { '_' });
    }
    if id.is_empty() { "_".into() } else { id }
}

/// A one-line TypeScript type for a JSON Schema (properties sorted, optional ones marked).
fn schema_type(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let types: Vec<String> = values.iter().map(Value::to_string).collect();
        return if types.is_empty() {
            "never".into()
        } else {
            types.join(" | ")
        };
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let types: Vec<String> = options.iter().map(schema_type).collect();
            return types.join(" | ");
        }
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => "string".into(),
        Some("number" | "integer") => "number".into(),
        Some("boolean") => "boolean".into(),
        Some("null") => "null".into(),
        Some("array") => match schema.get("items") {
            Some(items) => format!("Array<{}>", schema_type(items)),
            None => "unknown[]".into(),
        },
        Some("object") | None if schema.get("properties").is_some() => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut fields: Vec<(&String, &Value)> = schema["properties"]
                .as_object()
                .map(|p| p.iter().collect())
                .unwrap_or_default();
            fields.sort_by(|a, b| a.0.cmp(b.0));
            if fields.is_empty() {
                return "{}".into();
            }
            let body: Vec<String> = fields
                .iter()
                .map(|(name, field)| {
                    let key = if identifier(name) == **name {
                        (*name).clone()
                    } else {
                        Value::from(name.as_str()).to_string()
                    };
                    let optional = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{key}{optional}: {};", schema_type(field))
                })
                .collect();
            format!("{{ {} }}", body.join(" "))
        }
        Some("object") => "Record<string, unknown>".into(),
        _ => "unknown".into(),
    }
}

/// What a script sees of a tool (pi's `toCodemodeDeclaration` + `renderToolSample`): its description, its
/// guidelines as bullets, and a TypeScript declaration of the call.
pub fn sample(tool: &LoadoutTool) -> String {
    let mut description = tool.description.trim().to_owned();
    let bullets: Vec<String> = tool
        .prompt_guidelines
        .iter()
        .filter(|g| !g.trim().is_empty())
        .map(|g| format!("- {}", g.trim()))
        .collect();
    if !bullets.is_empty() {
        description = format!("{description}\n\n{}", bullets.join("\n"));
    }
    let input = tool.parameters.as_ref().map_or("unknown".into(), schema_type);
    let output = tool.output_schema.as_ref().map_or("string".into(), schema_type);
    format!(
        "{description}\n\ncodemode tool declaration:\n```ts\ndeclare const tools: {{ {}(args: {input}): Promise<{output}>; }};\n```",
        identifier(&tool.name)
    )
}

/// What a call resolves to, for the descriptions of declared tools (pi's `describeOutput`).
fn describe_output(tool: &LoadoutTool) -> String {
    let Some(schema) = &tool.output_schema else {
        return "a string".into();
    };
    match schema.get("properties").and_then(Value::as_object) {
        Some(properties) if schema.get("type").and_then(Value::as_str) == Some("object") => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let fields: Vec<String> = properties
                .keys()
                .map(|k| {
                    if required.contains(&k.as_str()) {
                        k.clone()
                    } else {
                        format!("{k}?")
                    }
                })
                .collect();
            format!("`{{ {} }}`", fields.join(", "))
        }
        _ => format!("`{}`", schema_type(schema)),
    }
}

/// Codemode's description: the intro, the globals and the catalog of `tools` (pi's `createCodemodeDescription`
/// without an inline budget): tools without a namespace first, then namespaces by name.
pub fn description(tools: &[&LoadoutTool]) -> String {
    let mut sections = vec![DESCRIPTION_INTRO.to_owned(), GLOBALS.to_owned()];
    if tools.is_empty() {
        return sections.join("\n\n");
    }
    let mut groups: Vec<(Option<&toolwright_sdk::ToolNamespace>, Vec<&LoadoutTool>)> =
        vec![(None, Vec::new())];
    for tool in tools {
        match &tool.namespace {
            None => groups[0].1.push(tool),
            Some(ns) => match groups
                .iter_mut()
                .find(|(g, _)| g.is_some_and(|g| g.name == ns.name))
            {
                Some(group) => group.1.push(tool),
                None => groups.push((Some(ns), vec![tool])),
            },
        }
    }
    groups[1..].sort_by(|a, b| a.0.map(|n| &n.name).cmp(&b.0.map(|n| &n.name)));
    let mut catalog = vec!["Nested tools:".to_owned()];
    for (namespace, entries) in groups {
        if let Some(ns) = namespace {
            let description = ns.description.as_deref().map(str::trim).filter(|d| !d.is_empty());
            catalog.push(match description {
                Some(d) => format!("## {}\n{d}", ns.name),
                None => format!("## {}", ns.name),
            });
        }
        for tool in entries {
            let id = identifier(&tool.name);
            let heading = if id == tool.name {
                format!("### `{id}`")
            } else {
                format!("### `{id}` (`{}`)", tool.name)
            };
            catalog.push(format!("{heading}\n{}", sample(tool).trim()));
        }
    }
    sections.push(catalog.join("\n\n"));
    sections.join("\n\n")
}

/// A tool a script can call.
#[derive(Debug, Clone)]
pub struct NestedTool {
    /// Its raw name.
    pub name: String,
    /// Its identifier in `tools`.
    pub id: String,
    /// Its sample declaration (`ALL_TOOLS`).
    pub sample: String,
    /// Whether it declares an output schema (its calls then resolve to `structuredContent`).
    pub has_output_schema: bool,
}

/// The `codemode` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Codemode;

impl Tool for Codemode {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: CODEMODE_TOOL_NAME.into(),
            label: CODEMODE_TOOL_NAME.into(),
            description: description(&[]),
            parameters: json!({
                "type": "object",
                "properties": {"code": {"type": "string", "description": "Raw JavaScript source."}},
                "required": ["code"]
            }),
            prompt_snippet: Some("Run JavaScript that calls other tools".into()),
            prompt_guidelines: vec![
                "Use codemode to batch independent tool calls (Promise.allSettled), chain them, or filter large output, instead of many separate calls.".into(),
            ],
            exposure: Exposure::ModelOnly,
            default_active: Some(false),
            ..Default::default()
        }
    }

    fn loadout_hook(&self) -> Option<&dyn LoadoutHook> {
        Some(self)
    }

    fn execute(&self, call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        let input = args["code"].as_str().unwrap_or_default();
        let script = source::parse(input).map_err(ToolError::new)?;
        run(call_id, &script, ctx)
    }
}

impl LoadoutHook for Codemode {
    /// pi's mode `on`: every declared, callable tool says how scripts call it; codemode lists the callable tools
    /// that are neither `direct` (declared already) nor `deferred` (found by search).
    fn prepare_loadout(&self, loadout: &Loadout) -> Result<Option<LoadoutChanges>, ToolError> {
        let callable: Vec<&LoadoutTool> = loadout
            .callable
            .iter()
            .filter(|t| t.name != CODEMODE_TOOL_NAME)
            .collect();
        let mut changes = LoadoutChanges::default();
        for tool in &loadout.declared {
            if let Some(c) = callable.iter().find(|c| c.name == tool.name) {
                changes.descriptions.insert(
                    tool.name.clone(),
                    format!(
                        "{}\n\nCodemode: `tools.{}(args)` resolves to {}.",
                        tool.description.trim(),
                        identifier(&tool.name),
                        describe_output(c)
                    ),
                );
            }
        }
        let listed: Vec<&LoadoutTool> = callable
            .iter()
            .copied()
            .filter(|t| !matches!(t.exposure, Exposure::Direct | Exposure::Deferred))
            .collect();
        changes
            .descriptions
            .insert(CODEMODE_TOOL_NAME.into(), description(&listed));
        Ok(Some(changes))
    }
}

/// The tools a script can call: the callable tools except codemode.
pub fn nested_tools(callable: &[LoadoutTool]) -> Vec<NestedTool> {
    callable
        .iter()
        .filter(|t| t.name != CODEMODE_TOOL_NAME)
        .map(|t| NestedTool {
            name: t.name.clone(),
            id: identifier(&t.name),
            sample: sample(t),
            has_output_schema: t.output_schema.is_some(),
        })
        .collect()
}

#[cfg(target_arch = "wasm32")]
fn run(call_id: &str, script: &source::Script, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
    let started = std::time::Instant::now();
    let tools = nested_tools(&ctx.tools());
    let run = engine::run(call_id, script, &tools, ctx);
    let spill = |text: &str| -> Result<String, String> {
        let mut file = ctx
            .temp_file("toolwright-codemode", ".txt")
            .map_err(|e| e.to_string())?;
        file.writer
            .write_all(text.as_bytes())
            .map_err(|e| e.to_string())?;
        Ok(file.path)
    };
    Ok(output::result(
        run.output,
        run.ending,
        run.calls,
        started.elapsed().as_secs_f64(),
        script.options.max_output_tokens,
        spill,
    ))
}

#[cfg(not(target_arch = "wasm32"))]
fn run(_call_id: &str, _script: &source::Script, _ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
    Err(ToolError::new(
        "codemode scripts run only in the codemode wasm component, not natively",
    ))
}

toolwright_sdk::export_tool!(Codemode);

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, exposure: Exposure) -> LoadoutTool {
        LoadoutTool {
            name: name.into(),
            description: format!("The {name} tool. "),
            exposure,
            parameters: Some(
                json!({"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "number"}}, "required": ["path"]}),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn identifiers_follow_pi() {
        assert_eq!(identifier("mcp__docs__search"), "mcp__docs__search");
        assert_eq!(identifier("my-tool"), "my_tool");
        assert_eq!(identifier("9lives"), "_lives");
        assert_eq!(identifier(""), "_");
    }

    #[test]
    fn the_loadout_describes_script_calls_and_lists_codemode_tools() {
        let read = tool("read", Exposure::Direct);
        let helper = tool("helper", Exposure::Codemode);
        let later = tool("later", Exposure::Deferred);
        let codemode = LoadoutTool {
            name: "codemode".into(),
            exposure: Exposure::ModelOnly,
            ..Default::default()
        };
        let loadout = Loadout {
            declared: vec![read.clone(), codemode.clone()],
            callable: vec![read.clone(), helper.clone(), later.clone()],
            registered: vec![read, codemode, helper, later],
        };
        let changes = Codemode.prepare_loadout(&loadout).unwrap().unwrap();
        assert_eq!(
            changes.descriptions["read"],
            "The read tool.\n\nCodemode: `tools.read(args)` resolves to a string."
        );
        let own = &changes.descriptions["codemode"];
        assert!(own.starts_with("Run JavaScript that calls other tools."));
        assert!(own.ends_with(
            "Nested tools:\n\n### `helper`\nThe helper tool.\n\ncodemode tool declaration:\n```ts\n\
             declare const tools: { helper(args: { limit?: number; path: string; }): Promise<string>; };\n```"
        ));
        assert!(!own.contains("### `later`") && !own.contains("### `read`"));
        assert!(changes.hidden_declarations.is_empty());
    }

    #[test]
    fn outputs_with_schemas_are_described_by_their_fields() {
        let mut bash = tool("bash", Exposure::Direct);
        bash.output_schema = Some(
            json!({"type": "object", "properties": {"output": {}, "exit_code": {}, "full_output_path": {}},
                                         "required": ["output", "exit_code"]}),
        );
        assert_eq!(
            describe_output(&bash),
            "`{ output, exit_code, full_output_path? }`"
        );
    }
}
