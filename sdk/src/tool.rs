//! The [`Tool`] trait: what a built-in or plugin tool implements, once, for both the native and the wasm build.

use serde_json::Value;

use crate::{
    Ctx, ExecutionMode, Exposure, Loadout, LoadoutChanges, ToolAnnotations, ToolError, ToolNamespace,
    ToolResult,
};

/// Everything a tool declares about itself: pi's `ToolDefinition` fields that can cross a plugin boundary.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ToolSpec {
    /// The name the model calls.
    pub name: String,
    /// The UI label.
    pub label: String,
    /// The model-visible description.
    pub description: String,
    /// The parameters' JSON Schema (an object schema).
    pub parameters: Value,
    /// The JSON Schema of `structuredContent`.
    pub output_schema: Option<Value>,
    /// One line for the system prompt's tool list.
    pub prompt_snippet: Option<String>,
    /// Bullets for the system prompt's rules.
    pub prompt_guidelines: Vec<String>,
    /// Constrained-sampling request for providers.
    pub constrained_sampling: Option<Value>,
    /// Per-tool execution mode.
    pub execution_mode: Option<ExecutionMode>,
    /// How the model can reach the tool.
    pub exposure: Exposure,
    /// Hints about the tool's effects.
    pub annotations: Option<ToolAnnotations>,
    /// A group for listings and tool search (pi's `namespace`).
    pub namespace: Option<ToolNamespace>,
    /// Whether registration activates the tool (`None`: pi's default for the exposure).
    pub default_active: Option<bool>,
    /// The tool draws its own UI frame (pi's `renderShell: "self"`).
    pub renders_own_frame: bool,
    /// The tool has an arguments shim ([`Tool::arguments_shim`]); without it the host never calls the shim. Set
    /// by [`declaration`] from the tool itself: what [`Tool::spec`] puts here is replaced.
    pub prepares_arguments: bool,
    /// The tool modifies files ([`Tool::file_mutations`] names them); without it the host never asks. Set by
    /// [`declaration`].
    pub mutates_files: bool,
    /// The tool has a loadout hook ([`Tool::loadout_hook`]); without it the host never calls it. Set by
    /// [`declaration`].
    pub prepares_loadout: bool,
    /// Whether a call may run for minutes: an MCP client that accepts tasks gets a task for it (`Some(true)`), or
    /// the result at once (`Some(false)`); `None` leaves it to the host (a plugin's tools run as tasks).
    pub long_running: Option<bool>,
}

/// A tool's declaration as hosts see it: [`Tool::spec`], with `prepares_arguments`, `mutates_files` and
/// `prepares_loadout` set from the hooks the tool has, so the flags and the hooks cannot disagree.
///
/// ```
/// use toolwright_sdk::{ArgumentsShim, Ctx, Tool, ToolError, ToolResult, ToolSpec, Value};
/// struct Old;
/// impl Tool for Old {
///     fn spec(&self) -> ToolSpec {
///         ToolSpec { name: "old".into(), ..Default::default() }
///     }
///     fn arguments_shim(&self) -> Option<&dyn ArgumentsShim> {
///         Some(self)
///     }
///     fn execute(&self, _: &str, _: Value, _: &dyn Ctx) -> Result<ToolResult, ToolError> {
///         Ok(ToolResult::text("ok"))
///     }
/// }
/// impl ArgumentsShim for Old {
///     fn prepare_arguments(&self, _: &Value) -> Result<Option<Value>, ToolError> {
///         Ok(None)
///     }
/// }
/// let spec = toolwright_sdk::declaration(&Old);
/// assert!(spec.prepares_arguments && !spec.mutates_files && !spec.prepares_loadout);
/// ```
pub fn declaration(tool: &dyn Tool) -> ToolSpec {
    let mut spec = tool.spec();
    spec.prepares_arguments = tool.arguments_shim().is_some();
    spec.mutates_files = tool.file_mutations().is_some();
    spec.prepares_loadout = tool.loadout_hook().is_some();
    spec
}

/// pi's `prepareArguments`: a compatibility shim on a tool's raw arguments, run before validation. A tool has one
/// when its [`Tool::arguments_shim`] returns it.
pub trait ArgumentsShim: Send + Sync {
    /// New arguments, or `Ok(None)` to keep them as they are; an error is the call's result.
    fn prepare_arguments(&self, args: &Value) -> Result<Option<Value>, ToolError>;
}

/// A tool that modifies files: calls modifying the same file run one at a time in call order, even in parallel
/// batches (pi's file mutation queue). A tool has it when its [`Tool::file_mutations`] returns it.
pub trait FileMutations: Send + Sync {
    /// The file this call modifies, as the model wrote it, if any.
    fn mutated_path(&self, args: &Value) -> Option<String>;
}

/// pi's `prepareLoadout`: called whenever the active set is applied while the tool is active, to override the
/// descriptions of declared tools or hide declarations. A tool has one when its [`Tool::loadout_hook`] returns it.
pub trait LoadoutHook: Send + Sync {
    /// The changes, or `Ok(None)` for none; an error is reported and ignored.
    fn prepare_loadout(&self, loadout: &Loadout) -> Result<Option<LoadoutChanges>, ToolError>;
}

/// The validated arguments of a call as a typed value: `let Args { path } = toolwright_sdk::args(args)?;` with
/// `#[derive(serde::Deserialize)] struct Args { path: String }`. The host validated the arguments against the
/// tool's JSON Schema before `execute`, so an error here means the schema and the type disagree; it names the field.
///
/// ```
/// #[derive(Debug, serde::Deserialize)]
/// struct Args {
///     path: String,
///     #[serde(default)]
///     limit: Option<u32>,
/// }
/// let args: Args = toolwright_sdk::args(serde_json::json!({"path": "a.txt"})).unwrap();
/// assert_eq!((args.path.as_str(), args.limit), ("a.txt", None));
/// let wrong = toolwright_sdk::args::<Args>(serde_json::json!({"path": 3})).unwrap_err();
/// assert!(wrong.message().starts_with("The arguments do not fit the tool's type: invalid type: integer `3`"));
/// ```
pub fn args<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args)
        .map_err(|e| ToolError::new(format!("The arguments do not fit the tool's type: {e}")))
}

/// The JSON Schema of `T`, for a tool's `parameters` (feature `schemars`): derive `schemars::JsonSchema` beside
/// `serde::Deserialize` on the argument type, and the schema and [`args`] cannot disagree. Doc comments become
/// `description`s; `$schema` and the type's `title` are left out (the model sees the tool's own name and
/// description).
///
/// ```
/// # #[cfg(feature = "schemars")] {
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Args {
///     /// The file to read
///     path: String,
///     limit: Option<u32>,
/// }
/// let schema = toolwright_sdk::schema::<Args>();
/// assert_eq!(schema["type"], "object");
/// assert_eq!(schema["properties"]["path"]["description"], "The file to read");
/// assert_eq!(schema["required"], serde_json::json!(["path"]));
/// assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
/// # }
/// ```
#[cfg(feature = "schemars")]
pub fn schema<T: schemars::JsonSchema>() -> Value {
    let mut schema = schemars::schema_for!(T).to_value();
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
    }
    schema
}

/// A tool, written once against [`Ctx`]: linked natively into the host, or built as a wasm component.
///
/// `execute` is synchronous: the host runs native tools on a blocking thread, and a wasm instance is a thread of
/// its own. Long-running tools check [`Ctx::is_cancelled`] and report progress with [`Ctx::update`].
pub trait Tool: Send + Sync {
    /// The tool's declaration.
    fn spec(&self) -> ToolSpec;

    /// The tool's arguments shim (pi's `prepareArguments`), if it has one: `Some(self)` from a tool that
    /// implements [`ArgumentsShim`].
    fn arguments_shim(&self) -> Option<&dyn ArgumentsShim> {
        None
    }

    /// Which file a call modifies, if the tool modifies files: `Some(self)` from a tool that implements
    /// [`FileMutations`].
    fn file_mutations(&self) -> Option<&dyn FileMutations> {
        None
    }

    /// The tool's loadout hook (pi's `prepareLoadout`), if it has one: `Some(self)` from a tool that implements
    /// [`LoadoutHook`].
    fn loadout_hook(&self) -> Option<&dyn LoadoutHook> {
        None
    }

    /// pi's `renderCall`: the call's arguments as lines of text for people (a terminal, a UI); `None` (the
    /// default) leaves it to the UI. It must not have effects: a UI may call it any number of times.
    fn render_call(&self, args: &Value) -> Option<String> {
        let _ = args;
        None
    }

    /// pi's `renderResult`: a (partial) result as lines of text for people, `expanded` when the UI shows it in
    /// full; `None` (the default) leaves it to the UI. It must not have effects.
    fn render_result(&self, result: &ToolResult, expanded: bool, partial: bool) -> Option<String> {
        let _ = (result, expanded, partial);
        None
    }

    /// Do the work of one call with validated arguments. `Err` is a thrown error: its message is the result text.
    fn execute(&self, call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError>;
}
