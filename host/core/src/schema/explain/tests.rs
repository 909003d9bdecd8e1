use super::*;
use serde_json::json;

fn messages(schema: Value, value: Value) -> Vec<String> {
    let v = Validator::new(schema).unwrap();
    match v.parse(&value) {
        Ok(_) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|e| format!("{}: {}", e.display_path(), e.message))
            .collect(),
    }
}

#[test]
fn missing_then_declared_properties_in_schema_order() {
    let schema = json!({"type": "object", "required": ["path", "edits"], "properties": {
        "path": {"type": "string"},
        "edits": {"type": "array", "items": {"type": "object", "required": ["oldText", "newText"],
            "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}}}}}});
    assert_eq!(
        messages(schema.clone(), json!({})),
        ["path: missing", "edits: missing"]
    );
    assert_eq!(
        messages(schema, json!({"path": "a", "edits": {"oldText": "a"}})),
        ["edits.0.newText: missing"]
    );
}

#[test]
fn type_enum_and_bounds_messages() {
    let schema = json!({"type": "object", "properties": {
        "offset": {"type": "number", "minimum": 1}, "mode": {"enum": ["a", "b"]},
        "flag": {"type": "boolean"}, "s": {"type": "string", "maxLength": 2}}, "additionalProperties": false});
    assert_eq!(
        messages(schema.clone(), json!({"offset": "abc"})),
        ["offset: expected number, got string"]
    );
    assert_eq!(
        messages(schema.clone(), json!({"offset": [3]})),
        ["offset: expected number, got array"]
    );
    assert_eq!(
        messages(schema.clone(), json!({"offset": 0})),
        ["offset: expected >= 1"]
    );
    assert_eq!(
        messages(schema.clone(), json!({"mode": "c"})),
        [r#"mode: expected one of ["a","b"]"#]
    );
    assert_eq!(
        messages(schema.clone(), json!({"flag": "yes"})),
        ["flag: expected boolean, got string"]
    );
    assert_eq!(
        messages(schema.clone(), json!({"s": "abc"})),
        ["s: expected at most 2 characters"]
    );
    assert_eq!(messages(schema, json!({"x": 1})), ["x: unknown field"]);
    assert_eq!(
        messages(json!({"type": "object"}), json!([1])),
        ["root: expected object, got array"]
    );
}

#[test]
fn unions_blame_the_branch_that_declares_most_keys() {
    let schema = json!({"anyOf": [
        {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}},
        {"type": "object", "required": ["b", "c"], "properties": {"b": {"type": "string"}, "c": {"type": "string"}}}
    ]});
    assert_eq!(messages(schema, json!({"b": "x"})), ["c: missing"]);
}
