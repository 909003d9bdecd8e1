//! `x-mcp-header` (SEP-2243, 2026-07-28): a tool parameter a plugin marks in its parameter schema
//! (`{"type": "string", "x-mcp-header": "Region"}`) is mirrored by the client in an `Mcp-Param-Region` header of
//! every call, and rmcp refuses a call whose header contradicts the body. A client must drop a tool whose marks
//! break the rules, so the server checks them before it lists the tool to a 2026-07-28 client ([`check`]): a
//! careless plugin's tool is left out with a warning naming the rule, not sent for each client to drop.

use std::collections::HashSet;

use serde_json::{Map, Value};

const MARK: &str = "x-mcp-header";

/// Whether `schema`'s `x-mcp-header` marks keep SEP-2243's rules: each on a property reached from the root through
/// `properties` alone (not on the root, nor inside `items`, `$defs`, `allOf` …), a non-empty HTTP token, unique
/// without regard to case, on a parameter of a primitive type (string, integer, boolean). The first rule broken,
/// in words, when not.
pub(crate) fn check(schema: &Value) -> Result<(), String> {
    let Some(root) = schema.as_object() else {
        return Ok(());
    };
    if root.contains_key(MARK) {
        return Err("x-mcp-header must mark a property, not the schema's root".into());
    }
    let mut seen = HashSet::new();
    on_chain(root, &mut Vec::new(), &mut seen)
}

/// Check a schema reached from the root through `properties` alone.
fn on_chain(
    schema: &Map<String, Value>,
    path: &mut Vec<String>,
    seen: &mut HashSet<String>,
) -> Result<(), String> {
    for (key, value) in schema {
        match (key.as_str(), value) {
            ("properties", Value::Object(properties)) => {
                for (name, property) in properties {
                    let Some(property) = property.as_object() else {
                        continue;
                    };
                    path.push(name.clone());
                    if let Some(mark) = property.get(MARK) {
                        mark_ok(mark, property, &path.join("."), seen)?;
                    }
                    on_chain(property, path, seen)?;
                    path.pop();
                }
            }
            (MARK, _) => {}
            (_, value) if marked_anywhere(value) => {
                let at = if path.is_empty() {
                    "the root".to_owned()
                } else {
                    format!("`{}`", path.join("."))
                };
                return Err(format!(
                    "x-mcp-header under `{key}` of {at}: it must mark a property reached through `properties` alone"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

fn mark_ok(
    mark: &Value,
    property: &Map<String, Value>,
    path: &str,
    seen: &mut HashSet<String>,
) -> Result<(), String> {
    let Value::String(header) = mark else {
        return Err(format!("parameter `{path}`: x-mcp-header must be a string"));
    };
    if header.is_empty() {
        return Err(format!("parameter `{path}`: x-mcp-header must not be empty"));
    }
    if !header.chars().all(is_token_char) {
        return Err(format!(
            "parameter `{path}`: x-mcp-header `{header}` is not an HTTP token"
        ));
    }
    if !seen.insert(header.to_ascii_lowercase()) {
        return Err(format!(
            "parameter `{path}`: x-mcp-header `{header}` is used twice (case does not count)"
        ));
    }
    match property.get("type").and_then(Value::as_str) {
        Some("string" | "integer" | "boolean") => Ok(()),
        other => Err(format!(
            "parameter `{path}`: x-mcp-header needs a string, integer or boolean parameter, not {}",
            other.unwrap_or("one without a single type")
        )),
    }
}

/// An HTTP `tchar` (RFC 9110): what a header name may hold.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

fn marked_anywhere(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.contains_key(MARK) || map.values().any(marked_anywhere),
        Value::Array(items) => items.iter().any(marked_anywhere),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn marks_on_primitive_properties_with_distinct_token_names_pass() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "nested": {"type": "object", "properties": {"on": {"type": "boolean", "x-mcp-header": "On"}}},
            "plain": {"type": "array", "items": {"type": "string"}}
        }});
        assert_eq!(check(&schema), Ok(()));
        assert_eq!(check(&json!({"type": "object"})), Ok(()));
    }

    #[test]
    fn a_careless_plugins_marks_are_refused_with_the_rule_they_break() {
        for (schema, reason) in [
            (
                json!({"x-mcp-header": "Root", "type": "object"}),
                "not the schema's root",
            ),
            (
                json!({"properties": {"a": {"type": "string", "x-mcp-header": "Bad Name"}}}),
                "not an HTTP token",
            ),
            (
                json!({"properties": {"a": {"type": "string", "x-mcp-header": "X\r\nSet-Cookie: a"}}}),
                "not an HTTP token",
            ),
            (
                json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
                "must not be empty",
            ),
            (
                json!({"properties": {"a": {"type": "string", "x-mcp-header": 7}}}),
                "must be a string",
            ),
            (
                json!({"properties": {
                    "a": {"type": "string", "x-mcp-header": "Region"},
                    "b": {"type": "string", "x-mcp-header": "region"}
                }}),
                "used twice",
            ),
            (
                json!({"properties": {"a": {"type": "object", "x-mcp-header": "A"}}}),
                "not object",
            ),
            (
                json!({"properties": {"a": {"x-mcp-header": "A"}}}),
                "without a single type",
            ),
            (
                json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
                "under `items` of `a`",
            ),
            (
                json!({"$defs": {"d": {"type": "string", "x-mcp-header": "D"}}}),
                "under `$defs` of the root",
            ),
        ] {
            let error = check(&schema).expect_err(&schema.to_string());
            assert!(error.contains(reason), "{schema}: {error}");
        }
    }
}
