//! # toolwright-tool-edit
//!
//! pi 1.6.0's `edit` tool: exact-text replacements (several per call, all matched against the original),
//! fuzzy matching of quotes, dashes, spaces and trailing whitespace, the original line endings and BOM kept,
//! and a numbered diff plus a unified patch in `details`. Legacy argument shapes are folded by
//! `prepare_arguments`.
//!
//! ```
//! use toolwright_sdk::ArgumentsShim;
//! let args = serde_json::json!({"path": "a.txt", "oldText": "x", "newText": "y"});
//! let prepared = toolwright_tool_edit::Edit.prepare_arguments(&args).unwrap().unwrap();
//! assert_eq!(prepared, serde_json::json!({"path": "a.txt", "edits": [{"oldText": "x", "newText": "y"}]}));
//! ```

mod apply;
mod diff;
mod jsdiff;

use serde_json::{Map, Value, json};
use toolwright_sdk::arguments::{self, Unchecked};
use toolwright_sdk::{
    Access, ArgumentsShim, Ctx, FileMutations, Tool, ToolError, ToolResult, ToolSpec, node_code, paths,
};

use crate::apply::{apply_edits, apply_to_original, normalize_to_lf};

/// The `edit` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Edit;

/// The model-visible description.
pub const DESCRIPTION: &str = "Edit a single file using exact text replacement. Every edits[].oldText must match a unique, non-overlapping region of the original file. If two changes affect the same block or nearby lines, merge them into one edit instead of emitting overlapping edits. Do not include large unchanged regions just to connect distant changes.";

impl Tool for Edit {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit".into(),
            label: "edit".into(),
            description: DESCRIPTION.into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
                    "edits": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "oldText": {"type": "string", "description": "Exact text for one targeted replacement. It must be unique in the original file and must not overlap with any other edits[].oldText in the same call."},
                                "newText": {"type": "string", "description": "Replacement text for this targeted edit."}
                            },
                            "required": ["oldText", "newText"]
                        },
                        "description": "One or more targeted replacements. Each edit is matched against the original file, not incrementally. Do not include overlapping or nested edits. If two changes touch the same block or nearby lines, merge them into one edit instead."
                    }
                },
                "required": ["path", "edits"]
            }),
            prompt_snippet: Some(
                "Make precise file edits with exact text replacement, including multiple disjoint edits in one call".into(),
            ),
            prompt_guidelines: vec![
                "Use edit for targeted changes. Batch changes to one file in a single call.".into(),
                "Each edits[].oldText must exactly and uniquely match the original file. Keep matches short and non-overlapping; merge nearby changes without including large unchanged regions.".into(),
            ],
            constrained_sampling: Some(json!({"type": "json_schema", "strict": "prefer"})),
            renders_own_frame: true,
            // MCP's hints for clients that decide what to auto-approve (README, "Serving MCP clients").
            annotations: Some(toolwright_sdk::ToolAnnotations::hints(false, true, false, false)),
            ..Default::default()
        }
    }

    fn arguments_shim(&self) -> Option<&dyn ArgumentsShim> {
        Some(self)
    }

    fn file_mutations(&self) -> Option<&dyn FileMutations> {
        Some(self)
    }

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        if args.is_null() {
            return Err(ToolError::new("Cannot read properties of null (reading 'edits')"));
        }
        let Args { edits, path } = arguments::fields(args)?;
        let items = match edits.value() {
            Some(Value::Array(items)) if !items.is_empty() => items,
            _ => {
                return Err(ToolError::new(
                    "Edit tool input is invalid. edits must contain at least one replacement.",
                ));
            }
        };
        let path = path.path()?;
        let absolute = paths::resolve_to_cwd(path, ctx.cwd(), ctx.home().as_deref());
        let aborted = || {
            if ctx.is_cancelled() {
                Err(ToolError::new("Operation aborted"))
            } else {
                Ok(())
            }
        };
        aborted()?;
        let files = ctx.files();
        let access = files
            .metadata(&absolute)
            .and_then(|_| files.check(&absolute, Access::Write));
        if let Err(error) = access {
            aborted()?;
            let reason = match node_code(&error).filter(|_| error.get_ref().is_none()) {
                Some((code, _)) => format!("Error code: {code}"),
                None => format!("Error: {error}"),
            };
            return Err(ToolError::new(format!("Could not edit file: {path}. {reason}.")));
        }
        aborted()?;
        let bytes = files
            .read(&absolute)
            .map_err(|e| ToolError::io_no_path(&e, "read"))?;
        let raw = String::from_utf8_lossy(&bytes);
        aborted()?;
        let (bom, content) = match raw.strip_prefix('\u{feff}') {
            Some(rest) => ("\u{feff}", rest),
            None => ("", raw.as_ref()),
        };
        let normalized = normalize_to_lf(content);
        let edits = edit_texts(items)?;
        let applied = apply_edits(&normalized, &edits, path)?;
        let details = diff::edit_details(path, &normalized, &applied.new_content, &applied.replacements);
        aborted()?;
        let body = if content == normalized {
            applied.new_content
        } else {
            apply_to_original(content, &applied.replacements)
        };
        files
            .write(&absolute, format!("{bom}{body}").as_bytes())
            .map_err(|e| ToolError::io(&e, "open", &absolute))?;
        aborted()?;
        let text = format!("Successfully replaced {} block(s) in {path}.", edits.len());
        Ok(ToolResult::text(text).with_details(details))
    }
}

/// The arguments of `edit`, as pi reads them (`input.edits`, `input.path`).
#[derive(serde::Deserialize)]
struct Args {
    #[serde(default)]
    edits: Unchecked,
    #[serde(default)]
    path: Unchecked,
}

/// Each edit's texts as pi reads them (`normalizeToLF(edit.oldText)`, then `newText`), failing with the
/// `TypeError` pi's JavaScript throws: a missing `newText` never becomes an empty replacement.
fn edit_texts(items: &[Value]) -> Result<Vec<apply::Edit>, ToolError> {
    // By hand: an element of `edits` may be `null` or not an object, and pi's property reads on it throw the
    // `TypeError`s below, in order; a typed element would fail with serde's text instead.
    let text = |edit: &Value, key: &str| -> Result<String, ToolError> {
        match edit {
            Value::Null => Err(ToolError::new(format!(
                "Cannot read properties of null (reading '{key}')"
            ))),
            _ => match edit.get(key) {
                Some(Value::String(s)) => Ok(s.clone()),
                None => Err(ToolError::new(
                    "Cannot read properties of undefined (reading 'replace')",
                )),
                Some(Value::Null) => Err(ToolError::new(
                    "Cannot read properties of null (reading 'replace')",
                )),
                Some(_) => Err(ToolError::new("text.replace is not a function")),
            },
        }
    };
    items
        .iter()
        .map(|edit| {
            Ok(apply::Edit {
                old_text: text(edit, "oldText")?,
                new_text: text(edit, "newText")?,
            })
        })
        .collect()
}

impl ArgumentsShim for Edit {
    /// pi's legacy shapes: a top-level `oldText`/`newText` pair becomes one entry of `edits`.
    fn prepare_arguments(&self, args: &Value) -> Result<Option<Value>, ToolError> {
        Ok(prepare_edit_arguments(args))
    }
}

impl FileMutations for Edit {
    // By hand: the host asks before the call with borrowed arguments; a typed read would copy them all.
    fn mutated_path(&self, args: &Value) -> Option<String> {
        args.get("path").and_then(Value::as_str).map(str::to_owned)
    }
}

/// Both `oldText` and `newText` are strings.
fn single_edit(value: &Value) -> bool {
    value.get("oldText").is_some_and(Value::is_string)
        && value.get("newText").is_some_and(Value::is_string)
        && value.is_object()
}

/// pi's `prepareEditArguments`: `edits` as a JSON string or a single object becomes an array; top-level
/// `oldText`/`newText` (the legacy shape) are appended to `edits`. `None` when nothing changes.
pub fn prepare_edit_arguments(args: &Value) -> Option<Value> {
    let Value::Object(map) = args else { return None };
    let mut map: Map<String, Value> = map.clone();
    let mut changed = false;
    match map.get("edits") {
        Some(Value::String(text)) => {
            if let Ok(parsed) = serde_json::from_str::<Value>(text) {
                if parsed.is_array() {
                    map.insert("edits".into(), parsed);
                    changed = true;
                } else if single_edit(&parsed) {
                    map.insert("edits".into(), Value::Array(vec![parsed]));
                    changed = true;
                }
            }
        }
        Some(single) if single_edit(single) => {
            let single = single.clone();
            map.insert("edits".into(), Value::Array(vec![single]));
            changed = true;
        }
        _ => {}
    }
    let legacy = matches!(
        (map.get("oldText"), map.get("newText")),
        (Some(Value::String(_)), Some(Value::String(_)))
    );
    if legacy {
        let old_text = map.shift_remove("oldText").unwrap_or_default();
        let new_text = map.shift_remove("newText").unwrap_or_default();
        let mut edits = match map.shift_remove("edits") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        edits.push(json!({"oldText": old_text, "newText": new_text}));
        map.insert("edits".into(), Value::Array(edits));
        changed = true;
    }
    changed.then_some(Value::Object(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_shapes() {
        assert_eq!(
            prepare_edit_arguments(&json!({"oldText": "a", "newText": "b"})),
            Some(json!({"edits": [{"oldText": "a", "newText": "b"}]}))
        );
        assert_eq!(
            prepare_edit_arguments(&json!({"path": "p", "edits": "[{\"oldText\":\"a\",\"newText\":\"b\"}]"})),
            Some(json!({"path": "p", "edits": [{"oldText": "a", "newText": "b"}]}))
        );
        assert_eq!(
            prepare_edit_arguments(&json!({"path": "p", "edits": {"oldText": "a", "newText": "b"}})),
            Some(json!({"path": "p", "edits": [{"oldText": "a", "newText": "b"}]}))
        );
        assert_eq!(
            prepare_edit_arguments(&json!({"path": "p", "edits": "not json"})),
            None
        );
        assert_eq!(prepare_edit_arguments(&json!("text")), None);
    }
}

toolwright_sdk::export_tool!(Edit; capabilities = [
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Read("/".into()), "reads the file before changing it"),
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Write(".".into()), "writes the files the model asks for, inside the workspace"),
]);
