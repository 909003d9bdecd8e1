//! How pi's built-ins read arguments that no schema checked. pi does not validate a handler's rewrite again, so
//! a built-in can be handed anything; pi's tools then behave as their JavaScript does (destructuring, property
//! reads, `String(value)`, Node's type checks) and fail with those texts. The built-ins read their arguments
//! through these functions to fail the same way, and never fall back to a default that writes or lists more
//! than the call named.
//!
//! ```
//! use serde_json::json;
//! use toolwright_sdk::arguments;
//!
//! let args = json!({"content": "x"});
//! let error = arguments::path(&args, "path").unwrap_err();
//! assert_eq!(error.message(), "Cannot read properties of undefined (reading 'replace')");
//! assert_eq!(arguments::string(&json!([1, 2]), "command"), "undefined");
//! ```

use serde_json::Value;

use crate::{ToolError, js};

/// JavaScript's `const { first, … } = args`: only `null` throws (`undefined` cannot come from JSON). Other
/// non-objects destructure to missing properties, as in JavaScript.
pub fn destructure(args: &Value, first: &str) -> Result<(), ToolError> {
    match args {
        Value::Null => Err(ToolError::new(format!(
            "Cannot destructure property '{first}' of 'object null' as it is null."
        ))),
        _ => Ok(()),
    }
}

/// Arguments that must be a JSON object: `null` fails as pi's destructuring does, and an array, a string, a
/// number or a boolean is refused with a clear text. For the tools where pi would go on with every property
/// missing and do something the call never asked for (`bash` running `undefined`, `ls` listing the workspace,
/// `grep` searching for `undefined`); the schema never lets a model send such arguments, only a rewrite can.
pub fn object(tool: &str, args: &Value, first: &str) -> Result<(), ToolError> {
    destructure(args, first)?;
    match args {
        Value::Object(_) => Ok(()),
        other => Err(ToolError::new(format!(
            "The arguments of \"{tool}\" must be a JSON object, not {}",
            kind(other)
        ))),
    }
}

/// A path pi hands to `resolveToCwd(value)`: a string, or the `TypeError` that `value.replace(…)` throws.
pub fn path<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s),
        None => Err(ToolError::new(
            "Cannot read properties of undefined (reading 'replace')",
        )),
        Some(Value::Null) => Err(ToolError::new(
            "Cannot read properties of null (reading 'replace')",
        )),
        Some(_) => Err(ToolError::new("normalized.replace is not a function")),
    }
}

/// A path pi reads as `value || "."`: `None` for a falsy value (missing, `null`, `false`, `0`, `""`), the
/// string, or the `TypeError` of [`path`] for any other value.
pub fn optional_path<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null | Value::Bool(false)) => Ok(None),
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(_) => path(args, key).map(Some),
    }
}

/// JavaScript's `String(args[key])`: what pi passes on where it interpolates a value (`bash`'s command, `grep`'s
/// pattern): `"undefined"` when it is missing.
pub fn string(args: &Value, key: &str) -> String {
    args.get(key).map_or_else(|| "undefined".into(), to_string)
}

/// JavaScript's `String(value)` for a JSON value.
pub fn to_string(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => js::json_number_to_string(n),
        Value::String(s) => s.clone(),
        // Array.prototype.toString: elements joined by ",", null elements empty.
        Value::Array(items) => items
            .iter()
            .map(|v| if v.is_null() { String::new() } else { to_string(v) })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".into(),
    }
}

/// The `data` of Node's `fs.writeFile` (`write`'s content): a string, or Node's `ERR_INVALID_ARG_TYPE` text.
/// An array is refused too: Node would take it as an iterable of chunks (`[]` writes an empty file).
pub fn data<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    let received = match args.get(key) {
        Some(Value::String(s)) => return Ok(s),
        None => "undefined".to_owned(),
        Some(Value::Null) => "null".to_owned(),
        Some(Value::Array(_)) => "an instance of Array".to_owned(),
        Some(Value::Object(_)) => "an instance of Object".to_owned(),
        Some(Value::Bool(b)) => format!("type boolean ({b})"),
        Some(Value::Number(n)) => format!("type number ({})", js::json_number_to_string(n)),
    };
    Err(ToolError::new(format!(
        "The \"data\" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received {received}"
    )))
}

/// What kind of JSON value `value` is, in words (`an array`, `null`).
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn node_texts_for_write_data() {
        let text = |v: Value| {
            data(&json!({ "content": v }), "content")
                .unwrap_err()
                .message()
                .to_owned()
        };
        let prefix = "The \"data\" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received ";
        assert_eq!(
            data(&json!({}), "content").unwrap_err().message(),
            format!("{prefix}undefined")
        );
        assert_eq!(text(json!(null)), format!("{prefix}null"));
        assert_eq!(text(json!(5)), format!("{prefix}type number (5)"));
        assert_eq!(text(json!(1.5)), format!("{prefix}type number (1.5)"));
        assert_eq!(text(json!(true)), format!("{prefix}type boolean (true)"));
        assert_eq!(text(json!({})), format!("{prefix}an instance of Object"));
        assert_eq!(text(json!([])), format!("{prefix}an instance of Array"));
        assert_eq!(data(&json!({"content": ""}), "content").unwrap(), "");
    }

    #[test]
    fn javascript_string_and_paths() {
        assert_eq!(string(&json!({}), "command"), "undefined");
        assert_eq!(string(&json!("abc"), "command"), "undefined");
        assert_eq!(string(&json!({"command": ["echo", "hi"]}), "command"), "echo,hi");
        assert_eq!(
            string(&json!({"command": [null, 1, [2, 3]]}), "command"),
            ",1,2,3"
        );
        assert_eq!(
            string(&json!({"command": {"a": 1}}), "command"),
            "[object Object]"
        );
        assert_eq!(string(&json!({"command": 1.5e300}), "command"), "1.5e+300");
        assert_eq!(optional_path(&json!({"path": 0}), "path").unwrap(), None);
        assert_eq!(optional_path(&json!({"path": "a"}), "path").unwrap(), Some("a"));
        let err = optional_path(&json!({"path": 5}), "path").unwrap_err();
        assert_eq!(err.message(), "normalized.replace is not a function");
        let err = path(&json!({"path": null}), "path").unwrap_err();
        assert_eq!(
            err.message(),
            "Cannot read properties of null (reading 'replace')"
        );
        let err = object("ls", &json!(null), "path").unwrap_err();
        assert_eq!(
            err.message(),
            "Cannot destructure property 'path' of 'object null' as it is null."
        );
        let err = object("ls", &json!([1, 2, 3]), "path").unwrap_err();
        assert_eq!(
            err.message(),
            "The arguments of \"ls\" must be a JSON object, not an array"
        );
    }
}
