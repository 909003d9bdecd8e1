//! Content blocks: what the model sees of a tool result.

use serde::{Deserialize, Serialize};

/// One block of a tool result's content: pi's `TextContent | ImageContent`.
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

    /// The text of a text block, `None` for an image.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text { text } => Some(text),
            Content::Image { .. } => None,
        }
    }
}
