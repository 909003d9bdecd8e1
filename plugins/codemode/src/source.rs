//! The codemode source format (pi's `parseCodemodeSource`): JavaScript, optionally preceded by one
//! `// @options: {...}` line. Errors are pi's texts.

/// The prefix of the options line.
pub const OPTIONS_PREFIX: &str = "// @options:";
const SUPPORTED_FIELDS_TEXT: &str = "`max_output_tokens` and `timeout_ms`";
/// The largest `timeout_ms` (the largest delay `setTimeout` supports).
pub const MAX_TIMEOUT_MS: u64 = 2_147_483_647;
/// The largest safe integer of JavaScript.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Options of one script.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptOptions {
    /// The output budget in tokens (default 10000).
    pub max_output_tokens: Option<u64>,
    /// The script's own deadline.
    pub timeout_ms: Option<u64>,
}

/// A script and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// The JavaScript, without the options line (its newline kept, so line numbers stay).
    pub code: String,
    /// The options.
    pub options: ScriptOptions,
}

fn safe_integer(value: &serde_json::Value) -> Option<u64> {
    let n = value.as_f64()?;
    (n >= 0.0 && n.fract() == 0.0 && n <= MAX_SAFE_INTEGER).then_some(n as u64)
}

fn parse_options(directive: &str) -> Result<ScriptOptions, String> {
    let not_object =
        || format!("@options must be a JSON object with supported fields {SUPPORTED_FIELDS_TEXT}");
    if directive.is_empty() {
        return Err(not_object());
    }
    let value: serde_json::Value = serde_json::from_str(directive).map_err(|e| {
        format!("@options must be valid JSON with supported fields {SUPPORTED_FIELDS_TEXT}: {e}")
    })?;
    let fields = value.as_object().ok_or_else(not_object)?;
    if let Some(key) = fields
        .keys()
        .find(|k| *k != "max_output_tokens" && *k != "timeout_ms")
    {
        return Err(format!(
            "@options only supports {SUPPORTED_FIELDS_TEXT}; got `{key}`"
        ));
    }
    let mut options = ScriptOptions::default();
    if let Some(v) = fields.get("max_output_tokens") {
        options.max_output_tokens = Some(
            safe_integer(v)
                .ok_or("@options field `max_output_tokens` must be a non-negative safe integer")?,
        );
    }
    if let Some(v) = fields.get("timeout_ms") {
        match safe_integer(v) {
            Some(ms) if ms > 0 && ms <= MAX_TIMEOUT_MS => options.timeout_ms = Some(ms),
            _ => {
                return Err(format!(
                    "@options field `timeout_ms` must be a positive integer up to {MAX_TIMEOUT_MS}"
                ));
            }
        }
    }
    Ok(options)
}

/// Split the optional options line from the script.
pub fn parse(input: &str) -> Result<Script, String> {
    if input.trim().is_empty() {
        return Err(
            "Expected JavaScript source text (non-empty). Provide JS only, optionally with a first line \
                    `// @options: {\"max_output_tokens\": 1000}`."
                .into(),
        );
    }
    let lines: Vec<&str> = input.split('\n').collect();
    if let Some(misplaced) = lines
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, line)| line.trim_start().starts_with(OPTIONS_PREFIX))
        .map(|(i, _)| i)
    {
        return Err(format!(
            "The {OPTIONS_PREFIX} line must be the first line of the input; found one on line {}",
            misplaced + 1
        ));
    }
    let first = lines[0].strip_suffix('\r').unwrap_or(lines[0]).trim_start();
    let Some(directive) = first.strip_prefix(OPTIONS_PREFIX) else {
        return Ok(Script {
            code: input.to_owned(),
            options: ScriptOptions::default(),
        });
    };
    let code = input.find('\n').map_or("", |i| &input[i..]);
    if code.trim().is_empty() {
        return Err("The @options line must be followed by JavaScript source on subsequent lines".into());
    }
    Ok(Script {
        code: code.to_owned(),
        options: parse_options(directive.trim())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_line_and_its_errors_follow_pi() {
        let script = parse("// @options: {\"max_output_tokens\": 5, \"timeout_ms\": 100}\nreturn 1").unwrap();
        assert_eq!(script.code, "\nreturn 1");
        assert_eq!(script.options.max_output_tokens, Some(5));
        assert_eq!(script.options.timeout_ms, Some(100));
        assert_eq!(parse("return 2").unwrap().code, "return 2");
        assert!(
            parse("  \n")
                .unwrap_err()
                .starts_with("Expected JavaScript source text (non-empty).")
        );
        assert_eq!(
            parse("x\n// @options: {}").unwrap_err(),
            "The // @options: line must be the first line of the input; found one on line 2"
        );
        assert_eq!(
            parse("// @options: {}").unwrap_err(),
            "The @options line must be followed by JavaScript source on subsequent lines"
        );
        assert_eq!(
            parse("// @options: {\"x\": 1}\nx").unwrap_err(),
            "@options only supports `max_output_tokens` and `timeout_ms`; got `x`"
        );
        assert_eq!(
            parse("// @options: {\"timeout_ms\": 0}\nx").unwrap_err(),
            "@options field `timeout_ms` must be a positive integer up to 2147483647"
        );
        assert_eq!(
            parse("// @options: {\"max_output_tokens\": -1}\nx").unwrap_err(),
            "@options field `max_output_tokens` must be a non-negative safe integer"
        );
        assert_eq!(
            parse("// @options: []\nx").unwrap_err(),
            "@options must be a JSON object with supported fields `max_output_tokens` and `timeout_ms`"
        );
    }
}
