//! How pi's built-ins read arguments that no schema checked. pi does not validate a handler's rewrite again, so
//! a built-in can be handed anything; pi's tools then behave as their JavaScript does (destructuring, property
//! reads, `String(value)`, Node's type checks) and fail with those texts. The built-ins read their arguments as
//! a typed value ([`destructure`], [`object`]) whose fields fail the same way, and never fall back to a default
//! that writes or lists more than the call named: [`Unchecked`] for a value pi hands on as it came (a path, a
//! command, file data), [`lenient`] for an option the built-ins read only when it has its declared type.
//!
//! ```
//! use serde_json::json;
//! use toolwright_sdk::arguments::{self, Unchecked};
//!
//! #[derive(serde::Deserialize)]
//! struct Args {
//!     #[serde(default)]
//!     path: Unchecked,
//!     #[serde(default, deserialize_with = "arguments::lenient")]
//!     limit: Option<f64>,
//! }
//! let Args { path, limit } = arguments::destructure(json!({"content": "x", "limit": "5"}), "path").unwrap();
//! let error = path.path().unwrap_err();
//! assert_eq!(error.message(), "Cannot read properties of undefined (reading 'replace')");
//! assert_eq!(limit, None);
//! ```

use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde_json::{Map, Value};

use crate::{ToolError, js, paths};

/// JavaScript's `const { first, … } = args`, as a typed value: only `null` throws (`undefined` cannot come from
/// JSON). Other non-objects destructure to missing properties, as in JavaScript.
pub fn destructure<T: DeserializeOwned>(args: Value, first: &str) -> Result<T, ToolError> {
    match args {
        Value::Null => Err(ToolError::new(format!(
            "Cannot destructure property '{first}' of 'object null' as it is null."
        ))),
        args => fields(args),
    }
}

/// Arguments that must be a JSON object, as a typed value: `null` fails as pi's destructuring does, and an
/// array, a string, a number or a boolean is refused with a clear text. For the tools where pi would go on with
/// every property missing and do something the call never asked for (`bash` running `undefined`, `ls` listing
/// the workspace, `grep` searching for `undefined`); the schema never lets a model send such arguments, only a
/// rewrite can.
pub fn object<T: DeserializeOwned>(tool: &str, args: Value, first: &str) -> Result<T, ToolError> {
    match args {
        Value::Object(_) => fields(args),
        Value::Null => destructure(args, first),
        other => Err(ToolError::new(format!(
            "The arguments of \"{tool}\" must be a JSON object, not {}",
            kind(&other)
        ))),
    }
}

/// The properties JavaScript reads from `args` (`args.edits`), as a typed value: a value that is not an object
/// has none of them. The fields are [`Unchecked`] or [`lenient`], so no value a rewrite sends fails here.
pub fn fields<T: DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    match args {
        Value::Object(_) => crate::args(args),
        _ => crate::args(Value::Object(Map::new())),
    }
}

/// An option the built-ins read only when it has its declared type (`#[serde(default, deserialize_with =
/// "arguments::lenient")]` on an `Option<T>`): anything else counts as absent. A model's arguments were
/// validated (and coerced by pi's rules) before the call; only a rewrite can send another type, and reading it
/// as absent never does more than the call asked for.
pub fn lenient<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    Ok(serde_json::from_value(Value::deserialize(deserializer)?).ok())
}

/// A present option that JavaScript's `Number.isFinite` checks (`#[serde(default, deserialize_with =
/// "arguments::number")]` on an `Option<f64>`): a number, or NaN for anything else, which such a check refuses
/// (pi never converts it). Absent stays `None`.
pub fn number<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    Ok(Some(
        js::as_f64(&Value::deserialize(deserializer)?).unwrap_or(f64::NAN),
    ))
}

/// An argument as it came (`#[serde(default)]`: `None` when absent), read the way pi's JavaScript reads it at
/// the point where pi reads it, with pi's texts where that throws.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Unchecked(Option<Value>);

impl<'de> Deserialize<'de> for Unchecked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|value| Self(Some(value)))
    }
}

impl Unchecked {
    /// The value, `None` when it was absent.
    pub fn value(&self) -> Option<&Value> {
        self.0.as_ref()
    }

    /// The string pi calls `{variable}.replace(…)` on: the string, or the `TypeError` that call throws.
    pub fn receiver(&self, variable: &str) -> Result<&str, ToolError> {
        match &self.0 {
            Some(Value::String(s)) => Ok(s),
            None => Err(ToolError::new(
                "Cannot read properties of undefined (reading 'replace')",
            )),
            Some(Value::Null) => Err(ToolError::new(
                "Cannot read properties of null (reading 'replace')",
            )),
            Some(_) => Err(ToolError::new(format!("{variable}.replace is not a function"))),
        }
    }

    /// A path pi hands to `resolveToCwd(value)`: a string, or what that throws (the `TypeError` of
    /// `value.replace(…)`, the `URIError` of a malformed `file://` URL).
    pub fn path(&self) -> Result<&str, ToolError> {
        let path = self.receiver("normalized")?;
        paths::check(path)?;
        Ok(path)
    }

    /// A path pi reads as `value || "."`: `None` for a falsy value (missing, `null`, `false`, `0`, `""`), or
    /// what [`Unchecked::path`] reads for any other value.
    pub fn optional_path(&self) -> Result<Option<&str>, ToolError> {
        match &self.0 {
            None | Some(Value::Null | Value::Bool(false)) => Ok(None),
            Some(Value::Number(n)) if n.as_f64() == Some(0.0) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(_) => self.path().map(Some),
        }
    }

    /// JavaScript's `String(value)`: what pi passes on where it interpolates a value (`bash`'s command, `grep`'s
    /// pattern): `"undefined"` when it is missing.
    pub fn string(&self) -> String {
        self.0.as_ref().map_or_else(|| "undefined".into(), to_string)
    }

    /// The `data` of Node's `fs.writeFile` (`write`'s content): a string, or Node's `ERR_INVALID_ARG_TYPE`
    /// text. An array is refused too: Node would take it as an iterable of chunks (`[]` writes an empty file).
    pub fn data(&self) -> Result<&str, ToolError> {
        let received = match &self.0 {
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

    #[derive(Debug, serde::Deserialize)]
    struct Args {
        #[serde(default)]
        path: Unchecked,
        #[serde(default)]
        content: Unchecked,
        #[serde(default, deserialize_with = "lenient")]
        limit: Option<f64>,
        #[serde(default, deserialize_with = "lenient")]
        glob: Option<String>,
        #[serde(default, deserialize_with = "number")]
        timeout: Option<f64>,
    }

    fn content(args: Value) -> Unchecked {
        destructure::<Args>(args, "path").unwrap().content
    }

    #[test]
    fn node_texts_for_write_data() {
        let text = |v: Value| {
            content(json!({ "content": v }))
                .data()
                .unwrap_err()
                .message()
                .to_owned()
        };
        let prefix = "The \"data\" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received ";
        assert_eq!(
            content(json!({})).data().unwrap_err().message(),
            format!("{prefix}undefined")
        );
        assert_eq!(text(json!(null)), format!("{prefix}null"));
        assert_eq!(text(json!(5)), format!("{prefix}type number (5)"));
        assert_eq!(text(json!(1.5)), format!("{prefix}type number (1.5)"));
        assert_eq!(text(json!(true)), format!("{prefix}type boolean (true)"));
        assert_eq!(text(json!({})), format!("{prefix}an instance of Object"));
        assert_eq!(text(json!([])), format!("{prefix}an instance of Array"));
        assert_eq!(content(json!({"content": ""})).data().unwrap(), "");
    }

    #[test]
    fn javascript_string_and_paths() {
        let command = |args: Value| content(args).string();
        assert_eq!(command(json!({})), "undefined");
        assert_eq!(command(json!("abc")), "undefined");
        assert_eq!(command(json!({"content": ["echo", "hi"]})), "echo,hi");
        assert_eq!(command(json!({"content": [null, 1, [2, 3]]})), ",1,2,3");
        assert_eq!(command(json!({"content": {"a": 1}})), "[object Object]");
        assert_eq!(command(json!({"content": 1.5e300})), "1.5e+300");
        let path = |args: Value| destructure::<Args>(args, "path").unwrap().path;
        assert_eq!(path(json!({"path": 0})).optional_path().unwrap(), None);
        assert_eq!(path(json!({"path": "a"})).optional_path().unwrap(), Some("a"));
        let err = path(json!({"path": 5})).optional_path().unwrap_err();
        assert_eq!(err.message(), "normalized.replace is not a function");
        let err = path(json!({"path": null})).path().unwrap_err();
        assert_eq!(
            err.message(),
            "Cannot read properties of null (reading 'replace')"
        );
        let err = path(json!({"path": "file:///tmp/%zz"})).path().unwrap_err();
        assert_eq!(err.message(), "URI malformed");
        // A non-object destructures to missing properties, never positionally.
        let err = path(json!(["a.txt"])).path().unwrap_err();
        assert_eq!(
            err.message(),
            "Cannot read properties of undefined (reading 'replace')"
        );
        let err = destructure::<Args>(json!(null), "path").unwrap_err();
        assert_eq!(
            err.message(),
            "Cannot destructure property 'path' of 'object null' as it is null."
        );
        let err = object::<Args>("ls", json!(null), "path").unwrap_err();
        assert_eq!(
            err.message(),
            "Cannot destructure property 'path' of 'object null' as it is null."
        );
        let err = object::<Args>("ls", json!([1, 2, 3]), "path").unwrap_err();
        assert_eq!(
            err.message(),
            "The arguments of \"ls\" must be a JSON object, not an array"
        );
    }

    #[test]
    fn options_of_another_type_are_absent_and_timeouts_nan() {
        let args = |v: Value| object::<Args>("t", v, "path").unwrap();
        let read = args(json!({"limit": 7, "glob": "*.rs", "timeout": 5}));
        assert_eq!(
            (read.limit, read.glob.as_deref(), read.timeout),
            (Some(7.0), Some("*.rs"), Some(5.0))
        );
        let read = args(json!({"limit": "7", "glob": 5, "timeout": "5"}));
        assert_eq!((read.limit, read.glob), (None, None));
        assert!(read.timeout.is_some_and(f64::is_nan));
        assert!(args(json!({"timeout": null})).timeout.is_some_and(f64::is_nan));
        assert_eq!(args(json!({})).timeout, None);
    }
}
