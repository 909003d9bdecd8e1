//! URI text as pi's JavaScript reads it: [`decode_component`] (`decodeURIComponent`) and [`resolve_ref`], the
//! local JSON Schema `$ref` (a URI fragment holding a JSON pointer). One copy for the host's tool search, the
//! codemode plugin's declarations and [`paths`](crate::paths)' `file://` URLs.
//!
//! ```
//! use serde_json::json;
//! use toolwright_sdk::uri;
//!
//! assert_eq!(uri::decode_component("a%20b").as_deref(), Some("a b"));
//! assert_eq!(uri::decode_component("%zz"), None);
//! let schema = json!({"$defs": {"City": {"type": "string"}}});
//! assert_eq!(uri::resolve_ref("#/%24defs/City", &schema), schema.pointer("/$defs/City"));
//! ```

use serde_json::Value;

/// JavaScript's `decodeURIComponent`: every `%XX` escape decoded, `None` where it throws its `URIError` (a `%`
/// not followed by two hex digits, or escapes that are not UTF-8).
pub fn decode_component(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            // Two hex digits exactly: `from_str_radix` alone would also take a sign (`%+1`).
            let hex = bytes.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// pi-codemode's `resolveSchemaRef`: the subschema a local reference (`#`, `#/$defs/Item`) names in `root`
/// (an object or a boolean schema); `None` for remote references, malformed escapes and references that name
/// nothing.
pub fn resolve_ref<'a>(reference: &str, root: &'a Value) -> Option<&'a Value> {
    if reference != "#" && !reference.starts_with("#/") {
        return None;
    }
    let mut current = root;
    for segment in reference
        .get(2..)
        .unwrap_or("")
        .split('/')
        .filter(|s| !s.is_empty())
    {
        let key = decode_component(segment)?.replace("~1", "/").replace("~0", "~");
        current = current.as_object()?.get(&key)?;
    }
    (current.is_object() || current.is_boolean()).then_some(current)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What Node 20's `decodeURIComponent` answers for each text (`None`: it throws `URIError: URI malformed`).
    #[test]
    fn decodes_like_javascript() {
        let cases: [(&str, Option<&str>); 11] = [
            ("a%20b", Some("a b")),
            ("%C3%A9", Some("é")),
            ("%c3%a9", Some("é")),
            ("%2F%7e", Some("/~")),
            ("plain ü", Some("plain ü")),
            ("%zz", None),
            ("%e9", None),
            ("%a\u{e9}", None),
            ("a%4", None),
            ("%", None),
            ("%+1", None),
        ];
        for (text, decoded) in cases {
            assert_eq!(decode_component(text).as_deref(), decoded, "{text}");
        }
        // An encoded surrogate half is not UTF-8: JavaScript throws too.
        assert_eq!(decode_component("%ED%A0%80"), None);
    }

    #[test]
    fn resolves_local_references_only() {
        let schema = json!({
            "$defs": {"a/b": {"type": "string"}, "t~": true, "n": 5},
            "properties": {"x": {"type": "number"}}
        });
        assert_eq!(resolve_ref("#", &schema), Some(&schema));
        assert_eq!(resolve_ref("#/", &schema), Some(&schema));
        assert_eq!(
            resolve_ref("#/%24defs/a~1b", &schema),
            schema.pointer("/$defs/a~1b")
        );
        assert_eq!(resolve_ref("#/$defs/t~0", &schema), Some(&json!(true)));
        assert_eq!(resolve_ref("#/$defs/n", &schema), None);
        assert_eq!(resolve_ref("#/$defs/missing", &schema), None);
        assert_eq!(resolve_ref("#/%E0%A4%A", &schema), None);
        assert_eq!(resolve_ref("other.json#/$defs/n", &schema), None);
        assert_eq!(resolve_ref("#properties", &schema), None);
    }
}
