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
//! let spec = toolwright_tool_codemode::Codemode::default().spec();
//! assert_eq!(spec.name, "codemode");
//! assert_eq!(spec.default_active, Some(false));
//! ```

pub mod declaration;
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

/// The argument through which the host gives a script the session's store (key → JSON text of the value): the
/// host adds it to the arguments after validation, so the model never sees or sets it.
pub const STORE_KEY: &str = "toolwright/store";
/// The `details` key of a successful script's store writes (`[key, json]`, or `[key]` for a deletion), which the
/// host applies to the session's store and takes off the result.
pub const STORE_WRITES_KEY: &str = "toolwright/storeWrites";

/// The error of a script that waits on nothing that can settle (pi's text).
pub const STALLED: &str = "Error: The script is waiting on a promise that can never settle: no tool call is \
                           pending, and timers do not exist here.";

const DESCRIPTION_INTRO: &str = "Run JavaScript that calls other tools. The input is raw JavaScript (not JSON, no code fence), run as an async function body in a Boa sandbox: top-level `await` and `return` work. No Node, file system, network, or timers.
- `await tools.<name>({ ...args })` resolves to a string, or an object if the tool's declaration says so, and rejects with an Error on failure. A tool whose declaration returns an object resolves on failure too when it returned that object; check its fields. Calls still running when the script ends are cancelled.
- Optional first line: `// @options: {\"max_output_tokens\": 10000, \"timeout_ms\": 60000}`";

const GLOBALS: &str = "Globals:
- `text(value)`, `image(dataUrlOrImageBlock)`, `console.log(...)`, and top-level `return` add output; `exit()` ends the script. With several text items, each starts with a `==> text N/M <==` line, and `console` lines follow the other output in one `<console_output>` block. `image()` also saves the image to a temp file and the result names its path.
- `store(key, value)` and `load(key)` keep JSON values across codemode calls.
- `ALL_TOOLS`, `await searchTools(query, { limit?, namespace? })`, `await describeTool(name)`, `await describeNamespace(name)`: find unlisted tools, such as MCP tools.";

/// pi's `toCodemodeIdentifier`: characters not valid in a JavaScript identifier at their position become `_`.
pub fn identifier(name: &str) -> String {
    let mut id = String::new();
    for c in name.chars() {
        let valid = c.is_ascii_alphabetic() || c == '_' || c == '$' || (!id.is_empty() && c.is_ascii_digit());
        id.push(if valid { c } else { '_' });
    }
    if id.is_empty() { "_".into() } else { id }
}

/// What a script sees of a tool (pi's `toCodemodeDeclaration` + `renderToolSample`): its description, its
/// guidelines as bullets, and a TypeScript declaration of the call.
pub fn sample(tool: &LoadoutTool) -> String {
    let bullets: Vec<String> = tool
        .prompt_guidelines
        .iter()
        .filter(|g| !g.trim().is_empty())
        .map(|g| format!("- {}", g.trim()))
        .collect();
    let description = if bullets.is_empty() {
        tool.description.trim().to_owned()
    } else {
        format!("{}\n\n{}", tool.description.trim(), bullets.join("\n"))
    };
    let output = tool
        .output_schema
        .clone()
        .unwrap_or_else(declaration::text_output_schema);
    let signature = declaration::signature(&tool.name, tool.parameters.as_ref(), &output);
    format!(
        "{}\n\ncodemode tool declaration:\n```ts\ndeclare const tools: {{ {signature} }};\n```",
        description.trim()
    )
}

/// What a call resolves to, for the descriptions of declared tools (pi's `describeOutput`).
fn describe_output(tool: &LoadoutTool) -> String {
    let output = tool
        .output_schema
        .clone()
        .unwrap_or_else(declaration::text_output_schema);
    declaration::describe_output(&tool.name, &output)
}

/// Characters per token when costing a catalog section.
const CHARS_PER_TOKEN: usize = 4;

/// How codemode presents the tools scripts can call (pi's `codemode.mode` setting).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// Declared tools say how scripts call them; codemode lists the callable tools that are not `direct`.
    #[default]
    On,
    /// Codemode lists every callable tool, and requests leave out the declarations of active `direct` tools.
    Only,
}

/// Codemode's settings (pi's `codemode.mode` and `codemode.inlineBudget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The mode.
    pub mode: Mode,
    /// Tokens of tool sections the description may list; `None` lists all.
    pub inline_budget: Option<usize>,
}

/// pi's default inline budget (`DEFAULT_CODEMODE_INLINE_BUDGET`), in estimated tokens.
pub const DEFAULT_INLINE_BUDGET: usize = 3000;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Mode::On,
            inline_budget: Some(DEFAULT_INLINE_BUDGET),
        }
    }
}

/// A tool's section of the catalog: its name, its text, and what it costs of the budget.
#[derive(Debug, Clone)]
struct Section {
    name: String,
    text: String,
    cost: usize,
}

/// pi's `selectCatalog`: in rounds, every group (in order) places its cheapest remaining section if it fits
/// the budget; a group whose next section does not fit drops out.
fn select_catalog(groups: &[Vec<Section>], budget: Option<usize>) -> Vec<String> {
    let Some(mut remaining) = budget else {
        return groups.iter().flatten().map(|s| s.name.clone()).collect();
    };
    let mut queues: Vec<std::collections::VecDeque<&Section>> = groups
        .iter()
        .map(|g| {
            let mut sorted: Vec<&Section> = g.iter().collect();
            sorted.sort_by_key(|s| s.cost);
            sorted.into_iter().collect()
        })
        .collect();
    let mut shown = Vec::new();
    let mut active: Vec<usize> = (0..queues.len()).filter(|i| !queues[*i].is_empty()).collect();
    while !active.is_empty() {
        active.retain(|&i| {
            let Some(next) = queues[i].front() else {
                return false;
            };
            if next.cost > remaining {
                return false;
            }
            remaining -= next.cost;
            shown.push(next.name.clone());
            queues[i].pop_front();
            !queues[i].is_empty()
        });
    }
    shown
}

/// Codemode's description: the intro, the globals and the catalog of `tools` (pi's `createCodemodeDescription`,
/// without the `models` line: Toolwright offers scripts no models): tools without a namespace first, then
/// namespaces by name, as many sections as `inline_budget` allows.
pub fn description(tools: &[&LoadoutTool], inline_budget: Option<usize>) -> String {
    let mut sections = vec![DESCRIPTION_INTRO.to_owned(), GLOBALS.to_owned()];
    if tools.is_empty() {
        return sections.join("\n\n");
    }
    let mut groups: Vec<(Option<&toolwright_sdk::ToolNamespace>, Vec<Section>)> = vec![(None, Vec::new())];
    for tool in tools {
        let id = identifier(&tool.name);
        let heading = if id == tool.name {
            format!("### `{id}`")
        } else {
            format!("### `{id}` (`{}`)", tool.name)
        };
        let section = format!("{heading}\n{}", sample(tool).trim());
        let cost = section.encode_utf16().count().div_ceil(CHARS_PER_TOKEN);
        let entry = Section {
            name: tool.name.clone(),
            text: section,
            cost,
        };
        match &tool.namespace {
            None => groups[0].1.push(entry),
            Some(ns) => match groups
                .iter_mut()
                .find(|(g, _)| g.is_some_and(|g| g.name == ns.name))
            {
                Some(group) => group.1.push(entry),
                None => groups.push((Some(ns), vec![entry])),
            },
        }
    }
    groups[1..].sort_by(|a, b| {
        let (a, b) = (a.0.map(|n| n.name.as_str()), b.0.map(|n| n.name.as_str()));
        a.unwrap_or("")
            .to_lowercase()
            .cmp(&b.unwrap_or("").to_lowercase())
            .then(a.cmp(&b))
    });
    let entries: Vec<Vec<Section>> = groups.iter().map(|(_, e)| e.clone()).collect();
    let shown = select_catalog(&entries, inline_budget);
    let mut catalog = vec!["Nested tools:".to_owned()];
    for (namespace, entries) in &groups {
        let visible: Vec<&Section> = entries.iter().filter(|s| shown.contains(&s.name)).collect();
        if let Some(ns) = namespace {
            let listing = if visible.len() == entries.len() {
                ""
            } else if visible.is_empty() {
                " (tools not listed)"
            } else {
                " (some tools not listed)"
            };
            let description = ns.description.as_deref().map(str::trim).filter(|d| !d.is_empty());
            catalog.push(match description {
                Some(d) => format!("## {}{listing}\n{d}", ns.name),
                None => format!("## {}{listing}", ns.name),
            });
        }
        for section in visible {
            catalog.push(section.text.clone());
        }
    }
    sections.push(catalog.join("\n\n"));
    sections.join("\n\n")
}

/// pi's `CODEMODE_SOURCE_GRAMMAR`: an optional `// @options:` line, then the source (a Lark grammar).
pub const SOURCE_GRAMMAR: &str = "\nstart: options_source | plain_source\noptions_source: OPTIONS_LINE NEWLINE SOURCE\nplain_source: SOURCE\n\nOPTIONS_LINE: /[ \\t]*\\/\\/ @options:[^\\r\\n]*/\nNEWLINE: /\\r?\\n/\nSOURCE: /[\\s\\S]+/\n";

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
    /// Its namespace (`describeNamespace`, `searchTools(query, { namespace })`).
    pub namespace: Option<toolwright_sdk::ToolNamespace>,
}

/// The `codemode` tool, with its settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct Codemode {
    /// The mode and the inline budget.
    pub settings: Settings,
}

impl Tool for Codemode {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: CODEMODE_TOOL_NAME.into(),
            label: CODEMODE_TOOL_NAME.into(),
            description: description(&[], self.settings.inline_budget),
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
            // MCP hints: a script can call every callable tool (bash and write among them), so it may change
            // anything they can and reach what they reach.
            annotations: Some(toolwright_sdk::ToolAnnotations::hints(false, true, false, true)),
            // Capable models write the script as raw text instead of a JSON-escaped string.
            constrained_sampling: Some(json!({
                "type": "grammar",
                "variants": { "openai_lark": SOURCE_GRAMMAR }
            })),
            ..Default::default()
        }
    }

    fn loadout_hook(&self) -> Option<&dyn LoadoutHook> {
        Some(self)
    }

    fn execute(&self, call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        let input = args["code"].as_str().unwrap_or_default();
        let script = source::parse(input).map_err(ToolError::new)?;
        let store = args.get(STORE_KEY).cloned().unwrap_or_else(|| json!({}));
        run(call_id, &script, &store, ctx)
    }
}

impl LoadoutHook for Codemode {
    /// pi's `prepareCodemodeLoadout`. Mode `on`: every declared, callable tool says how scripts call it, and
    /// codemode lists the callable tools that are not `direct`. Mode `only`: codemode lists every callable tool,
    /// and the declared `direct` ones are hidden from requests. `deferred` tools are never listed (search finds
    /// them), so the description stays the same while tools come and go.
    fn prepare_loadout(&self, loadout: &Loadout) -> Result<Option<LoadoutChanges>, ToolError> {
        let callable: Vec<&LoadoutTool> = loadout
            .callable
            .iter()
            .filter(|t| t.name != CODEMODE_TOOL_NAME)
            .collect();
        let mut changes = LoadoutChanges::default();
        if self.settings.mode == Mode::On {
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
        }
        let listed: Vec<&LoadoutTool> = callable
            .iter()
            .copied()
            .filter(|t| self.settings.mode == Mode::Only || t.exposure != Exposure::Direct)
            .filter(|t| t.exposure != Exposure::Deferred)
            .collect();
        changes.descriptions.insert(
            CODEMODE_TOOL_NAME.into(),
            description(&listed, self.settings.inline_budget),
        );
        if self.settings.mode == Mode::Only {
            changes.hidden_declarations = callable
                .iter()
                .filter(|t| {
                    t.exposure == Exposure::Direct && loadout.declared.iter().any(|d| d.name == t.name)
                })
                .map(|t| t.name.clone())
                .collect();
        }
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
            namespace: t.namespace.clone(),
        })
        .collect()
}

#[cfg(target_arch = "wasm32")]
fn run(
    call_id: &str,
    script: &source::Script,
    store: &Value,
    ctx: &dyn Ctx,
) -> Result<ToolResult, ToolError> {
    let started = std::time::Instant::now();
    let tools = nested_tools(&ctx.tools());
    let run = engine::run(call_id, script, &tools, store, ctx);
    let save = |what: output::Save<'_>| -> Result<String, String> {
        let (bytes, suffix) = match what {
            output::Save::Text(text) => (text.as_bytes(), ".txt"),
            output::Save::Image(bytes, suffix) => (bytes, suffix),
        };
        let mut file = ctx
            .temp_file("toolwright-codemode", suffix)
            .map_err(|e| e.to_string())?;
        file.writer.write_all(bytes).map_err(|e| e.to_string())?;
        Ok(file.path)
    };
    let completed = matches!(run.ending, output::Ending::Completed(_));
    let mut result = output::result(
        run.output,
        run.ending,
        run.calls,
        started.elapsed().as_secs_f64(),
        script.options.max_output_tokens,
        save,
    );
    // The host keeps the session's store: it applies what a successful script wrote, and takes this key off.
    if completed
        && !run.writes.is_empty()
        && let Some(details) = result.details.as_mut()
    {
        details[STORE_WRITES_KEY] = Value::Array(run.writes);
    }
    Ok(result)
}

#[cfg(not(target_arch = "wasm32"))]
fn run(
    _call_id: &str,
    _script: &source::Script,
    _store: &Value,
    _ctx: &dyn Ctx,
) -> Result<ToolResult, ToolError> {
    Err(ToolError::new(
        "codemode scripts run only in the codemode wasm component, not natively",
    ))
}

toolwright_sdk::export_tool!(Codemode::default());

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
        let changes = Codemode::default().prepare_loadout(&loadout).unwrap().unwrap();
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
