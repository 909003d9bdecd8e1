//! Conversions between the generated WIT types and the host's own types. JSON-by-nature values cross as text
//! and are parsed here; a plugin that sends malformed JSON gets an error naming the field.

use serde_json::Value;
use toolwright_sdk::{
    Capability, CapabilityRequest, Content, Cost, EmbeddedResource, ExecutionMode, Exposure, Loadout,
    LoadoutChanges, LoadoutTool, PluginMetadata, ResourceBody, ToolAnnotations, ToolNamespace, ToolSpec,
    Usage,
};

use super::bindings::types as wit;
use toolwright_core::types::ToolResult;

/// `text` parsed, unless it is too large to parse ([`within_values`]).
fn json(field: &str, text: &str) -> Result<Value, String> {
    within_values(field, text)?;
    serde_json::from_str(text).map_err(|e| format!("`{field}` is not JSON: {e}"))
}

/// An error for a JSON text from a plugin that holds more values than the host parses
/// ([`super::budget::MAX_JSON_VALUES`]), counted before parsing.
pub(crate) fn within_values(field: &str, text: &str) -> Result<(), String> {
    use super::budget::{MAX_JSON_VALUES, json_values};
    if json_values(text) > MAX_JSON_VALUES {
        return Err(format!(
            "`{field}` holds more than {MAX_JSON_VALUES} JSON values, the most the host parses from a plugin"
        ));
    }
    Ok(())
}

fn json_opt(field: &str, text: Option<String>) -> Result<Option<Value>, String> {
    text.map(|t| json(field, &t)).transpose()
}

/// A plugin's result as the host's.
pub fn result_from_wit(r: wit::ToolResult) -> Result<ToolResult, String> {
    Ok(ToolResult {
        content: r
            .content
            .into_iter()
            .map(content_from_wit)
            .collect::<Result<_, _>>()?,
        details: json_opt("details", r.details)?,
        structured_content: json_opt("structured-content", r.structured_content)?,
        usage: r.usage.map(usage_from_wit),
        is_error: r.is_error,
        terminate: r.terminate,
    })
}

/// The host's result as the plugin's.
pub fn result_to_wit(r: &ToolResult) -> wit::ToolResult {
    wit::ToolResult {
        content: r.content.iter().map(content_to_wit).collect(),
        details: r.details.as_ref().map(Value::to_string),
        structured_content: r.structured_content.as_ref().map(Value::to_string),
        usage: r.usage.as_ref().map(usage_to_wit),
        is_error: r.is_error,
        terminate: r.terminate,
    }
}

/// Whether `data` is base64 as a whole decode would take it, decoded a slice at a time into a buffer of 12 KiB
/// and thrown away: no allocation the size of the blob, and as fast (docs/performance.md, "A wasm call"). Slices of a multiple of 4 characters decode alone exactly as within the whole, but
/// for padding, which only the last quantum of the whole may have: a slice before the last that ends with it, and
/// data of a length not a multiple of 4, are decoded whole (for the whole's error).
fn check_base64(data: &str) -> Result<(), base64::DecodeError> {
    use base64::{DecodeError, DecodeSliceError, Engine as _};
    const SLICE: usize = 16 * 1024;
    let engine = &base64::engine::general_purpose::STANDARD;
    let bytes = data.as_bytes();
    let slices = bytes.len().div_ceil(SLICE);
    let padded_before_the_end = || {
        bytes
            .chunks(SLICE)
            .take(slices.saturating_sub(1))
            .any(|slice| slice.ends_with(b"="))
    };
    if !bytes.len().is_multiple_of(4) || padded_before_the_end() {
        return engine.decode(bytes).map(drop);
    }
    let mut buffer = [0u8; SLICE / 4 * 3];
    for (n, slice) in bytes.chunks(SLICE).enumerate() {
        engine.decode_slice(slice, &mut buffer).map_err(|e| match e {
            // An offset into the whole, not the slice.
            DecodeSliceError::DecodeError(DecodeError::InvalidByte(at, byte)) => {
                DecodeError::InvalidByte(n * SLICE + at, byte)
            }
            DecodeSliceError::DecodeError(DecodeError::InvalidLastSymbol(at, byte)) => {
                DecodeError::InvalidLastSymbol(n * SLICE + at, byte)
            }
            DecodeSliceError::DecodeError(other) => other,
            // A slice of 16 Ki characters is at most 12 KiB: the buffer's size.
            DecodeSliceError::OutputSliceTooSmall => DecodeError::InvalidLength(bytes.len()),
        })?;
    }
    Ok(())
}

/// A content block from a plugin. An image of any MIME type is taken as it is: the session's last hook
/// normalises every image as pi does after its hooks (`toolwright_native::builtins::normalize_images`: converted to
/// PNG when it can be decoded, kept when it cannot, refused with a note above the decoded-size limit); only data
/// that is not base64 at all is refused here.
/// Audio and a resource's bytes are checked the same way (base64, nothing more: the MIME type is the plugin's word).
fn content_from_wit(c: wit::Content) -> Result<Content, String> {
    let base64 =
        |what: &str, data: &str| check_base64(data).map_err(|e| format!("{what} is not valid base64: {e}"));
    match c {
        wit::Content::Text(text) => Ok(Content::Text { text }),
        wit::Content::Image(i) => {
            base64("an image's `data`", &i.data)?;
            Ok(Content::Image {
                data: i.data,
                mime_type: i.mime_type,
            })
        }
        wit::Content::Audio(a) => {
            base64("an audio block's `data`", &a.data)?;
            Ok(Content::Audio {
                data: a.data,
                mime_type: a.mime_type,
            })
        }
        wit::Content::Resource(r) => {
            let body = match r.body {
                wit::ResourceBody::Text(text) => ResourceBody::Text { text },
                wit::ResourceBody::Blob(blob) => {
                    base64(&format!("the `blob` of the resource {}", r.uri), &blob)?;
                    ResourceBody::Blob { blob }
                }
            };
            if r.uri.is_empty() {
                return Err("an embedded resource has no `uri`".into());
            }
            Ok(Content::Resource {
                resource: EmbeddedResource {
                    uri: r.uri,
                    mime_type: r.mime_type,
                    body,
                },
            })
        }
    }
}

fn content_to_wit(c: &Content) -> wit::Content {
    match c {
        Content::Text { text } => wit::Content::Text(text.clone()),
        Content::Image { data, mime_type } => wit::Content::Image(wit::Image {
            data: data.clone(),
            mime_type: mime_type.clone(),
        }),
        Content::Audio { data, mime_type } => wit::Content::Audio(wit::Audio {
            data: data.clone(),
            mime_type: mime_type.clone(),
        }),
        Content::Resource { resource } => wit::Content::Resource(wit::EmbeddedResource {
            uri: resource.uri.clone(),
            mime_type: resource.mime_type.clone(),
            body: match &resource.body {
                ResourceBody::Text { text } => wit::ResourceBody::Text(text.clone()),
                ResourceBody::Blob { blob } => wit::ResourceBody::Blob(blob.clone()),
            },
        }),
    }
}

fn usage_from_wit(u: wit::Usage) -> Usage {
    Usage {
        input: u.input,
        output: u.output,
        cache_read: u.cache_read,
        cache_write: u.cache_write,
        cache_write_1h: u.cache_write_1h,
        reasoning: u.reasoning,
        total_tokens: u.total_tokens,
        cost: Cost {
            input: u.cost.input,
            output: u.cost.output,
            cache_read: u.cost.cache_read,
            cache_write: u.cost.cache_write,
            total: u.cost.total,
            total_from_provider: u.cost.total_from_provider,
        },
    }
}

fn usage_to_wit(u: &Usage) -> wit::Usage {
    wit::Usage {
        input: u.input,
        output: u.output,
        cache_read: u.cache_read,
        cache_write: u.cache_write,
        cache_write_1h: u.cache_write_1h,
        reasoning: u.reasoning,
        total_tokens: u.total_tokens,
        cost: wit::Cost {
            input: u.cost.input,
            output: u.cost.output,
            cache_read: u.cost.cache_read,
            cache_write: u.cost.cache_write,
            total: u.cost.total,
            total_from_provider: u.cost.total_from_provider,
        },
    }
}

/// A plugin's tool declaration as the SDK's.
pub fn spec_from_wit(s: wit::ToolSpec) -> Result<ToolSpec, String> {
    let parameters = json("parameters", &s.parameters)?;
    if !parameters.is_object() {
        return Err(format!(
            "tool `{}` must define an object parameter schema",
            s.name
        ));
    }
    Ok(ToolSpec {
        parameters,
        output_schema: json_opt("output-schema", s.output_schema)?,
        constrained_sampling: json_opt("constrained-sampling", s.constrained_sampling)?,
        name: s.name,
        label: s.label,
        description: s.description,
        prompt_snippet: s.prompt_snippet,
        prompt_guidelines: s.prompt_guidelines,
        execution_mode: s.execution_mode.map(|m| match m {
            wit::ExecutionMode::Parallel => ExecutionMode::Parallel,
            wit::ExecutionMode::Sequential => ExecutionMode::Sequential,
        }),
        exposure: match s.exposure {
            wit::Exposure::Direct => Exposure::Direct,
            wit::Exposure::ModelOnly => Exposure::ModelOnly,
            wit::Exposure::Codemode => Exposure::Codemode,
            wit::Exposure::Deferred => Exposure::Deferred,
            wit::Exposure::Hidden => Exposure::Hidden,
        },
        annotations: s.annotations.map(|a| ToolAnnotations {
            read_only_hint: a.read_only,
            destructive_hint: a.destructive,
            idempotent_hint: a.idempotent,
            open_world_hint: a.open_world,
        }),
        namespace: s.namespace.map(|n| ToolNamespace {
            name: n.name,
            aliases: n.aliases,
            description: n.description,
            instructions: n.instructions,
        }),
        default_active: s.default_active,
        renders_own_frame: s.renders_own_frame,
        prepares_arguments: s.prepares_arguments,
        mutates_files: s.mutates_files,
        prepares_loadout: s.prepares_loadout,
        long_running: s.long_running,
    })
}

/// A tool as loadout hooks and nested callers see it, for a plugin.
pub fn tool_info_to_wit(t: &LoadoutTool) -> wit::ToolInfo {
    wit::ToolInfo {
        name: t.name.clone(),
        description: t.description.clone(),
        exposure: match t.exposure {
            Exposure::Direct => wit::Exposure::Direct,
            Exposure::ModelOnly => wit::Exposure::ModelOnly,
            Exposure::Codemode => wit::Exposure::Codemode,
            Exposure::Deferred => wit::Exposure::Deferred,
            Exposure::Hidden => wit::Exposure::Hidden,
        },
        namespace: t.namespace.as_ref().map(|n| wit::ToolNamespace {
            name: n.name.clone(),
            aliases: n.aliases.clone(),
            description: n.description.clone(),
            instructions: n.instructions.clone(),
        }),
        prompt_guidelines: t.prompt_guidelines.clone(),
        parameters: t.parameters.as_ref().map(Value::to_string),
        output_schema: t.output_schema.as_ref().map(Value::to_string),
    }
}

/// A loadout for a plugin's hook.
pub fn loadout_to_wit(l: &Loadout) -> wit::Loadout {
    let list = |tools: &[LoadoutTool]| tools.iter().map(tool_info_to_wit).collect();
    wit::Loadout {
        declared: list(&l.declared),
        callable: list(&l.callable),
        registered: list(&l.registered),
    }
}

/// A plugin's loadout changes as the SDK's (a description given twice: the last wins, as between hooks).
pub fn changes_from_wit(c: wit::LoadoutChanges) -> LoadoutChanges {
    let mut hidden_declarations: Vec<String> = Vec::new();
    for name in c.hidden_declarations {
        if !hidden_declarations.contains(&name) {
            hidden_declarations.push(name);
        }
    }
    LoadoutChanges {
        descriptions: c.descriptions.into_iter().collect(),
        hidden_declarations,
    }
}

/// A plugin's metadata as the SDK's.
pub fn metadata_from_wit(m: wit::PluginMetadata) -> PluginMetadata {
    PluginMetadata {
        name: m.name,
        version: m.version,
        description: m.description,
        capabilities: m
            .capabilities
            .into_iter()
            .map(|c| {
                let capability = match c.capability {
                    wit::Capability::Read(p) => Capability::Read(p),
                    wit::Capability::Write(p) => Capability::Write(p),
                    wit::Capability::Spawn(p) => Capability::Spawn(p),
                    wit::Capability::Env(v) => Capability::Env(v),
                    wit::Capability::Network(h) => Capability::Network(h),
                };
                CapabilityRequest {
                    capability,
                    reason: c.reason,
                }
            })
            .collect(),
    }
}

/// The size of a content block as it crossed from the plugin.
pub fn content_bytes(content: &wit::Content) -> usize {
    match content {
        wit::Content::Text(text) => text.len(),
        wit::Content::Image(image) => image.data.len() + image.mime_type.len(),
        wit::Content::Audio(audio) => audio.data.len() + audio.mime_type.len(),
        wit::Content::Resource(r) => {
            r.uri.len()
                + r.mime_type.as_ref().map_or(0, String::len)
                + match &r.body {
                    wit::ResourceBody::Text(text) | wit::ResourceBody::Blob(text) => text.len(),
                }
        }
    }
}

/// The size of a result as it crossed from the plugin: its texts, images and JSON texts.
pub fn result_bytes(result: &wit::ToolResult) -> usize {
    let content: usize = result.content.iter().map(content_bytes).sum();
    content
        + result.details.as_ref().map_or(0, String::len)
        + result.structured_content.as_ref().map_or(0, String::len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(details: Option<&str>, structured: Option<&str>) -> wit::ToolResult {
        wit::ToolResult {
            content: vec![wit::Content::Text("t".into())],
            details: details.map(str::to_owned),
            structured_content: structured.map(str::to_owned),
            usage: None,
            is_error: None,
            terminate: None,
        }
    }

    #[test]
    fn malformed_json_from_a_plugin_names_the_field() {
        let err = result_from_wit(result(Some("{not json"), None)).unwrap_err();
        assert_eq!(
            err,
            "`details` is not JSON: key must be a string at line 1 column 2"
        );
        let err = result_from_wit(result(None, Some("[1,"))).unwrap_err();
        assert!(err.starts_with("`structured-content` is not JSON: "), "{err}");
        assert!(result_from_wit(result(Some("{\"a\":1}"), Some("\"s\""))).is_ok());
    }

    fn image(data: &str, mime_type: &str) -> Result<ToolResult, String> {
        result_from_wit(wit::ToolResult {
            content: vec![wit::Content::Image(wit::Image {
                data: data.into(),
                mime_type: mime_type.into(),
            })],
            ..result(None, None)
        })
    }

    #[test]
    fn an_image_from_a_plugin_must_be_base64_of_any_type() {
        assert!(image("iVBORw0KGgo=", "image/png").is_ok());
        assert!(image("", "image/webp").is_ok());
        // Any type reaches the session's normalisation, which converts or keeps it as pi does.
        for mime in ["image/bmp", "image/svg+xml", "IMAGE/PNG", "image/x-foo"] {
            let result = image("iVBORw0KGgo=", mime).unwrap();
            assert_eq!(result.content, vec![Content::image("iVBORw0KGgo=", mime)]);
        }
        let err = image("not base64!", "image/jpeg").unwrap_err();
        assert!(
            err.starts_with("an image's `data` is not valid base64: "),
            "{err}"
        );
    }

    #[test]
    fn base64_is_checked_as_a_whole_decode_would() {
        use base64::Engine as _;
        let long = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 100_000]);
        let mut late = long.clone();
        late.replace_range(90_000..90_001, "!");
        // Padding at the end of the first slice: the end of that slice, not of the data.
        let mut padded = long.clone();
        padded.replace_range(16 * 1024 - 2..16 * 1024, "==");
        let cases = [
            "",
            "QQ==",
            "QQ",
            "QQ=",
            "QUI=",
            "QUJD",
            "QR==",
            "Q===",
            "====",
            "QUJD\n",
            " QUJD",
            "QUJD=",
            &long,
            &late,
            &padded,
            &long[..long.len() - 1],
        ];
        for case in cases {
            let whole = base64::engine::general_purpose::STANDARD.decode(case).map(drop);
            let checked = check_base64(case);
            let shown = &case[..case.len().min(12)];
            assert_eq!(checked.is_ok(), whole.is_ok(), "{shown:?}");
            if let (Err(checked), Err(whole)) = (&checked, &whole) {
                assert_eq!(
                    checked.to_string(),
                    whole.to_string(),
                    "the same error, at the same offset"
                );
            }
            assert_eq!(image(case, "image/png").is_ok(), whole.is_ok(), "{shown:?}");
        }
        // Every mark near the slices' boundaries and at the end: the same verdict and error as a whole decode.
        let boundaries = (16 * 1024 - 6..16 * 1024 + 6).chain(32 * 1024 - 6..32 * 1024 + 6);
        for at in boundaries.chain(long.len() - 6..long.len()) {
            for mark in ["=", "!", "-", "A"] {
                let mut marked = long.clone();
                marked.replace_range(at..at + 1, mark);
                let whole = base64::engine::general_purpose::STANDARD
                    .decode(&marked)
                    .map(drop);
                let checked = check_base64(&marked);
                assert_eq!(
                    checked.map_err(|e| e.to_string()),
                    whole.map_err(|e| e.to_string()),
                    "{mark} at {at}"
                );
            }
        }
    }

    #[test]
    fn a_tool_spec_needs_an_object_schema() {
        let spec = wit::ToolSpec {
            name: "t".into(),
            label: "t".into(),
            description: String::new(),
            parameters: "[]".into(),
            output_schema: None,
            prompt_snippet: None,
            prompt_guidelines: Vec::new(),
            constrained_sampling: None,
            execution_mode: None,
            exposure: wit::Exposure::Direct,
            annotations: None,
            namespace: None,
            default_active: None,
            renders_own_frame: false,
            prepares_arguments: false,
            mutates_files: false,
            prepares_loadout: false,
            long_running: None,
        };
        assert_eq!(
            spec_from_wit(spec).unwrap_err(),
            "tool `t` must define an object parameter schema"
        );
    }
}
