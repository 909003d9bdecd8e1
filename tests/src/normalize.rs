//! Normalisation of events before golden comparison: what differs between runs is masked, presence kept.

use serde_json::Value;

/// Mask `durationMs` and `timestamp` values (presence stays visible) and write whole floats as integers, so
/// `3.0` and `3` compare equal as the CLI contract allows.
pub fn event(mut e: Value) -> Value {
    if let Some(d) = e.get_mut("durationMs") {
        *d = Value::String("<ms>".into());
    }
    if let Some(message) = e.get_mut("message") {
        if let Some(d) = message.get_mut("durationMs") {
            *d = Value::String("<ms>".into());
        }
        if let Some(t) = message.get_mut("timestamp") {
            *t = Value::String("<ts>".into());
        }
    }
    integers(e)
}

/// Whole floats as integers, recursively.
pub fn integers(v: Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(integers).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, integers(v))).collect()),
        v => v,
    }
}
