//! Coercion of loosely typed model arguments, pi-schema's three passes:
//!
//! 1. optional nulls: a `null` in an optional property whose schema rejects null is dropped, as if omitted;
//! 2. conversion (TypeBox 1.3.27's `Value.Convert` rules, keyed on schema structure): `"10"` to 10 for a number,
//!    `null` to `"null"` for a string, a single value to a one-item array, the first union branch that passes;
//! 3. primitive coercion by `type` (Ajv's `coerceTypes`), for what pass 2 left, such as type arrays.
//!
//! A value that cannot be coerced is left as it is; the check reports it afterwards. The input is never modified.

use serde_json::{Map, Value};

use super::{Nesting, Validator};
use toolwright_sdk::js;

/// How deep a `$ref` or a single-value wrap may re-enter conversion; recursive schemas stop here.
const MAX_REENTRY: usize = 64;

/// `value` coerced towards the validator's schema.
pub(super) fn coerce(validator: &Validator, value: &Value) -> Value {
    let root = validator.schema();
    let without_nulls = drop_optional_nulls(validator, value, root);
    let converted = Converter {
        v: validator,
        depth: 0,
    }
    .convert(root, without_nulls);
    coerce_types(validator, converted, root)
}

// ---------------------------------------------------------------------------------------------------------------
// Pass 1: optional nulls
// ---------------------------------------------------------------------------------------------------------------

fn drop_optional_nulls(v: &Validator, value: &Value, schema: &Value) -> Value {
    let Some(_nesting) = Nesting::enter() else {
        return value.clone();
    };
    let Value::Object(node) = schema else {
        return value.clone();
    };
    match value {
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| match item_schema_at(node, i) {
                    Some(s) => drop_optional_nulls(v, item, s),
                    None => item.clone(),
                })
                .collect(),
        ),
        Value::Object(object) => {
            let empty = Map::new();
            let properties = node.get("properties").and_then(Value::as_object);
            let patterns = node.get("patternProperties").and_then(Value::as_object);
            let additional = node.get("additionalProperties").filter(|a| a.is_object());
            if properties.is_none() && patterns.is_none() && additional.is_none() {
                return value.clone();
            }
            let properties = properties.unwrap_or(&empty);
            let required: Vec<&str> = node
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut out = Map::new();
            for (key, item) in object {
                if let Some(property) = properties.get(key) {
                    let is_ref = property.get("$ref").is_some_and(Value::is_string);
                    if item.is_null()
                        && !required.contains(&key.as_str())
                        && !is_ref
                        && !v.check(property, &Value::Null)
                    {
                        continue;
                    }
                    out.insert(key.clone(), drop_optional_nulls(v, item, property));
                    continue;
                }
                let mut next = item.clone();
                let mut matched = false;
                for (pattern, s) in patterns.into_iter().flatten() {
                    if v.matches(pattern, key) {
                        matched = true;
                        next = drop_optional_nulls(v, &next, s);
                    }
                }
                if !matched && let Some(additional) = additional {
                    next = drop_optional_nulls(v, &next, additional);
                }
                out.insert(key.clone(), next);
            }
            Value::Object(out)
        }
        _ => value.clone(),
    }
}

/// The schema of an array item at `index`: a tuple's for its prefix, `items` after it.
fn item_schema_at(node: &Map<String, Value>, index: usize) -> Option<&Value> {
    match node.get("items") {
        Some(Value::Array(prefix)) => prefix.get(index),
        items => node
            .get("prefixItems")
            .and_then(Value::as_array)
            .and_then(|p| p.get(index))
            .or(items),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Pass 2: TypeBox's conversion rules
// ---------------------------------------------------------------------------------------------------------------

struct Converter<'a> {
    v: &'a Validator,
    depth: usize,
}

impl Converter<'_> {
    fn convert(&mut self, node: &Value, value: Value) -> Value {
        let Some(_nesting) = Nesting::enter() else {
            return value;
        };
        let Value::Object(map) = node else { return value };
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            return match self.v.resolve(reference) {
                Some(target) if target.is_object() => self.reenter(target, value),
                _ => value,
            };
        }
        self.convert_node(map, value)
    }

    fn reenter(&mut self, node: &Value, value: Value) -> Value {
        if self.depth >= MAX_REENTRY {
            return value;
        }
        self.depth += 1;
        let out = self.convert(node, value);
        self.depth -= 1;
        out
    }

    fn convert_node(&mut self, node: &Map<String, Value>, value: Value) -> Value {
        if let Some(literal) = node.get("const") {
            return convert_literal(literal, value);
        }
        if let Some(Value::Array(values)) = node.get("enum") {
            return self.convert_enum(node, values, value);
        }
        for union in ["anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = node.get(union) {
                return self.convert_union(node, branches, value);
            }
        }
        if let Some(Value::Array(members)) = node.get("allOf") {
            let mut next = value;
            for member in members {
                next = self.convert(member, next);
            }
            return self.convert_members(node, next);
        }
        match node.get("type").and_then(Value::as_str) {
            Some("string") => try_string(&value).unwrap_or(value),
            Some("number") => try_number(&value).map_or(value, js::number),
            Some("integer") => try_number(&value).map_or(value, |n| js::number(n.trunc())),
            Some("boolean") => try_boolean(&value).map_or(value, Value::Bool),
            Some("null") => try_null(&value).unwrap_or(value),
            Some("array") => self.convert_array(node, value),
            Some("object") => self.convert_object(node, value),
            None if node.contains_key("properties") || node.contains_key("patternProperties") => {
                self.convert_object(node, value)
            }
            None if node.contains_key("items") || node.contains_key("prefixItems") => {
                self.convert_array(node, value)
            }
            _ => value,
        }
    }

    fn convert_enum(&mut self, node: &Map<String, Value>, values: &[Value], value: Value) -> Value {
        if values.iter().any(|m| strict_equal(m, &value)) {
            return value;
        }
        let whole = Value::Object(node.clone());
        for member in values {
            let candidate = convert_literal(member, value.clone());
            if !strict_equal(&candidate, &value) && self.v.check(&whole, &candidate) {
                return candidate;
            }
        }
        value
    }

    fn convert_union(&mut self, node: &Map<String, Value>, branches: &[Value], value: Value) -> Value {
        if branches.iter().any(|b| self.v.check(b, &value)) {
            return self.convert_members(node, value);
        }
        let whole = Value::Object(node.clone());
        for branch in branches {
            let converted = self.convert(branch, value.clone());
            let candidate = self.convert_members(node, converted);
            if self.v.check(&whole, &candidate) {
                return candidate;
            }
        }
        self.convert_members(node, value)
    }

    fn convert_members(&mut self, node: &Map<String, Value>, value: Value) -> Value {
        let declares = ["properties", "patternProperties", "additionalProperties"]
            .iter()
            .any(|k| node.contains_key(*k));
        if declares {
            self.convert_object(node, value)
        } else {
            value
        }
    }

    fn convert_array(&mut self, node: &Map<String, Value>, value: Value) -> Value {
        let prefix = match node.get("items") {
            Some(Value::Array(p)) => Some((p, None)),
            items => node
                .get("prefixItems")
                .and_then(Value::as_array)
                .map(|p| (p, items)),
        };
        if let Some((prefix, rest)) = prefix {
            // A tuple converts its items and never wraps a single value.
            let Value::Array(items) = value else { return value };
            return Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| match prefix.get(i).or(rest) {
                        Some(s) => self.convert(s, item),
                        None => item,
                    })
                    .collect(),
            );
        }
        match (value, node.get("items")) {
            (Value::Array(items), Some(s)) => {
                Value::Array(items.into_iter().map(|i| self.convert(s, i)).collect())
            }
            (array @ Value::Array(_), None) => array,
            // The wrapped single value is converted by the item schema: a re-entry point.
            (single, Some(s)) if s.is_object() => Value::Array(vec![self.reenter(s, single)]),
            (single, _) => Value::Array(vec![single]),
        }
    }

    fn convert_object(&mut self, node: &Map<String, Value>, value: Value) -> Value {
        let Value::Object(object) = value else {
            return value;
        };
        let properties = node.get("properties").and_then(Value::as_object);
        let patterns = node.get("patternProperties").and_then(Value::as_object);
        let additional = node.get("additionalProperties").filter(|a| a.is_object());
        let mut out = Map::new();
        for (key, item) in object {
            let mut next = item;
            let mut matched = false;
            if let Some(s) = properties.and_then(|p| p.get(&key)) {
                matched = true;
                next = self.convert(s, next);
            }
            for (pattern, s) in patterns.into_iter().flatten() {
                if self.v.matches(pattern, &key) {
                    matched = true;
                    next = self.convert(s, next);
                }
            }
            if !matched && let Some(additional) = additional {
                next = self.convert(additional, next);
            }
            out.insert(key, next);
        }
        Value::Object(out)
    }
}

/// JavaScript `===` between JSON values: primitives by value, objects and arrays never equal.
fn strict_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => false,
        _ => js::deep_equal(a, b),
    }
}

/// A literal (`const`, an enum value) taken from a value of another type that converts exactly to it.
fn convert_literal(literal: &Value, value: Value) -> Value {
    if strict_equal(literal, &value) {
        return value;
    }
    let converted = match literal {
        Value::String(_) => try_string(&value),
        Value::Number(_) => try_number(&value).map(js::number),
        Value::Bool(_) => try_boolean(&value).map(Value::Bool),
        _ => None,
    };
    match converted {
        Some(c) if strict_equal(&c, literal) => c,
        _ => value,
    }
}

fn try_string(value: &Value) -> Option<Value> {
    match value {
        Value::Bool(b) => Some(Value::String(b.to_string())),
        Value::Number(n) => Some(Value::String(js::json_number_to_string(n))),
        Value::Null => Some(Value::String("null".into())),
        Value::String(_) => Some(value.clone()),
        _ => None,
    }
}

fn try_number(value: &Value) -> Option<f64> {
    match value {
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::Number(_) => js::as_f64(value),
        Value::Null => Some(0.0),
        Value::String(s) => {
            if let Some(n) = js::string_to_number(s).filter(|n| n.is_finite()) {
                return Some(n);
            }
            match s.to_lowercase().as_str() {
                "false" => Some(0.0),
                "true" => Some(1.0),
                _ => bigint_of_string(s),
            }
        }
        _ => None,
    }
}

/// TypeBox's bigint-like strings: `12n`, or `12.5` truncated; within JavaScript's safe integer range.
fn bigint_of_string(s: &str) -> Option<f64> {
    let body = s.strip_suffix('n').unwrap_or(s);
    let (int, frac) = body.split_once('.').map_or((body, None), |(i, f)| (i, Some(f)));
    let digits = int.strip_prefix('-').unwrap_or(int);
    let canonical = digits == "0" || (!digits.is_empty() && !digits.starts_with('0'));
    let is_digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    let valid = canonical
        && is_digits(digits)
        && match (s.ends_with('n'), frac) {
            (true, None) | (false, None) => true,
            (false, Some(f)) => is_digits(f),
            (true, Some(_)) => false,
        };
    let n: f64 = int.parse().ok().filter(|_| valid)?;
    (n.abs() <= 9_007_199_254_740_991.0).then_some(n)
}

fn try_boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(_) => match js::as_f64(value) {
            Some(0.0) => Some(false),
            Some(1.0) => Some(true),
            _ => None,
        },
        Value::Null => Some(false),
        Value::String(s) => match (s.to_lowercase().as_str(), s.as_str()) {
            ("false", _) | (_, "0") => Some(false),
            ("true", _) | (_, "1") => Some(true),
            _ => None,
        },
        _ => None,
    }
}

fn try_null(value: &Value) -> Option<Value> {
    let nullish = match value {
        Value::Bool(b) => !b,
        Value::Number(_) => js::as_f64(value) == Some(0.0),
        Value::Null => true,
        Value::String(s) => matches!(s.to_lowercase().as_str(), "undefined" | "null" | "" | "0"),
        _ => false,
    };
    nullish.then_some(Value::Null)
}

// ---------------------------------------------------------------------------------------------------------------
// Pass 3: primitive coercion by type
// ---------------------------------------------------------------------------------------------------------------

fn coerce_types(v: &Validator, value: Value, schema: &Value) -> Value {
    let Some(_nesting) = Nesting::enter() else {
        return value;
    };
    let Value::Object(node) = schema else { return value };
    let mut next = value;
    if let Some(Value::Array(members)) = node.get("allOf") {
        for member in members {
            next = coerce_types(v, next, member);
        }
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = node.get(union) {
            next = coerce_union(v, next, branches);
        }
    }
    let types: Vec<&str> = match node.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let matches_member = types.len() > 1 && types.iter().any(|t| super::is_type(t, &next));
    if !types.is_empty() && !matches_member {
        for t in &types {
            if let Some(candidate) = coerce_primitive(&next, t) {
                next = candidate;
                break;
            }
        }
    }
    if types.contains(&"object") && next.is_object() {
        next = coerce_properties(v, next, node);
    }
    if types.contains(&"array")
        && let Value::Array(items) = next
    {
        next = Value::Array(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| match item_schema_at(node, i) {
                    Some(s) if s.is_object() => coerce_types(v, item, s),
                    _ => item,
                })
                .collect(),
        );
    }
    next
}

fn coerce_union(v: &Validator, value: Value, branches: &[Value]) -> Value {
    if branches.iter().any(|b| v.check(b, &value)) {
        return value;
    }
    for branch in branches {
        let coerced = coerce_types(v, value.clone(), branch);
        if v.check(branch, &coerced) {
            return coerced;
        }
    }
    value
}

fn coerce_properties(v: &Validator, value: Value, node: &Map<String, Value>) -> Value {
    let Value::Object(object) = value else {
        return value;
    };
    let properties = node.get("properties").and_then(Value::as_object);
    let patterns = node.get("patternProperties").and_then(Value::as_object);
    let additional = node.get("additionalProperties").filter(|a| a.is_object());
    let mut out = Map::new();
    for (key, item) in object {
        let mut next = item;
        let mut matched = false;
        if let Some(s) = properties.and_then(|p| p.get(&key)) {
            matched = true;
            next = coerce_types(v, next, s);
        }
        for (pattern, s) in patterns.into_iter().flatten() {
            if v.matches(pattern, &key) {
                matched = true;
                next = coerce_types(v, next, s);
            }
        }
        if !matched && let Some(additional) = additional {
            next = coerce_types(v, next, additional);
        }
        out.insert(key, next);
    }
    Value::Object(out)
}

/// Ajv-style coercion of a primitive to `t`; `None` when nothing changes.
fn coerce_primitive(value: &Value, t: &str) -> Option<Value> {
    match (t, value) {
        ("number" | "integer", Value::Null) => Some(Value::from(0)),
        ("number" | "integer", Value::String(s)) if !s.trim().is_empty() => {
            let parsed = js::string_to_number(s)?;
            let ok = if t == "number" {
                parsed.is_finite()
            } else {
                parsed.is_finite() && parsed.fract() == 0.0
            };
            ok.then(|| js::number(parsed))
        }
        ("number" | "integer", Value::Bool(b)) => Some(Value::from(u8::from(*b))),
        ("boolean", Value::Null) => Some(Value::Bool(false)),
        ("boolean", Value::String(s)) if s == "true" => Some(Value::Bool(true)),
        ("boolean", Value::String(s)) if s == "false" => Some(Value::Bool(false)),
        ("boolean", Value::Number(_)) => match js::as_f64(value) {
            Some(1.0) => Some(Value::Bool(true)),
            Some(0.0) => Some(Value::Bool(false)),
            _ => None,
        },
        ("string", Value::Null) => Some(Value::String(String::new())),
        ("string", Value::Number(n)) => Some(Value::String(js::json_number_to_string(n))),
        ("string", Value::Bool(b)) => Some(Value::String(b.to_string())),
        ("null", Value::String(s)) if s.is_empty() => Some(Value::Null),
        ("null", Value::Bool(false)) => Some(Value::Null),
        ("null", Value::Number(_)) if js::as_f64(value) == Some(0.0) => Some(Value::Null),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
