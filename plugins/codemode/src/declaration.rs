//! TypeScript declarations of tools as scripts see them (pi-codemode's `declarations`): JSON Schemas as
//! TypeScript types, with one `//` comment line per described or constrained property, and the one-line
//! summary of what a call resolves to that declared tools' descriptions carry (pi's `describeOutput`).

use std::collections::{BTreeSet, HashSet};

use serde_json::{Map, Value};
use toolwright_sdk::uri::resolve_ref;

use crate::identifier;

/// The longest rendered input type, in characters, before it becomes `unknown`.
pub const INPUT_SCHEMA_MAX_CHARS: usize = 16_000;
/// Local `$ref` expansions per rendered schema.
const MAX_REF_EXPANSIONS: usize = 32;
/// Keywords shown as `@keyword value` property tags.
const TAG_KEYWORDS: [&str; 11] = [
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minItems",
    "maxItems",
];
const LOWER_BOUNDS: [&str; 4] = ["minimum", "exclusiveMinimum", "minLength", "minItems"];
const UPPER_BOUNDS: [&str; 4] = ["maximum", "exclusiveMaximum", "maxLength", "maxItems"];
/// The longest property tag kept.
const MAX_TAG_CHARS: usize = 80;
const INDENT: &str = "  ";

fn is_line_terminator(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{2028}' | '\u{2029}')
}

/// A number as JavaScript prints it (integers without a fraction).
pub fn js_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// `JSON.stringify` of a value as JavaScript writes it (numbers without a needless `.0`).
pub fn js_json(value: &Value) -> String {
    match value {
        Value::Number(n) if n.is_f64() => n.as_f64().map_or_else(|| n.to_string(), js_number),
        Value::Array(items) => format!("[{}]", items.iter().map(js_json).collect::<Vec<_>>().join(",")),
        Value::Object(fields) => format!(
            "{{{}}}",
            fields
                .iter()
                .map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), js_json(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

struct Render<'a> {
    root: &'a Value,
    resolving: HashSet<String>,
    expansions: usize,
    tags: bool,
}

/// A JSON Schema as a TypeScript type (pi's `schemaToType`): objects on one line with properties sorted, or one
/// property per line with `//` comments when one has a description or constraints its type cannot express;
/// `Array<T>` for arrays; local references resolved, recursive and remote ones `unknown`. Longer than
/// `max_chars`, it is rendered again without the tags, and is `unknown` if still too long.
pub fn schema_to_type(schema: &Value, max_chars: Option<usize>) -> String {
    let render = |tags| {
        to_type(
            schema,
            &mut Render {
                root: schema,
                resolving: HashSet::new(),
                expansions: 0,
                tags,
            },
        )
    };
    let typed = render(true);
    let Some(max) = max_chars else { return typed };
    if utf16(&typed) <= max {
        return typed;
    }
    let untagged = render(false);
    if utf16(&untagged) <= max {
        untagged
    } else {
        "unknown".into()
    }
}

fn utf16(text: &str) -> usize {
    text.encode_utf16().count()
}

fn union(types: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for t in types {
        if !unique.contains(&t) {
            unique.push(t);
        }
    }
    if unique.iter().any(|t| t == "unknown") {
        return "unknown".into();
    }
    if unique.is_empty() {
        "never".into()
    } else {
        unique.join(" | ")
    }
}

fn to_type(schema: &Value, context: &mut Render<'_>) -> String {
    let object = match schema {
        Value::Bool(true) => return "unknown".into(),
        Value::Bool(false) => return "never".into(),
        Value::Object(object) => object,
        _ => return "unknown".into(),
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        if context.resolving.contains(reference) || context.expansions >= MAX_REF_EXPANSIONS {
            return "unknown".into();
        }
        let Some(target) = resolve_ref(reference, context.root) else {
            return "unknown".into();
        };
        context.expansions += 1;
        context.resolving.insert(reference.to_owned());
        let typed = to_type(target, context);
        context.resolving.remove(reference);
        return typed;
    }
    if let Some(value) = object.get("const") {
        return js_json(value);
    }
    if let Some(values) = object.get("enum").and_then(Value::as_array) {
        return union(values.iter().map(js_json).collect());
    }
    let variants = object
        .get("anyOf")
        .and_then(Value::as_array)
        .or_else(|| object.get("oneOf").and_then(Value::as_array));
    if let Some(variants) = variants {
        return union(variants.iter().map(|v| to_type(v, context)).collect());
    }
    if let Some(parts) = object.get("allOf").and_then(Value::as_array) {
        let parts: Vec<String> = parts
            .iter()
            .map(|p| to_type(p, context))
            .filter(|p| p != "unknown")
            .collect();
        return if parts.is_empty() {
            "unknown".into()
        } else {
            parts
                .iter()
                .map(|p| {
                    if p.contains(" | ") {
                        format!("({p})")
                    } else {
                        p.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(" & ")
        };
    }
    match object.get("type") {
        Some(Value::Array(types)) => union(
            types
                .iter()
                .map(|t| {
                    let mut one = object.clone();
                    one.insert("type".into(), t.clone());
                    to_type(&Value::Object(one), context)
                })
                .collect(),
        ),
        Some(Value::String(t)) => match t.as_str() {
            "string" => "string".into(),
            "number" | "integer" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => array_type(object, context),
            "object" => object_type(object, context),
            _ => "unknown".into(),
        },
        None => {
            if ["properties", "additionalProperties", "required"]
                .iter()
                .any(|k| object.contains_key(*k))
            {
                object_type(object, context)
            } else if object.contains_key("items") || object.contains_key("prefixItems") {
                array_type(object, context)
            } else {
                "unknown".into()
            }
        }
        Some(_) => "unknown".into(),
    }
}

fn array_type(schema: &Map<String, Value>, context: &mut Render<'_>) -> String {
    if let Some(items) = schema.get("items").filter(|i| !i.is_array()) {
        return format!("Array<{}>", to_type(items, context));
    }
    let tuple = schema
        .get("prefixItems")
        .and_then(Value::as_array)
        .or_else(|| schema.get("items").and_then(Value::as_array));
    match tuple.filter(|t| !t.is_empty()) {
        Some(tuple) => format!(
            "[{}]",
            tuple
                .iter()
                .map(|i| to_type(i, context))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => "unknown[]".into(),
    }
}

fn description_lines(property: &Value) -> Vec<String> {
    property
        .get("description")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("")
        .split(is_line_terminator)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The constraints of a property its type cannot express, as tags: `@integer @minimum 1 @default 20`.
fn constraint_tags(property: &Value) -> String {
    let Some(object) = property.as_object() else {
        return String::new();
    };
    // An optional field (`int | None`) keeps its constraints in the non-null branch; both are read.
    let variants = object
        .get("anyOf")
        .and_then(Value::as_array)
        .or_else(|| object.get("oneOf").and_then(Value::as_array));
    let non_null: Vec<&Value> = variants
        .map(|v| {
            v.iter()
                .filter(|variant| variant.get("type").and_then(Value::as_str) != Some("null"))
                .collect()
        })
        .unwrap_or_default();
    let mut branches = vec![object.clone()];
    if non_null.len() == 1
        && let Some(branch) = non_null[0].as_object()
    {
        branches.push(branch.clone());
    }
    // Draft-04 and OpenAPI 3.0 mark `minimum`/`maximum` exclusive with a boolean.
    for schema in &mut branches {
        for (flag, bound) in [("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")] {
            if schema.get(flag) == Some(&Value::Bool(true)) {
                let value = schema.remove(bound).unwrap_or(Value::Null);
                schema.insert(flag.into(), value);
            }
        }
    }
    let mut tags = Vec::new();
    let integer = |t: Option<&Value>| match t {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(types)) => types.iter().any(|t| t == "integer"),
        _ => false,
    };
    if branches.iter().any(|b| integer(b.get("type"))) {
        tags.push("@integer".to_owned());
    }
    for keyword in TAG_KEYWORDS {
        let values: Vec<&Value> = branches.iter().filter_map(|b| b.get(keyword)).collect();
        let lower = LOWER_BOUNDS.contains(&keyword);
        if lower || UPPER_BOUNDS.contains(&keyword) {
            let numbers: Vec<f64> = values.iter().filter_map(|v| v.as_f64()).collect();
            if numbers.is_empty() {
                continue;
            }
            let bound = if lower {
                numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max)
            } else {
                numbers.iter().copied().fold(f64::INFINITY, f64::min)
            };
            tags.push(format!("@{keyword} {}", js_number(bound)));
            continue;
        }
        let mut seen: Vec<&Value> = Vec::new();
        for value in values {
            let text = match value {
                Value::Number(n) => n.as_f64().map(js_number),
                Value::String(s) => Some(s.clone()),
                _ => None,
            };
            if let Some(text) = text
                && !seen.contains(&value)
            {
                seen.push(value);
                tags.push(format!("@{keyword} {text}"));
            }
        }
    }
    if branches
        .iter()
        .any(|b| b.get("uniqueItems") == Some(&Value::Bool(true)))
    {
        tags.push("@uniqueItems".into());
    }
    if let Some(default) = object.get("default").filter(|d| !d.is_null()) {
        tags.push(format!("@default {}", js_json(default)));
    }
    if object.get("deprecated") == Some(&Value::Bool(true)) {
        tags.push("@deprecated".into());
    }
    tags.into_iter()
        .filter(|t| utf16(t) <= MAX_TAG_CHARS)
        .map(|t| {
            t.chars()
                .map(|c| {
                    if is_line_terminator(c) {
                        format!("\\u{:04x}", c as u32)
                    } else {
                        c.to_string()
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn object_type(schema: &Map<String, Value>, context: &mut Render<'_>) -> String {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut names: Vec<&String> = properties.keys().collect();
    names.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    let mut members: Vec<String> = names
        .iter()
        .map(|name| {
            let key = if is_identifier(name) {
                (*name).clone()
            } else {
                Value::from(name.as_str()).to_string()
            };
            let optional = if required.contains(name.as_str()) { "" } else { "?" };
            format!("{key}{optional}: {};", to_type(&properties[*name], context))
        })
        .collect();
    match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        Some(additional) => {
            let typed = if additional == &Value::Bool(true) {
                "unknown".into()
            } else {
                to_type(additional, context)
            };
            members.push(format!("[key: string]: {typed};"));
        }
        None if names.is_empty() => members.push("[key: string]: unknown;".into()),
        None => {}
    }
    if members.is_empty() {
        return "{}".into();
    }
    let comments: Vec<Vec<String>> = names
        .iter()
        .map(|name| {
            let mut lines = description_lines(&properties[*name]);
            if context.tags {
                let tags = constraint_tags(&properties[*name]);
                if !tags.is_empty() {
                    lines.push(tags);
                }
            }
            lines
        })
        .collect();
    if comments.iter().all(Vec::is_empty) {
        return format!("{{ {} }}", members.join(" "));
    }
    let mut lines = vec!["{".to_owned()];
    for (index, comment) in comments.iter().enumerate() {
        for line in comment {
            lines.push(format!("{INDENT}// {line}"));
        }
        lines.push(format!(
            "{INDENT}{}",
            members[index].replace('\n', &format!("\n{INDENT}"))
        ));
    }
    for member in &members[names.len()..] {
        lines.push(format!("{INDENT}{member}"));
    }
    lines.push("}".into());
    lines.join("\n")
}

/// The output type scripts see when a tool declares none: calls resolve to its text.
pub fn text_output_schema() -> Value {
    serde_json::json!({ "type": "string" })
}

/// A tool's declaration line: `name(args: T): Promise<R>;`.
pub fn signature(name: &str, parameters: Option<&Value>, output: &Value) -> String {
    let input = parameters.map_or_else(
        || "unknown".to_owned(),
        |p| schema_to_type(p, Some(INPUT_SCHEMA_MAX_CHARS)),
    );
    format!(
        "{}(args: {input}): Promise<{}>;",
        identifier(name),
        schema_to_type(output, None)
    )
}

/// The local `$ref` chain of `schema` followed in `root` (remote, missing and cyclic references stop).
fn follow_ref<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    let mut seen: Vec<*const Value> = Vec::new();
    let mut current = schema;
    while let Some(reference) = current.get("$ref").and_then(Value::as_str) {
        let pointer = current as *const Value;
        if seen.contains(&pointer) {
            break;
        }
        let Some(target) = resolve_ref(reference, root) else {
            break;
        };
        seen.push(pointer);
        current = target;
    }
    current
}

/// pi's `describeFields`: `{ output, exit_code, full_output_path? }`, object fields `depth` levels deep, `const`
/// values shown.
fn describe_fields(schema: &Value, root: &Value, depth: usize) -> Option<String> {
    let resolved = follow_ref(schema, root);
    if resolved.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    let properties = resolved.get("properties")?.as_object()?;
    let required: Vec<&str> = resolved
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, field)| {
            let nested = match follow_ref(field, root).get("const") {
                Some(value) => Some(js_json(value)),
                None if depth > 0 => describe_fields(field, root, depth - 1),
                None => None,
            };
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            match nested {
                Some(n) => format!("{name}{optional}: {n}"),
                None => format!("{name}{optional}"),
            }
        })
        .collect();
    Some(format!("{{ {} }}", fields.join(", ")))
}

fn describe_union_fields(schema: &Value, root: &Value) -> Option<String> {
    let resolved = follow_ref(schema, root);
    let variants = resolved
        .get("anyOf")
        .or_else(|| resolved.get("oneOf"))?
        .as_array()
        .filter(|v| !v.is_empty())?;
    let described: Option<Vec<String>> = variants.iter().map(|v| describe_fields(v, root, 0)).collect();
    described.map(|d| d.join(" | "))
}

/// What a call of `name` resolves to, in one line (pi's `describeOutput`).
pub fn describe_output(name: &str, schema: &Value) -> String {
    let typed = schema_to_type(schema, None);
    if typed == "string" {
        return "a string".into();
    }
    if let Some(fields) = describe_fields(schema, schema, 1).or_else(|| describe_union_fields(schema, schema))
    {
        return format!("`{fields}`");
    }
    if !typed.contains('\n') {
        return format!("`{typed}`");
    }
    format!(
        "a value; `await describeTool({})` shows its type",
        Value::from(name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn described_properties_get_comment_lines() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to read\nrelative or absolute"},
                "limit": {"type": "integer", "minimum": 1, "default": 20},
                "flag": {"type": "boolean"}
            },
            "required": ["path"]
        });
        assert_eq!(
            schema_to_type(&schema, None),
            "{\n  flag?: boolean;\n  // @integer @minimum 1 @default 20\n  limit?: number;\n  // File to read\n  // relative or absolute\n  path: string;\n}"
        );
    }

    #[test]
    fn plain_objects_stay_on_one_line() {
        let schema = json!({"type": "object", "properties": {"b": {"type": "number"}, "a-b": {"type": "string"}},
                            "required": ["b"]});
        assert_eq!(schema_to_type(&schema, None), "{ \"a-b\"?: string; b: number; }");
        assert_eq!(
            schema_to_type(&json!({"type": "object"}), None),
            "{ [key: string]: unknown; }"
        );
        assert_eq!(
            schema_to_type(&json!({"anyOf": [{"type": "string"}, {"type": "null"}]}), None),
            "string | null"
        );
        assert_eq!(
            schema_to_type(&json!({"type": "array", "items": {"enum": ["a", 1]}}), None),
            "Array<\"a\" | 1>"
        );
    }

    #[test]
    fn outputs_are_summed_up_by_their_fields() {
        let bash = json!({"type": "object", "properties": {"output": {}, "exit_code": {}, "kind": {"const": "x"}},
                          "required": ["output"]});
        assert_eq!(
            describe_output("bash", &bash),
            "`{ output, exit_code?, kind?: \"x\" }`"
        );
        assert_eq!(describe_output("read", &text_output_schema()), "a string");
    }
}
