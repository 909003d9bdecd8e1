//! Content blocks: what the model sees of a tool result.

use serde::{Deserialize, Serialize};

/// One block of a tool result's content: pi's `TextContent | ImageContent`, and MCP's audio and embedded
/// resources. The model sees pi's two kinds only: the host shows it an audio or resource block as pi shows an MCP
/// server's (`toolwright_core::model_view`), while an MCP client of `toolwright mcp`, a `tool_result` handler
/// and a script get the block itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Content {
    /// `{"type":"text","text":...}`
    Text {
        /// The text.
        text: String,
    },
    /// `{"type":"image","data":<base64>,"mimeType":...}`
    Image {
        /// Base64-encoded image bytes.
        data: String,
        /// The MIME type, for example `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// `{"type":"audio","data":<base64>,"mimeType":...}` (MCP's audio content).
    Audio {
        /// Base64-encoded audio bytes.
        data: String,
        /// The MIME type, for example `audio/wav`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// `{"type":"resource","resource":{"uri":...,"mimeType":...,"text"|"blob":...}}` (MCP's embedded resource).
    Resource {
        /// The resource.
        resource: EmbeddedResource,
    },
}

/// pi's text for an audio block of MIME type `mime` (`[audio audio/wav omitted]`).
pub fn audio_omitted(mime: Option<&str>) -> String {
    format!("[audio {} omitted]", mime.unwrap_or("undefined"))
}

/// A resource embedded in a result: its URI, MIME type and text or bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The resource's URI.
    pub uri: String,
    /// Its MIME type.
    #[serde(rename = "mimeType", default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its text or bytes.
    #[serde(flatten)]
    pub body: ResourceBody,
}

/// What an embedded resource holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ResourceBody {
    /// `"text"`: UTF-8 text.
    Text {
        /// The text.
        text: String,
    },
    /// `"blob"`: base64-encoded bytes.
    Blob {
        /// The bytes, base64-encoded.
        blob: String,
    },
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }

    /// An image block from base64 data and a MIME type.
    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Image {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An audio block from base64 data and a MIME type.
    pub fn audio(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Audio {
            data: data.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An embedded resource holding `text`.
    pub fn resource_text(uri: impl Into<String>, mime_type: Option<String>, text: impl Into<String>) -> Self {
        Content::Resource {
            resource: EmbeddedResource {
                uri: uri.into(),
                mime_type,
                body: ResourceBody::Text { text: text.into() },
            },
        }
    }

    /// An embedded resource holding bytes, given base64-encoded.
    pub fn resource_blob(
        uri: impl Into<String>,
        mime_type: Option<String>,
        base64: impl Into<String>,
    ) -> Self {
        Content::Resource {
            resource: EmbeddedResource {
                uri: uri.into(),
                mime_type,
                body: ResourceBody::Blob { blob: base64.into() },
            },
        }
    }

    /// The text of a text block, `None` for any other.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text { text } => Some(text),
            _ => None,
        }
    }

    /// The block's text as a reader of text sees it (the text of a result, a nested call's record, a script's
    /// outcome): a text block's, an embedded resource's text, and an audio block as pi words an MCP server's
    /// (`[audio audio/wav omitted]`); `None` for images and binary resources.
    pub fn text_view(&self) -> Option<std::borrow::Cow<'_, str>> {
        use std::borrow::Cow;
        match self {
            Content::Text { text } => Some(Cow::Borrowed(text)),
            Content::Audio { mime_type, .. } => Some(Cow::Owned(audio_omitted(Some(mime_type)))),
            Content::Resource { resource } => match &resource.body {
                ResourceBody::Text { text } => Some(Cow::Borrowed(text)),
                ResourceBody::Blob { .. } => None,
            },
            Content::Image { .. } => None,
        }
    }
}
