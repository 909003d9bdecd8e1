//! What the model sees of a result's blocks: pi's text and images. An audio block and an embedded resource (a
//! plugin's, `toolwright:plugin@0.2.0`) are shown as pi 1.6.0 shows an MCP server's: `[audio audio/wav omitted]`,
//! a resource's text, an image resource as the image (normalised as images are: the session's last hook), a
//! text-typed blob decoded; any other blob is named, not saved ([`shown`]). The MCP client of external servers
//! words their blocks the same way, and saves a binary one to a private temporary file as pi does ([`embedded`]). The result itself keeps its blocks: an MCP client of `toolwright mcp`, `tool_result` handlers
//! and scripts get them as the tool returned them.

use std::io::Write as _;
use std::path::PathBuf;

use base64::Engine as _;
use serde_json::Value;
use toolwright_sdk::truncate::format_size;
use toolwright_sdk::{Content, ResourceBody};

/// `content` as the model sees it: every block pi's own (text or image).
pub fn model_view(content: &[Content]) -> Vec<Content> {
    content.iter().map(shown).collect()
}

/// Whether every block of `content` is one the model sees as it is (text or image).
#[cfg(test)]
fn is_model_view(content: &[Content]) -> bool {
    content
        .iter()
        .all(|c| matches!(c, Content::Text { .. } | Content::Image { .. }))
}

/// One block as the model sees it. A binary resource is named (`[Binary resource URI (MIME, SIZE) omitted]`),
/// not saved to a file as the MCP client saves an external server's ([`embedded`]): a plugin (granted no
/// writes, perhaps) would otherwise have the host write whatever bytes it likes to disk on every call, kept
/// after the call, for a model that may never read them.
pub fn shown(c: &Content) -> Content {
    match c {
        Content::Text { .. } | Content::Image { .. } => c.clone(),
        Content::Audio { mime_type, .. } => Content::text(audio(Some(mime_type))),
        Content::Resource { resource } => {
            let (text, blob) = match &resource.body {
                ResourceBody::Text { text } => (Some(text.as_str()), None),
                ResourceBody::Blob { blob } => (None, Some(blob.as_str())),
            };
            embedded_parts(&resource.uri, resource.mime_type.as_deref(), text, blob, false)
        }
    }
}

/// pi's text for an audio block of MIME type `mime`.
pub fn audio(mime: Option<&str>) -> String {
    toolwright_sdk::audio_omitted(mime)
}

/// An embedded resource as MCP's JSON (also each content of `resources/read`).
pub fn embedded(resource: &Value) -> Content {
    let text = |key: &str| resource.get(key).and_then(Value::as_str);
    embedded_parts(
        text("uri").unwrap_or_default(),
        text("mimeType"),
        text("text"),
        text("blob"),
        true,
    )
}

fn embedded_parts(
    uri: &str,
    mime: Option<&str>,
    text: Option<&str>,
    blob: Option<&str>,
    save_blobs: bool,
) -> Content {
    if let Some(t) = text {
        return Content::text(t);
    }
    let Some(blob) = blob else {
        return Content::text("");
    };
    if let Some(mime) = mime.filter(|m| m.starts_with("image/")) {
        return Content::Image {
            data: blob.to_owned(),
            mime_type: mime.to_owned(),
        };
    }
    let bytes = match base64::engine::general_purpose::STANDARD.decode(blob) {
        Ok(bytes) => bytes,
        Err(e) => {
            return Content::text(format!(
                "[Binary resource {uri} ({}) could not be saved: {e}]",
                mime.unwrap_or("unknown type")
            ));
        }
    };
    if mime.is_some_and(is_text_mime) {
        return Content::text(String::from_utf8_lossy(&bytes));
    }
    if !save_blobs {
        return Content::text(format!(
            "[Binary resource {uri} ({}, {}) omitted]",
            mime.unwrap_or("unknown type"),
            format_size(bytes.len()),
        ));
    }
    let ext = extension(uri);
    match save(&bytes, &ext) {
        Ok(path) => Content::text(format!(
            "[Binary resource {uri} ({}, {}) saved to {}]",
            mime.unwrap_or("unknown type"),
            format_size(bytes.len()),
            path.display()
        )),
        Err(e) => Content::text(format!(
            "[Binary resource {uri} ({}) could not be saved: {e}]",
            mime.unwrap_or("unknown type")
        )),
    }
}

/// Whether a MIME type names text (pi's `isTextMimeType`).
fn is_text_mime(mime: &str) -> bool {
    let base = mime
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    base.starts_with("text/")
        || base == "application/json"
        || base.ends_with("+json")
        || base.ends_with("+xml")
}

/// The extension of a resource's path (`.bin` when it has none of 1 to 8 letters and digits).
fn extension(uri: &str) -> String {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rfind('.') {
        Some(at)
            if (2..=9).contains(&(name.len() - at))
                && name[at + 1..].chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            name[at..].to_owned()
        }
        _ => ".bin".to_owned(),
    }
}

/// Write `bytes` to a new private file `toolwright-mcp-<16 hex><ext>` in the temporary directory.
pub fn save(bytes: &[u8], ext: &str) -> std::io::Result<PathBuf> {
    let mut file = tempfile::Builder::new()
        .prefix("toolwright-mcp-")
        .suffix(ext)
        .rand_bytes(16)
        .tempfile()?;
    file.write_all(bytes)?;
    let (_, path) = file.keep().map_err(|e| e.error)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_and_resources_read_as_pi_shows_an_mcp_servers() {
        let content = vec![
            Content::text("one"),
            Content::audio("UklGRg==", "audio/wav"),
            Content::resource_text("test://t", Some("text/plain".into()), "embedded"),
            Content::resource_blob("test://j", Some("application/json".into()), "eyJhIjoxfQ=="),
            Content::resource_blob("test://p.png", Some("image/png".into()), "iVBOR"),
            Content::image("iVBOR", "image/png"),
        ];
        assert!(!is_model_view(&content));
        let seen = model_view(&content);
        assert!(is_model_view(&seen));
        assert_eq!(
            seen,
            vec![
                Content::text("one"),
                Content::text("[audio audio/wav omitted]"),
                Content::text("embedded"),
                Content::text("{\"a\":1}"),
                Content::image("iVBOR", "image/png"),
                Content::image("iVBOR", "image/png"),
            ]
        );
    }

    #[test]
    fn a_binary_resource_is_named_in_the_model_view_and_saved_from_an_mcp_server() {
        let named = shown(&Content::resource_blob("test://clip.ogg", None, "AAEC"));
        assert_eq!(
            named.as_text(),
            Some("[Binary resource test://clip.ogg (unknown type, 3B) omitted]")
        );
        let seen = [embedded(&serde_json::json!({
            "uri": "test://clip.ogg", "mimeType": "audio/ogg", "blob": "AAEC"
        }))];
        let text = seen[0].as_text().unwrap();
        assert!(
            text.starts_with("[Binary resource test://clip.ogg (audio/ogg, 3B) saved to "),
            "{text}"
        );
        let path = text.rsplit("saved to ").next().unwrap().trim_end_matches(']');
        assert!(path.ends_with(".ogg"), "{path}");
        assert_eq!(std::fs::read(path).unwrap(), [0, 1, 2]);
        std::fs::remove_file(path).unwrap();
        assert_eq!(extension("file:///r/a.tar.gz?x=1"), ".gz");
        assert_eq!(extension("file:///r/noext"), ".bin");
    }
}
