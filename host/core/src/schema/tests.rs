use super::*;
use serde_json::json;

#[test]
fn checks_common_keywords() {
    let v = Validator::new(json!({
        "type": "object",
        "required": ["path"],
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 0},
            "mode": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
        },
        "additionalProperties": false
    }))
    .unwrap();
    assert!(v.is_valid(&json!({"path": "x", "limit": 3.0, "mode": "a", "tags": ["p", "q"]})));
    assert!(!v.is_valid(&json!({"limit": 3})));
    assert!(!v.is_valid(&json!({"path": ""})));
    assert!(!v.is_valid(&json!({"path": "x", "limit": 1.5})));
    assert!(!v.is_valid(&json!({"path": "x", "mode": "c"})));
    assert!(!v.is_valid(&json!({"path": "x", "tags": ["p", "p"]})));
    assert!(!v.is_valid(&json!({"path": "x", "other": 1})));
}

#[test]
fn resolves_local_refs_and_refuses_dangling_ones() {
    let v = Validator::new(json!({
        "$defs": {"name": {"type": "string"}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/name"}}
    }))
    .unwrap();
    assert!(v.is_valid(&json!({"a": "x"})));
    assert!(!v.is_valid(&json!({"a": 1})));
    let dangling = Validator::new(json!({"properties": {"b": {"$ref": "#/$defs/missing"}}})).unwrap_err();
    assert_eq!(
        dangling,
        SchemaDefinitionError::Unresolved {
            at: "#/properties/b".into(),
            reference: "#/$defs/missing".into()
        }
    );
}

#[test]
fn self_references_are_refused_not_overflowed() {
    assert!(matches!(
        Validator::new(json!({"$ref": "#"})),
        Err(SchemaDefinitionError::Cycle { .. })
    ));
    let mutual = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"not": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"});
    assert!(matches!(
        Validator::new(mutual),
        Err(SchemaDefinitionError::Cycle { .. })
    ));
}

/// A value of `depth` nested arrays, built without recursion.
fn nested_arrays(depth: usize) -> Value {
    let mut v = json!([]);
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

/// Drops a deep value without recursion: serde_json's own drop would overflow the test's stack.
fn dismantle(mut v: Value) {
    while let Value::Array(mut items) = v {
        match items.pop() {
            Some(inner) => v = inner,
            None => break,
        }
    }
}

#[test]
fn deeply_nested_data_against_a_recursive_schema_is_an_error_not_a_crash() {
    let v = Validator::new(json!({"type": "array", "items": {"anyOf": [{"type": "string"}, {"$ref": "#"}]}}))
        .unwrap();
    let deep = nested_arrays(100_000);
    let errors = v.parse(&deep).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].display_path(), "root");
    assert_eq!(errors[0].message, "is nested more than 128 levels deep");
    assert!(!v.is_valid(&deep));
    dismantle(deep);
    // Within the bound, recursive data is checked, and explained, normally.
    let fine = nested_arrays(MAX_VALUE_DEPTH - 1);
    assert!(v.parse(&fine).is_ok());
    let mut bad = json!([1]);
    for _ in 0..MAX_VALUE_DEPTH - 2 {
        bad = Value::Array(vec![bad]);
    }
    assert!(v.parse(&bad).is_err());
}

#[test]
fn a_schema_applied_too_deeply_fails_closed_even_under_not() {
    // An acyclic chain of in-place references longer than the nesting bound.
    let mut defs = Map::new();
    for i in 0..MAX_NESTING {
        defs.insert(
            format!("d{i}"),
            json!({"allOf": [{"$ref": format!("#/$defs/d{}", i + 1)}]}),
        );
    }
    defs.insert(format!("d{MAX_NESTING}"), json!({"type": "string"}));
    let v = Validator::new(json!({"$defs": defs.clone(), "not": {"$ref": "#/$defs/d0"}})).unwrap();
    assert!(!v.is_valid(&json!(1)), "the bound must not turn a `not` open");
    let errors = v.parse(&json!(1)).unwrap_err();
    assert_eq!(
        errors[0].message,
        "is nested too deeply to check (more than 512 nested schema applications)"
    );
    // The check stops at the first failing member; the explainer walks them all, down the whole chain. On a
    // thread with tokio's default 2 MiB stack, in a debug build.
    let v = Validator::new(json!({"$defs": defs, "allOf": [{"type": "string"}, {"$ref": "#/$defs/d0"}]}))
        .unwrap();
    let errors = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || v.parse(&json!(1)).unwrap_err())
        .unwrap()
        .join()
        .unwrap();
    let messages: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
    assert!(
        messages.contains(&"is nested too deeply to check (more than 512 nested schema applications)"),
        "{messages:?}"
    );
}

#[test]
fn look_ahead_patterns_are_enforced() {
    let v = Validator::new(json!({
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^(?!evil)"}}
    }))
    .unwrap();
    assert!(v.is_valid(&json!({"name": "good"})));
    let errors = v.parse(&json!({"name": "evil plan"})).unwrap_err();
    assert_eq!(errors[0].display_path(), "name");
    assert!(errors[0].message.contains("^(?!evil)"), "{:?}", errors[0]);
}

#[test]
fn invalid_patterns_are_refused_with_the_reason() {
    let err = Validator::new(json!({"properties": {"a": {"pattern": "[b-a]"}}})).unwrap_err();
    assert!(matches!(err, SchemaDefinitionError::Pattern { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("the pattern \"[b-a]\" at #/properties/a/pattern does not compile: ")
    );
}
