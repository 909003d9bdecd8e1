//! Why a value failed: a walk over the schema that reports each failing keyword at the value it failed on, in
//! pi-schema's order and words. It runs only for values that failed the check.

use serde_json::{Map, Value};

use super::{
    Nesting, Validator, contains_bounds, dependencies, item_schemas, too_deep_schema, type_matches, unique,
};
use toolwright_sdk::js;

/// One failing keyword: where (a JSON pointer into the value) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// JSON pointer of the failing value (`""` for the root, `/edits/0/oldText` for a nested one).
    pub path: String,
    /// The message, in pi-schema's words (`missing`, `expected number, got string`, …).
    pub message: String,
}

impl SchemaError {
    /// The path as pi shows it to the model: `/edits/0/oldText` becomes `edits.0.oldText`, the root is `root`.
    pub fn display_path(&self) -> String {
        if self.path.is_empty() {
            return "root".into();
        }
        self.path[1..]
            .split('/')
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// The errors of `value`, at least one (it failed the check).
pub(super) fn errors(v: &Validator, value: &Value) -> Vec<SchemaError> {
    let mut out = Vec::new();
    walk(v, v.schema(), value, "", &mut out);
    if out.is_empty() {
        out.push(error("", "invalid"));
    }
    out
}

fn error(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn pointer(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

fn number_text(v: &Value) -> String {
    v.as_number().map(js::json_number_to_string).unwrap_or_default()
}

/// Enum values as JSON, at most 20, then how many more.
fn list_values(values: &[Value]) -> String {
    const LISTED: usize = 20;
    if values.len() <= LISTED {
        return js::stringify(&Value::Array(values.to_vec()));
    }
    let listed = js::stringify(&Value::Array(values[..LISTED].to_vec()));
    format!(
        "{}, ... and {} more]",
        &listed[..listed.len() - 1],
        values.len() - LISTED
    )
}

fn walk(v: &Validator, node: &Value, value: &Value, path: &str, out: &mut Vec<SchemaError>) {
    let Some(_nesting) = Nesting::enter() else {
        out.push(too_deep_schema(path));
        return;
    };
    let node = match node {
        Value::Bool(true) => return,
        Value::Bool(false) => {
            out.push(error(path, "no value is allowed here"));
            return;
        }
        Value::Object(node) => node,
        _ => return,
    };
    if v.check(&Value::Object(node.clone()), value) {
        return;
    }
    if let Some(t) = node.get("type")
        && !type_matches(t, value)
    {
        let names: Vec<&str> = match t {
            Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap_or("")).collect(),
            t => vec![t.as_str().unwrap_or("")],
        };
        out.push(error(
            path,
            format!("expected {}, got {}", names.join(" or "), js::type_name(value)),
        ));
        return;
    }
    if let Some(Value::Array(values)) = node.get("enum")
        && !values.iter().any(|e| js::deep_equal(e, value))
    {
        out.push(error(path, format!("expected one of {}", list_values(values))));
    }
    if let Some(c) = node.get("const")
        && !js::deep_equal(c, value)
    {
        out.push(error(path, format!("expected {}", js::stringify(c))));
    }
    match value {
        Value::String(s) => walk_string(v, node, s, path, out),
        Value::Number(_) => walk_number(node, js::as_f64(value).unwrap_or(f64::NAN), path, out),
        Value::Object(o) => walk_object(v, node, o, path, out),
        Value::Array(a) => walk_array(v, node, a, path, out),
        _ => {}
    }
    if let Some(Value::Array(all)) = node.get("allOf") {
        for s in all {
            walk(v, s, value, path, out);
        }
    }
    if let Some(Value::Array(any)) = node.get("anyOf") {
        walk_union(v, any, value, path, out, false);
    }
    if let Some(Value::Array(one)) = node.get("oneOf") {
        walk_union(v, one, value, path, out, true);
    }
    if let Some(not) = node.get("not")
        && v.check(not, value)
    {
        out.push(error(path, "must not match the schema in not"));
    }
    if let Some(condition) = node.get("if") {
        let branch = if v.check(condition, value) {
            node.get("then")
        } else {
            node.get("else")
        };
        if let Some(branch) = branch {
            walk(v, branch, value, path, out);
        }
    }
    if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
        match v.resolve(reference) {
            Some(target) => walk(v, target, value, path, out),
            None => out.push(error(path, format!("unresolved reference {reference}"))),
        }
    }
}

fn walk_string(v: &Validator, node: &Map<String, Value>, s: &str, path: &str, out: &mut Vec<SchemaError>) {
    let n = s.chars().count() as f64;
    if let Some(min) = node
        .get("minLength")
        .filter(|m| m.as_f64().is_some_and(|m| n < m))
    {
        out.push(error(
            path,
            format!("expected at least {} characters", number_text(min)),
        ));
    }
    if let Some(max) = node
        .get("maxLength")
        .filter(|m| m.as_f64().is_some_and(|m| n > m))
    {
        out.push(error(
            path,
            format!("expected at most {} characters", number_text(max)),
        ));
    }
    if let Some(pattern) = node.get("pattern").and_then(Value::as_str)
        && !v.matches(pattern, s)
    {
        out.push(error(path, format!("expected to match {pattern}")));
    }
}

fn walk_number(node: &Map<String, Value>, n: f64, path: &str, out: &mut Vec<SchemaError>) {
    type Fails = fn(f64, f64) -> bool;
    let rules: [(&str, &str, Fails); 5] = [
        ("minimum", "expected >= ", |n, m| n < m),
        ("maximum", "expected <= ", |n, m| n > m),
        ("exclusiveMinimum", "expected > ", |n, m| n <= m),
        ("exclusiveMaximum", "expected < ", |n, m| n >= m),
        ("multipleOf", "expected a multiple of ", |n, m| {
            !super::is_multiple(n, m)
        }),
    ];
    for (keyword, text, fails) in rules {
        if let Some(bound) = node.get(keyword)
            && bound.as_f64().is_some_and(|m| fails(n, m))
        {
            out.push(error(path, format!("{text}{}", number_text(bound))));
        }
    }
}

fn walk_object(
    v: &Validator,
    node: &Map<String, Value>,
    o: &Map<String, Value>,
    path: &str,
    out: &mut Vec<SchemaError>,
) {
    let empty = Map::new();
    let properties = node
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for k in node
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !o.contains_key(k) {
            out.push(error(&pointer(path, k), "missing"));
        }
    }
    for (k, s) in properties {
        if let Some(item) = o.get(k) {
            walk(v, s, item, &pointer(path, k), out);
        }
    }
    let patterns = node.get("patternProperties").and_then(Value::as_object);
    for (k, item) in o {
        let mut matched = properties.contains_key(k);
        for (p, s) in patterns.into_iter().flatten() {
            if v.matches(p, k) {
                matched = true;
                walk(v, s, item, &pointer(path, k), out);
            }
        }
        if !matched && let Some(additional) = node.get("additionalProperties") {
            if additional == &Value::Bool(false) {
                out.push(error(&pointer(path, k), "unknown field"));
            } else {
                walk(v, additional, item, &pointer(path, k), out);
            }
        }
        if let Some(names) = node.get("propertyNames")
            && !v.check(names, &Value::String(k.clone()))
        {
            out.push(error(&pointer(path, k), "invalid property name"));
        }
    }
    let count = o.len() as f64;
    if let Some(min) = node
        .get("minProperties")
        .filter(|m| m.as_f64().is_some_and(|m| count < m))
    {
        out.push(error(
            path,
            format!("expected at least {} properties", number_text(min)),
        ));
    }
    if let Some(max) = node
        .get("maxProperties")
        .filter(|m| m.as_f64().is_some_and(|m| count > m))
    {
        out.push(error(
            path,
            format!("expected at most {} properties", number_text(max)),
        ));
    }
    for (k, dependency) in dependencies(node) {
        if !o.contains_key(k) {
            continue;
        }
        match dependency {
            Value::Array(names) => {
                for r in names
                    .iter()
                    .filter_map(Value::as_str)
                    .filter(|r| !o.contains_key(*r))
                {
                    out.push(error(&pointer(path, r), format!("required when {k} is present")));
                }
            }
            schema => walk(v, schema, &Value::Object(o.clone()), path, out),
        }
    }
}

fn walk_array(v: &Validator, node: &Map<String, Value>, a: &[Value], path: &str, out: &mut Vec<SchemaError>) {
    let (prefix, rest) = item_schemas(node);
    for (i, item) in a.iter().enumerate() {
        if let Some(s) = prefix.get(i).or(rest) {
            walk(v, s, item, &format!("{path}/{i}"), out);
        }
    }
    let n = a.len() as f64;
    if let Some(min) = node.get("minItems").filter(|m| m.as_f64().is_some_and(|m| n < m)) {
        out.push(error(
            path,
            format!("expected at least {} items", number_text(min)),
        ));
    }
    if let Some(max) = node.get("maxItems").filter(|m| m.as_f64().is_some_and(|m| n > m)) {
        out.push(error(
            path,
            format!("expected at most {} items", number_text(max)),
        ));
    }
    if node.get("uniqueItems") == Some(&Value::Bool(true)) && !unique(a) {
        out.push(error(path, "expected unique items"));
    }
    if let Some(contains) = node.get("contains") {
        let (min, max) = contains_bounds(node);
        let hits = a.iter().filter(|item| v.check(contains, item)).count() as f64;
        if hits < min || hits > max {
            let message = if max.is_infinite() {
                format!(
                    "expected at least {min} matching {}",
                    if min == 1.0 { "item" } else { "items" }
                )
            } else if min == 0.0 {
                format!(
                    "expected at most {max} matching {}",
                    if max == 1.0 { "item" } else { "items" }
                )
            } else {
                format!("expected between {min} and {max} matching items")
            };
            out.push(error(path, message));
        }
    }
}

fn walk_union(
    v: &Validator,
    branches: &[Value],
    value: &Value,
    path: &str,
    out: &mut Vec<SchemaError>,
    one: bool,
) {
    let matches = branches.iter().filter(|s| v.check(s, value)).count();
    if matches == 1 || (!one && matches > 0) {
        return;
    }
    if matches > 1 {
        out.push(error(path, "matches more than one alternative"));
        return;
    }
    // A tagged union reports the branch its tag selects.
    if let Some((key, values)) = tag_of(v, branches)
        && let Value::Object(o) = value
    {
        match values
            .iter()
            .position(|t| o.get(&key).is_some_and(|x| js::deep_equal(t, x)))
        {
            Some(i) => walk(v, &branches[i], value, path, out),
            None => out.push(error(
                &pointer(path, &key),
                format!("expected one of {}", list_values(&values)),
            )),
        }
        return;
    }
    // Otherwise the branch that declares most of the object's keys, then the one whose first error is deepest.
    let mut best: Option<(Vec<SchemaError>, usize)> = None;
    for s in branches {
        let mut errors = Vec::new();
        walk(v, s, value, path, &mut errors);
        if errors.is_empty() {
            continue;
        }
        let declared = match value {
            Value::Object(o) => declared_keys(v, s, o),
            _ => 0,
        };
        let better = match &best {
            None => true,
            Some((e, d)) => declared > *d || (declared == *d && errors[0].path.len() > e[0].path.len()),
        };
        if better {
            best = Some((errors, declared));
        }
    }
    match best {
        Some((errors, _)) => out.extend(errors),
        None => out.push(error(path, "matches no alternative")),
    }
}

fn resolved<'a>(v: &'a Validator, s: &'a Value) -> Option<&'a Value> {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => v.resolve(r),
        None => Some(s),
    }
}

fn declared_keys(v: &Validator, s: &Value, o: &Map<String, Value>) -> usize {
    let properties = resolved(v, s)
        .and_then(|n| n.get("properties"))
        .and_then(Value::as_object);
    properties.map_or(0, |p| o.keys().filter(|k| p.contains_key(*k)).count())
}

/// The discriminating property of a union: one whose `const` is a distinct primitive in every branch.
fn tag_of(v: &Validator, branches: &[Value]) -> Option<(String, Vec<Value>)> {
    let nodes: Vec<Option<&Value>> = branches.iter().map(|s| resolved(v, s)).collect();
    let first = nodes.first().copied().flatten()?.get("properties")?.as_object()?;
    for key in first.keys() {
        let values: Option<Vec<Value>> = nodes
            .iter()
            .map(|n| {
                let c = n
                    .and_then(|n| n.get("properties"))
                    .and_then(|p| p.get(key))
                    .and_then(|t| t.get("const"));
                c.filter(|c| !c.is_object() && !c.is_array()).cloned()
            })
            .collect();
        if let Some(values) = values {
            let distinct = values
                .iter()
                .enumerate()
                .all(|(i, a)| values[i + 1..].iter().all(|b| a != b));
            if distinct {
                return Some((key.clone(), values));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
