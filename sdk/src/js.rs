//! JavaScript value semantics that pi's texts depend on: how numbers print, how `+string` parses, how
//! `JSON.stringify(value, null, 2)` lays out a value, and deep equality where `1` equals `1.0`.

use serde_json::{Number, Value};

/// JavaScript's `string.length`: UTF-16 code units.
pub fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// JavaScript's `text.slice(0, units)` without splitting a character: the longest prefix of at most `units`
/// UTF-16 code units (a surrogate pair that would be split is left out whole).
pub fn utf16_prefix(text: &str, units: usize) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices() {
        if used + c.len_utf16() > units {
            return &text[..i];
        }
        used += c.len_utf16();
    }
    text
}

/// The longest suffix of at most `units` UTF-16 code units that does not split a character.
pub fn utf16_suffix(text: &str, units: usize) -> &str {
    let mut used = 0;
    for (i, c) in text.char_indices().rev() {
        if used + c.len_utf16() > units {
            return &text[i + c.len_utf8()..];
        }
        used += c.len_utf16();
    }
    text
}

/// JavaScript's `typeof`-like name of a JSON value, as pi-schema's explainer names it.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_whole(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether a JSON number is whole (`Number.isInteger`).
pub fn is_whole(n: &Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// A JSON value as a JavaScript number.
pub fn as_f64(v: &Value) -> Option<f64> {
    v.as_number().and_then(Number::as_f64)
}

/// A JSON number for a finite JavaScript number: whole numbers become integers, so they print as `3`, not `3.0`.
pub fn number(f: f64) -> Value {
    // 2^53: beyond it an f64 is not an exact integer any more, and JavaScript prints it in exponent form anyway.
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        Value::from(f as i64)
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// `String(n)` for a JavaScript number (ECMAScript `Number::toString`).
pub fn number_to_string(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if f == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` gives the shortest round-tripping digits, as ECMAScript requires; only the layout differs.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exp + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let sign = if n - 1 < 0 { '-' } else { '+' };
        let e = (n - 1).abs();
        if k == 1 {
            format!("{digits}e{sign}{e}")
        } else {
            format!("{}.{}e{sign}{e}", &digits[..1], &digits[1..])
        }
    };
    if f < 0.0 { format!("-{body}") } else { body }
}

/// `String(n)` for a JSON number.
pub fn json_number_to_string(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return number_to_string(u as f64);
    }
    number_to_string(n.as_f64().unwrap_or(f64::NAN))
}

/// JavaScript's unary `+` on a string: `Some` of the number, `None` where JavaScript gives `NaN`.
pub fn string_to_number(s: &str) -> Option<f64> {
    let t = s.trim_matches(is_js_whitespace);
    if t.is_empty() {
        return Some(0.0);
    }
    for (prefix, radix) in [("0x", 16), ("0X", 16), ("0o", 8), ("0O", 8), ("0b", 2), ("0B", 2)] {
        if let Some(rest) = t.strip_prefix(prefix) {
            if rest.is_empty() || !rest.chars().all(|c| c.is_digit(radix)) {
                return None;
            }
            return Some(rest.chars().fold(0.0, |acc, c| {
                acc * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
            }));
        }
    }
    match t {
        "Infinity" | "+Infinity" => return Some(f64::INFINITY),
        "-Infinity" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    // Rust also accepts "inf", "nan" and "infinity"; JavaScript accepts none of them.
    if !t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'))
    {
        return None;
    }
    t.parse::<f64>().ok()
}

fn is_js_whitespace(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

/// Deep equality as pi-schema's `enum`/`const`/`uniqueItems` checks see it: numbers compare by value.
pub fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| deep_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| deep_equal(v, w)))
        }
        _ => a == b,
    }
}

/// `JSON.stringify(value)`.
pub fn stringify(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v, None, 0);
    out
}

/// `JSON.stringify(value, null, 2)`.
pub fn stringify_pretty(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v, Some(2), 0);
    out
}

fn write_value(out: &mut String, v: &Value, indent: Option<usize>, depth: usize) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&json_number_to_string(n)),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                write_value(out, item, indent, depth + 1);
            }
            newline(out, indent, depth);
            out.push(']');
        }
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                write_string(out, k);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write_value(out, item, indent, depth + 1);
            }
            newline(out, indent, depth);
            out.push('}');
        }
    }
}

fn newline(out: &mut String, indent: Option<usize>, depth: usize) {
    if let Some(width) = indent {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', width * depth));
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn utf16_slices_never_split_a_character() {
        assert_eq!(utf16_len("a😀é"), 4);
        assert_eq!(utf16_prefix("abc", 2), "ab");
        assert_eq!(utf16_prefix("a😀b", 2), "a");
        assert_eq!(utf16_prefix("a😀b", 3), "a😀");
        assert_eq!(utf16_prefix("éé", 500), "éé");
        assert_eq!(utf16_suffix("a😀b", 2), "b");
        assert_eq!(utf16_suffix("a😀b", 3), "😀b");
        assert_eq!(utf16_suffix("ab", 9), "ab");
    }

    #[test]
    fn numbers_print_as_javascript_does() {
        let cases = [
            (1.0, "1"),
            (-0.0, "0"),
            (1.5, "1.5"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (123456.789, "123456.789"),
            (-2.5e30, "-2.5e+30"),
        ];
        for (f, want) in cases {
            assert_eq!(number_to_string(f), want, "{f}");
        }
    }

    #[test]
    fn unary_plus_on_strings() {
        assert_eq!(string_to_number("10"), Some(10.0));
        assert_eq!(string_to_number(" 5 "), Some(5.0));
        assert_eq!(string_to_number(""), Some(0.0));
        assert_eq!(string_to_number("0x10"), Some(16.0));
        assert_eq!(string_to_number("1e3"), Some(1000.0));
        assert_eq!(string_to_number("abc"), None);
        assert_eq!(string_to_number("inf"), None);
        assert_eq!(string_to_number("NaN"), None);
        assert_eq!(string_to_number("-0x10"), None);
    }

    #[test]
    fn pretty_stringify_matches_json_stringify() {
        let v = json!({"edits": [{"oldText": "a", "newText": "b"}], "n": 3.0, "e": {}, "l": []});
        assert_eq!(
            stringify_pretty(&v),
            "{\n  \"edits\": [\n    {\n      \"oldText\": \"a\",\n      \"newText\": \"b\"\n    }\n  ],\n  \"n\": 3,\n  \"e\": {},\n  \"l\": []\n}"
        );
        assert_eq!(stringify(&json!({"a": [1, "x\u{1}"]})), r#"{"a":[1,"x\u0001"]}"#);
    }

    #[test]
    fn deep_equal_compares_numbers_by_value() {
        assert!(deep_equal(&json!([1, {"a": 2}]), &json!([1.0, {"a": 2.0}])));
        assert!(!deep_equal(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }
}
