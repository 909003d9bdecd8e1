use super::*;
use serde_json::json;

fn coerced(schema: Value, value: Value) -> Value {
    coerce(&Validator::new(schema).unwrap(), &value)
}

#[test]
fn pi_rules_for_the_built_in_shapes() {
    let read = json!({"type": "object", "required": ["path"], "properties": {
        "path": {"type": "string"}, "offset": {"type": "number"}, "limit": {"type": "number"}}});
    assert_eq!(
        coerced(read.clone(), json!({"path": null})),
        json!({"path": "null"})
    );
    assert_eq!(coerced(read.clone(), json!({"path": 7})), json!({"path": "7"}));
    assert_eq!(
        coerced(read.clone(), json!({"path": true})),
        json!({"path": "true"})
    );
    assert_eq!(
        coerced(read.clone(), json!({"path": "a", "offset": null})),
        json!({"path": "a"})
    );
    assert_eq!(
        coerced(read.clone(), json!({"path": "a", "offset": "10"})),
        json!({"path": "a", "offset": 10})
    );
    assert_eq!(
        coerced(read.clone(), json!({"path": "a", "offset": true})),
        json!({"path": "a", "offset": 1})
    );
    assert_eq!(
        coerced(read.clone(), json!({"path": "a", "offset": "abc"})),
        json!({"path": "a", "offset": "abc"})
    );
    assert_eq!(
        coerced(read, json!({"path": "a", "offset": [3]})),
        json!({"path": "a", "offset": [3]})
    );
}

#[test]
fn booleans_integers_and_wrapping() {
    let schema = json!({"type": "object", "properties": {
        "flag": {"type": "boolean"}, "n": {"type": "integer"},
        "edits": {"type": "array", "items": {"type": "object", "properties": {"oldText": {"type": "string"}}}}}});
    assert_eq!(
        coerced(schema.clone(), json!({"flag": "TRUE"})),
        json!({"flag": true})
    );
    assert_eq!(coerced(schema.clone(), json!({"flag": 1})), json!({"flag": true}));
    assert_eq!(
        coerced(schema.clone(), json!({"flag": "yes"})),
        json!({"flag": "yes"})
    );
    assert_eq!(coerced(schema.clone(), json!({"n": "3.5"})), json!({"n": 3}));
    assert_eq!(coerced(schema.clone(), json!({"n": "12n"})), json!({"n": 12}));
    assert_eq!(
        coerced(schema.clone(), json!({"edits": "x"})),
        json!({"edits": ["x"]})
    );
    assert_eq!(
        coerced(schema, json!({"edits": {"oldText": 1}})),
        json!({"edits": [{"oldText": "1"}]})
    );
}

#[test]
fn required_nulls_stay_for_conversion_and_type_arrays_use_pass_three() {
    let schema = json!({"type": "object", "required": ["v"], "properties": {
        "v": {"type": "string"}, "t": {"type": ["integer", "null"]}}});
    assert_eq!(coerced(schema.clone(), json!({"v": null})), json!({"v": "null"}));
    assert_eq!(
        coerced(schema.clone(), json!({"v": "a", "t": "4"})),
        json!({"v": "a", "t": 4})
    );
    assert_eq!(
        coerced(schema, json!({"v": "a", "t": null})),
        json!({"v": "a", "t": null})
    );
}

#[test]
fn unions_take_the_first_branch_that_passes() {
    let schema = json!({"anyOf": [{"type": "number"}, {"type": "boolean"}]});
    assert_eq!(coerced(schema.clone(), json!("5")), json!(5));
    assert_eq!(coerced(schema, json!(true)), json!(true));
    let e = json!({"enum": [1, 2, "x"]});
    assert_eq!(coerced(e, json!("2")), json!(2));
}
