//! The load-time check of a parameter schema: everything the validator will rely on is made sure of once, when
//! the tool is defined, so that a schema the host cannot enforce is refused with its reason instead of
//! accepting values open (a pattern that does not compile) or taking the host down (a reference loop).
//!
//! Checked: every `$ref` resolves to a local schema; every `pattern` and `patternProperties` key compiles; no
//! schema reaches itself through keywords that stay on the same value (`$ref`, `allOf`, `anyOf`, `oneOf`,
//! `not`, `if`/`then`/`else`, `dependentSchemas`), since checking it would recurse without ever consuming the
//! value. Recursion through `properties`, `items` and the other keywords that descend into the value is
//! allowed: it ends with the value, whose depth the validator bounds.

use std::collections::{HashMap, HashSet};

use fancy_regex::Regex;
use serde_json::{Map, Value};

/// Why a parameter schema cannot be enforced. Locations are JSON pointers into the schema (`#` is its root).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaDefinitionError {
    /// A `$ref` names nothing in the schema, or is not a local reference.
    #[error("the reference \"{reference}\" at {at} does not resolve to a schema in the same document")]
    Unresolved {
        /// Where the `$ref` is.
        at: String,
        /// The reference as written.
        reference: String,
    },
    /// A `pattern` (or a `patternProperties` key) is not a regular expression the host can run.
    #[error("the pattern \"{pattern}\" at {at} does not compile: {message}")]
    Pattern {
        /// Where the pattern is.
        at: String,
        /// The pattern as written.
        pattern: String,
        /// The regex engine's reason.
        message: String,
    },
    /// A schema reaches itself without descending into the value: no value could ever be checked against it.
    #[error("the schema at {at} refers to itself without descending into the value ({cycle})")]
    Cycle {
        /// The schema that starts the loop.
        at: String,
        /// The loop, as schema locations joined by ` -> `.
        cycle: String,
    },
}

/// The compiled regexes of a schema that passed the check, keyed by their source.
pub(super) type Patterns = HashMap<String, Regex>;

/// Checks `root` and compiles its patterns; see the module doc for what is refused.
pub(super) fn compile(root: &Value) -> Result<Patterns, SchemaDefinitionError> {
    let nodes = collect(root)?;
    let mut patterns = Patterns::new();
    for (node, at) in nodes.values() {
        for (pattern, at) in node_patterns(node, at) {
            if patterns.contains_key(pattern) {
                continue;
            }
            let regex = Regex::new(pattern).map_err(|e| SchemaDefinitionError::Pattern {
                at,
                pattern: pattern.to_owned(),
                message: e.to_string(),
            })?;
            patterns.insert(pattern.to_owned(), regex);
        }
    }
    find_cycle(root, &nodes)?;
    Ok(patterns)
}

/// A schema node's identity during the check: its address in the borrowed schema.
type NodeId = *const Map<String, Value>;

/// The object schemas of a document by identity, each with the location it was first reached at.
type Nodes<'a> = HashMap<NodeId, (&'a Map<String, Value>, String)>;

/// Every object schema reachable from the root, through subschema keywords and `$ref`s, with its location.
/// Iterative, so a schema nested arbitrarily deep cannot overflow the stack here.
fn collect(root: &Value) -> Result<Nodes<'_>, SchemaDefinitionError> {
    let mut nodes = HashMap::new();
    let mut work = vec![(root, "#".to_owned())];
    while let Some((value, at)) = work.pop() {
        let Value::Object(node) = value else { continue };
        if nodes.contains_key(&(node as NodeId)) {
            continue;
        }
        if let Some(reference) = node.get("$ref") {
            let target = reference.as_str().and_then(|r| resolve(root, r));
            match target {
                Some(target) => work.push((target, reference.as_str().unwrap_or_default().to_owned())),
                None => {
                    return Err(SchemaDefinitionError::Unresolved {
                        at,
                        reference: match reference {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        },
                    });
                }
            }
        }
        for (child, path) in subschemas(node) {
            work.push((child, format!("{at}/{path}")));
        }
        nodes.insert(node as NodeId, (node, at));
    }
    Ok(nodes)
}

/// The target of a local `$ref` (the validator's own resolution rules), `None` when it names nothing.
pub(super) fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    if pointer.starts_with('/') {
        return root.pointer(pointer);
    }
    // A plain-name fragment: an `$anchor` somewhere in `$defs`.
    let defs = root.get("$defs").or_else(|| root.get("definitions"))?;
    defs.as_object()?
        .values()
        .find(|d| d.get("$anchor").and_then(Value::as_str) == Some(pointer))
}

/// The subschemas of `node` with their paths relative to it: every keyword the validator applies.
fn subschemas(node: &Map<String, Value>) -> Vec<(&Value, String)> {
    let mut out = Vec::new();
    for key in [
        "additionalProperties",
        "propertyNames",
        "additionalItems",
        "contains",
        "not",
        "if",
        "then",
        "else",
    ] {
        if let Some(s) = node.get(key) {
            out.push((s, key.to_owned()));
        }
    }
    for key in [
        "properties",
        "patternProperties",
        "$defs",
        "definitions",
        "dependentSchemas",
        "dependencies",
    ] {
        for (name, s) in node.get(key).and_then(Value::as_object).into_iter().flatten() {
            out.push((s, format!("{key}/{}", escape(name))));
        }
    }
    for key in ["allOf", "anyOf", "oneOf", "prefixItems", "items"] {
        match node.get(key) {
            Some(Value::Array(items)) => {
                out.extend(items.iter().enumerate().map(|(i, s)| (s, format!("{key}/{i}"))))
            }
            Some(s) if key == "items" => out.push((s, key.to_owned())),
            _ => {}
        }
    }
    out
}

/// The patterns `node` declares, with their locations.
fn node_patterns<'a>(node: &'a Map<String, Value>, at: &str) -> Vec<(&'a str, String)> {
    let mut out = Vec::new();
    if let Some(p) = node.get("pattern").and_then(Value::as_str) {
        out.push((p, format!("{at}/pattern")));
    }
    for p in node
        .get("patternProperties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(p, _)| p)
    {
        out.push((p.as_str(), format!("{at}/patternProperties")));
    }
    out
}

/// The schemas applied to the very value `node` is applied to.
fn in_place<'a>(root: &'a Value, node: &'a Map<String, Value>) -> Vec<&'a Value> {
    let mut out = Vec::new();
    if let Some(target) = node
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve(root, r))
    {
        out.push(target);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        out.extend(node.get(key).and_then(Value::as_array).into_iter().flatten());
    }
    out.extend(
        ["not", "if", "then", "else"]
            .into_iter()
            .filter_map(|k| node.get(k)),
    );
    for key in ["dependentSchemas", "dependencies"] {
        out.extend(
            node.get(key)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(_, s)| s)
                .filter(|s| s.is_object()),
        );
    }
    out
}

/// A loop among the in-place edges, found by an iterative depth-first search.
fn find_cycle(root: &Value, nodes: &Nodes<'_>) -> Result<(), SchemaDefinitionError> {
    let mut done: HashSet<NodeId> = HashSet::new();
    for (&start, (start_node, _)) in nodes {
        if done.contains(&start) {
            continue;
        }
        // The current path: each node with its in-place successors still to visit.
        let mut path: Vec<(NodeId, Vec<&Value>)> = vec![(start, in_place(root, start_node))];
        let mut on_path: HashSet<NodeId> = HashSet::from([start]);
        while let Some((id, successors)) = path.last_mut() {
            let id = *id;
            let Some(next) = successors.pop() else {
                done.insert(id);
                on_path.remove(&id);
                path.pop();
                continue;
            };
            let Value::Object(next) = next else { continue };
            let next_id = next as NodeId;
            if on_path.contains(&next_id) {
                let location = |id: &NodeId| nodes.get(id).map_or("?", |(_, at)| at.as_str()).to_owned();
                let first = path.iter().position(|(p, _)| *p == next_id).unwrap_or(0);
                let mut cycle: Vec<String> = path[first..].iter().map(|(p, _)| location(p)).collect();
                cycle.push(location(&next_id));
                return Err(SchemaDefinitionError::Cycle {
                    at: location(&next_id),
                    cycle: cycle.join(" -> "),
                });
            }
            if !done.contains(&next_id) {
                on_path.insert(next_id);
                path.push((next_id, in_place(root, next)));
            }
        }
    }
    Ok(())
}

/// A JSON-pointer token for `name`.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(schema: Value) -> String {
        compile(&schema).unwrap_err().to_string()
    }

    #[test]
    fn a_schema_that_is_its_own_reference_is_refused() {
        assert_eq!(
            refusal(json!({"$ref": "#"})),
            "the schema at # refers to itself without descending into the value (# -> #)"
        );
    }

    #[test]
    fn mutually_recursive_defs_are_refused() {
        let message = refusal(json!({
            "$defs": {"a": {"allOf": [{"$ref": "#/$defs/b"}]}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/a"}}
        }));
        assert!(
            message.contains("refers to itself without descending into the value"),
            "{message}"
        );
        assert!(
            message.contains("#/$defs/a") && message.contains("#/$defs/b"),
            "{message}"
        );
    }

    #[test]
    fn recursion_through_the_value_is_allowed() {
        let tree = json!({
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#"}}, "next": {"$ref": "#/$defs/n"}},
            "$defs": {"n": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}}
        });
        assert!(compile(&tree).is_ok());
    }

    #[test]
    fn an_unresolvable_reference_is_refused() {
        assert_eq!(
            refusal(json!({"properties": {"a": {"$ref": "#/$defs/missing"}}})),
            "the reference \"#/$defs/missing\" at #/properties/a does not resolve to a schema in the same document"
        );
        assert_eq!(
            refusal(json!({"properties": {"a": {"$ref": "https://example.com/s.json"}}})),
            "the reference \"https://example.com/s.json\" at #/properties/a does not resolve to a schema in the same \
             document"
        );
    }

    #[test]
    fn an_invalid_pattern_is_refused_with_the_engines_reason() {
        let message = refusal(json!({"properties": {"a": {"type": "string", "pattern": "(unclosed"}}}));
        assert!(
            message.starts_with("the pattern \"(unclosed\" at #/properties/a/pattern does not compile: "),
            "{message}"
        );
        let message = refusal(json!({"patternProperties": {"[z-a]": {}}}));
        assert!(
            message.contains("at #/patternProperties does not compile"),
            "{message}"
        );
    }

    #[test]
    fn look_around_patterns_compile() {
        let patterns =
            compile(&json!({"pattern": "^(?!evil)", "patternProperties": {"(?<=x)y": {}}})).unwrap();
        assert!(patterns["^(?!evil)"].is_match("good").unwrap());
        assert!(!patterns["^(?!evil)"].is_match("evil plan").unwrap());
    }

    #[test]
    fn patterns_inside_annotations_are_not_schemas() {
        assert!(compile(&json!({"const": {"pattern": "("}, "enum": [{"$ref": "#/nothing"}]})).is_ok());
    }
}
