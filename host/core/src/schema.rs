//! Argument validation with pi's rules: the schema check, coercion of loosely typed model arguments, and error
//! explanations in pi-schema's words.
//!
//! pi validates tool arguments with its own `pi-schema` library: coerce (three passes, `coerce`), then check,
//! then explain each failing keyword (`explain`). The texts the model sees depend on every detail of those
//! steps, so they are reproduced here rather than delegated to a general JSON Schema crate whose messages differ.
//!
//! Supported keywords: `type` (also type arrays), `enum`, `const`, `properties`, `required`,
//! `additionalProperties`, `patternProperties`, `propertyNames`, `minProperties`, `maxProperties`,
//! `dependentRequired`, `dependentSchemas`, `dependencies`, `items`, `prefixItems`, `additionalItems`, `minItems`,
//! `maxItems`, `uniqueItems`, `contains`, `minContains`, `maxContains`, `minLength`, `maxLength`, `pattern`,
//! `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `allOf`, `anyOf`, `oneOf`, `not`,
//! `if`/`then`/`else`, and local `$ref`s (`#`, `#/json/pointer`, `$defs`). `format` is an annotation here
//! (pi checks the 2020-12 formats), and `unevaluated*` and `$dynamicRef` are not checked.
//!
//! A schema is checked once, by [`Validator::new`], for what the checks rely on (references resolve, patterns
//! compile, no reference loop that stays on one value); one the host cannot enforce is a
//! [`SchemaDefinitionError`], never a validator that accepts values open. Values are checked to a bounded depth
//! ([`MAX_VALUE_DEPTH`], [`MAX_NESTING`]), so no schema and no value can overflow the stack.

mod coerce;
mod compile;
mod explain;

use std::cell::Cell;

use serde_json::{Map, Value};
use toolwright_sdk::js;

pub use compile::SchemaDefinitionError;
pub use explain::SchemaError;

/// How deep a value may be nested (objects and arrays) to be checked at all. serde_json's parser refuses text
/// nested deeper than 128, so only a value an embedder builds in code reaches this; it keeps the coercion's
/// clones and the checks' recursion shallow whatever the schema.
pub const MAX_VALUE_DEPTH: usize = 128;

/// How many schema applications may be nested while one value is checked, coerced or explained: each level of
/// the value takes one to four (`properties`, a `$ref`, a branch, its target), so 128 levels fit. Measured in a
/// debug build, 1024 levels of the explainer need 0.5 to 1 MiB of stack; 512 keeps a quarter of a 2 MiB thread
/// stack (tokio's default) at most. Past it the value is refused: the check fails closed.
pub const MAX_NESTING: usize = 512;

/// A compiled argument schema: checks, coerces and explains values for one JSON Schema.
#[derive(Debug)]
pub struct Validator {
    root: Value,
    regexes: compile::Patterns,
}

impl Validator {
    /// A validator for `schema`, or why the host cannot enforce it: a `$ref` that does not resolve, a pattern
    /// that does not compile, a schema that refers to itself without descending into the value.
    pub fn new(schema: Value) -> Result<Self, SchemaDefinitionError> {
        let regexes = compile::compile(&schema)?;
        Ok(Validator {
            root: schema,
            regexes,
        })
    }

    /// The schema this validator checks.
    pub fn schema(&self) -> &Value {
        &self.root
    }

    /// pi-schema's `parse`: the value coerced towards the schema, then checked. `Ok` with the coerced value, or
    /// every failing keyword. A value nested too deeply (see [`MAX_VALUE_DEPTH`], [`MAX_NESTING`]) fails with
    /// one error saying so.
    pub fn parse(&self, value: &Value) -> Result<Value, Vec<SchemaError>> {
        if exceeds_depth(value, MAX_VALUE_DEPTH) {
            return Err(vec![too_deep_value()]);
        }
        let (checked, exceeded) = Nesting::measure(|| {
            let coerced = coerce::coerce(self, value);
            let valid = self.check(&self.root, &coerced);
            (coerced, valid)
        });
        match checked {
            _ if exceeded => Err(vec![too_deep_schema("")]),
            (coerced, true) => Ok(coerced),
            (coerced, false) => Err(explain::errors(self, &coerced)),
        }
    }

    /// Whether `value` is valid against the whole schema; a value nested too deeply is not.
    pub fn is_valid(&self, value: &Value) -> bool {
        if exceeds_depth(value, MAX_VALUE_DEPTH) {
            return false;
        }
        let (valid, exceeded) = Nesting::measure(|| self.check(&self.root, value));
        valid && !exceeded
    }

    /// The target of a local `$ref`, `None` when it names nothing.
    fn resolve(&self, reference: &str) -> Option<&Value> {
        compile::resolve(&self.root, reference)
    }

    /// Whether `text` matches the ECMAScript `pattern`. Every pattern was compiled with the schema; a match the
    /// engine gives up on (its backtracking limit) does not match, so the check fails closed.
    fn matches(&self, pattern: &str, text: &str) -> bool {
        self.regexes
            .get(pattern)
            .is_some_and(|r| r.is_match(text).unwrap_or(false))
    }

    /// The boolean check of `v` against the schema node `node`.
    fn check(&self, node: &Value, v: &Value) -> bool {
        let Some(_nesting) = Nesting::enter() else {
            return false;
        };
        let node = match node {
            Value::Bool(b) => return *b,
            Value::Object(node) => node,
            _ => return true,
        };
        if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            match self.resolve(reference) {
                Some(target) if self.check(target, v) => {}
                _ => return false,
            }
        }
        if let Some(t) = node.get("type")
            && !type_matches(t, v)
        {
            return false;
        }
        if let Some(Value::Array(values)) = node.get("enum")
            && !values.iter().any(|e| js::deep_equal(e, v))
        {
            return false;
        }
        if let Some(c) = node.get("const")
            && !js::deep_equal(c, v)
        {
            return false;
        }
        let kind_ok = match v {
            Value::String(s) => self.check_string(node, s),
            Value::Number(_) => check_number(node, js::as_f64(v).unwrap_or(f64::NAN)),
            Value::Object(o) => self.check_object(node, o),
            Value::Array(a) => self.check_array(node, a),
            _ => true,
        };
        kind_ok && self.check_combinators(node, v)
    }

    fn check_combinators(&self, node: &Map<String, Value>, v: &Value) -> bool {
        if let Some(Value::Array(all)) = node.get("allOf")
            && !all.iter().all(|s| self.check(s, v))
        {
            return false;
        }
        if let Some(Value::Array(any)) = node.get("anyOf")
            && !any.iter().any(|s| self.check(s, v))
        {
            return false;
        }
        if let Some(Value::Array(one)) = node.get("oneOf")
            && one.iter().filter(|s| self.check(s, v)).count() != 1
        {
            return false;
        }
        if let Some(not) = node.get("not")
            && self.check(not, v)
        {
            return false;
        }
        if let Some(condition) = node.get("if") {
            let branch = if self.check(condition, v) {
                node.get("then")
            } else {
                node.get("else")
            };
            if let Some(branch) = branch
                && !self.check(branch, v)
            {
                return false;
            }
        }
        true
    }

    fn check_string(&self, node: &Map<String, Value>, s: &str) -> bool {
        let n = s.chars().count() as f64;
        if let Some(min) = node.get("minLength").and_then(Value::as_f64)
            && n < min
        {
            return false;
        }
        if let Some(max) = node.get("maxLength").and_then(Value::as_f64)
            && n > max
        {
            return false;
        }
        if let Some(pattern) = node.get("pattern").and_then(Value::as_str)
            && !self.matches(pattern, s)
        {
            return false;
        }
        true
    }

    fn check_object(&self, node: &Map<String, Value>, o: &Map<String, Value>) -> bool {
        let empty = Map::new();
        let properties = node
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        if let Some(Value::Array(required)) = node.get("required")
            && required
                .iter()
                .filter_map(Value::as_str)
                .any(|k| !o.contains_key(k))
        {
            return false;
        }
        let patterns = node.get("patternProperties").and_then(Value::as_object);
        for (k, value) in o {
            let mut matched = false;
            if let Some(s) = properties.get(k) {
                matched = true;
                if !self.check(s, value) {
                    return false;
                }
            }
            for (p, s) in patterns.into_iter().flatten() {
                if self.matches(p, k) {
                    matched = true;
                    if !self.check(s, value) {
                        return false;
                    }
                }
            }
            if !matched
                && let Some(additional) = node.get("additionalProperties")
                && !self.check(additional, value)
            {
                return false;
            }
            if let Some(names) = node.get("propertyNames")
                && !self.check(names, &Value::String(k.clone()))
            {
                return false;
            }
        }
        let count = o.len() as f64;
        if node
            .get("minProperties")
            .and_then(Value::as_f64)
            .is_some_and(|m| count < m)
            || node
                .get("maxProperties")
                .and_then(Value::as_f64)
                .is_some_and(|m| count > m)
        {
            return false;
        }
        for (k, dependency) in dependencies(node) {
            if !o.contains_key(k) {
                continue;
            }
            let ok = match dependency {
                Value::Array(names) => names.iter().filter_map(Value::as_str).all(|r| o.contains_key(r)),
                schema => self.check(schema, &Value::Object(o.clone())),
            };
            if !ok {
                return false;
            }
        }
        true
    }

    fn check_array(&self, node: &Map<String, Value>, a: &[Value]) -> bool {
        let (prefix, rest) = item_schemas(node);
        for (i, item) in a.iter().enumerate() {
            let schema = prefix.get(i).or(rest);
            if let Some(schema) = schema
                && !self.check(schema, item)
            {
                return false;
            }
        }
        let n = a.len() as f64;
        if node
            .get("minItems")
            .and_then(Value::as_f64)
            .is_some_and(|m| n < m)
            || node
                .get("maxItems")
                .and_then(Value::as_f64)
                .is_some_and(|m| n > m)
        {
            return false;
        }
        if node.get("uniqueItems") == Some(&Value::Bool(true)) && !unique(a) {
            return false;
        }
        if let Some(contains) = node.get("contains") {
            let (min, max) = contains_bounds(node);
            let hits = a.iter().filter(|item| self.check(contains, item)).count() as f64;
            if hits < min || hits > max {
                return false;
            }
        }
        true
    }
}

thread_local! {
    /// The schema applications now nested on this thread, and whether a check ran into [`MAX_NESTING`].
    /// Checking, coercing and explaining call one another recursively; one counter bounds them all without
    /// threading a depth through every function. A check never awaits, so it never leaves its thread.
    static NESTING: Cell<(usize, bool)> = const { Cell::new((0, false)) };
}

/// One level of nested schema application, released on drop.
struct Nesting(());

impl Nesting {
    /// Enter one more level, or `None` (noted for [`Nesting::measure`]) past [`MAX_NESTING`].
    fn enter() -> Option<Nesting> {
        NESTING.with(|n| {
            let (depth, exceeded) = n.get();
            if depth >= MAX_NESTING {
                n.set((depth, true));
                return None;
            }
            n.set((depth + 1, exceeded));
            Some(Nesting(()))
        })
    }

    /// `f`'s result, and whether it ran into the limit anywhere: a limited check may have answered `false`
    /// under a `not`, so its result alone cannot be trusted then.
    fn measure<T>(f: impl FnOnce() -> T) -> (T, bool) {
        let before = NESTING.with(|n| {
            let (depth, exceeded) = n.get();
            n.set((depth, false));
            exceeded
        });
        let out = f();
        let exceeded = NESTING.with(|n| {
            let (depth, exceeded) = n.get();
            n.set((depth, before || exceeded));
            exceeded
        });
        (out, exceeded)
    }
}

impl Drop for Nesting {
    fn drop(&mut self) {
        NESTING.with(|n| {
            let (depth, exceeded) = n.get();
            n.set((depth.saturating_sub(1), exceeded));
        });
    }
}

/// Whether `value` has objects or arrays nested more than `limit` levels deep; iterative, for any depth.
fn exceeds_depth(value: &Value, limit: usize) -> bool {
    let mut work = vec![(value, 0)];
    while let Some((v, depth)) = work.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        if depth + 1 > limit {
            return true;
        }
        work.extend(children.map(|c| (c, depth + 1)));
    }
    false
}

fn too_deep_value() -> SchemaError {
    SchemaError {
        path: String::new(),
        message: format!("is nested more than {MAX_VALUE_DEPTH} levels deep"),
    }
}

/// The error at `path` for a value whose check ran into [`MAX_NESTING`].
fn too_deep_schema(path: &str) -> SchemaError {
    SchemaError {
        path: path.to_owned(),
        message: format!(
            "is nested too deeply to check (more than {MAX_NESTING} nested schema applications)"
        ),
    }
}

/// Whether `v` has one of the types the `type` keyword names.
fn type_matches(t: &Value, v: &Value) -> bool {
    match t {
        Value::String(t) => is_type(t, v),
        Value::Array(ts) => ts.iter().any(|t| t.as_str().is_some_and(|t| is_type(t, v))),
        _ => false,
    }
}

/// Whether `v` is of the JSON Schema type `t`.
pub(crate) fn is_type(t: &str, v: &Value) -> bool {
    match t {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.as_number().is_some_and(js::is_whole),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

fn check_number(node: &Map<String, Value>, v: f64) -> bool {
    let bound = |k: &str| node.get(k).and_then(Value::as_f64);
    !(bound("minimum").is_some_and(|m| v < m)
        || bound("maximum").is_some_and(|m| v > m)
        || bound("exclusiveMinimum").is_some_and(|m| v <= m)
        || bound("exclusiveMaximum").is_some_and(|m| v >= m)
        || bound("multipleOf").is_some_and(|m| !is_multiple(v, m)))
}

/// Whether `v` is a multiple of `m`, tolerant of binary fractions (`0.3` is a multiple of `0.1`).
fn is_multiple(v: f64, m: f64) -> bool {
    if m <= 0.0 {
        return false;
    }
    let q = v / m;
    (q - q.round()).abs() < 1e-9
}

/// The prefix (tuple) item schemas and the schema for the rest of an array.
fn item_schemas(node: &Map<String, Value>) -> (&[Value], Option<&Value>) {
    match node.get("items") {
        Some(Value::Array(prefix)) => (prefix, node.get("additionalItems")),
        items => {
            let prefix = node
                .get("prefixItems")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            (prefix, items)
        }
    }
}

fn contains_bounds(node: &Map<String, Value>) -> (f64, f64) {
    let min = node.get("minContains").and_then(Value::as_f64).unwrap_or(1.0);
    let max = node
        .get("maxContains")
        .and_then(Value::as_f64)
        .unwrap_or(f64::INFINITY);
    (min, max)
}

fn dependencies(node: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    ["dependentRequired", "dependencies", "dependentSchemas"]
        .into_iter()
        .filter_map(|k| node.get(k).and_then(Value::as_object))
        .flatten()
}

fn unique(a: &[Value]) -> bool {
    a.iter()
        .enumerate()
        .all(|(i, x)| a[i + 1..].iter().all(|y| !js::deep_equal(x, y)))
}

#[cfg(test)]
mod tests;
