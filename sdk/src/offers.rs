//! MCP resources and prompts a plugin offers beside its tools (the `offers` export of `wit/plugin.wit`):
//! implement [`Offers`] and add `export_offers!` next to `export_tool!`. `toolwright mcp` serves them to its
//! clients; each method runs in the plugin's sandbox under its grants, in a fresh instance, as its tools do.
//!
//! ```
//! use toolwright_sdk::{Contents, FilledPrompt, OfferError, Offers, Prompt, PromptMessage, Resource, ResourceContents};
//!
//! struct Notes;
//!
//! impl Offers for Notes {
//!     fn resources(&self) -> Vec<Resource> {
//!         vec![Resource::new("notes://today", "today").with_mime_type("text/markdown")]
//!     }
//!     fn read(&self, uri: &str) -> Result<Vec<ResourceContents>, OfferError> {
//!         match uri {
//!             "notes://today" => Ok(vec![ResourceContents::text(uri, "# Today\n").with_mime_type("text/markdown")]),
//!             _ => Err(OfferError::NotFound),
//!         }
//!     }
//!     fn prompts(&self) -> Vec<Prompt> {
//!         vec![Prompt::new("summarise").with_argument("topic", "what to summarise", true)]
//!     }
//!     fn prompt(&self, name: &str, arguments: &[(String, String)]) -> Result<FilledPrompt, OfferError> {
//!         let topic = arguments.iter().find(|(k, _)| k == "topic").map_or("", |(_, v)| v.as_str());
//!         match name {
//!             "summarise" => Ok(FilledPrompt::new(vec![PromptMessage::user_text(format!("Summarise {topic}."))])),
//!             _ => Err(OfferError::NotFound),
//!         }
//!     }
//! }
//! # assert_eq!(Notes.read("notes://today").unwrap()[0].contents, Contents::Text("# Today\n".into()));
//! ```

use serde_json::{Value, json};

/// A resource, or a resource template (`uri` is then an RFC 6570 template such as `notes://day/{date}`). `file:`
/// URIs are the workspace's: the host leaves a plugin's out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Resource {
    /// The URI (or template).
    pub uri: String,
    /// A name for people and models.
    pub name: String,
    /// A title for a UI.
    pub title: Option<String>,
    /// What it holds.
    pub description: Option<String>,
    /// Its MIME type.
    pub mime_type: Option<String>,
    /// Its size in bytes, when known.
    pub size: Option<u64>,
}

impl Resource {
    /// The resource (or template) at `uri`, called `name`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Resource {
            uri: uri.into(),
            name: name.into(),
            ..Default::default()
        }
    }

    /// With a title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// With a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// With a MIME type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// With its size in bytes.
    pub fn with_size(mut self, size: u64) -> Self {
        self.size = Some(size);
        self
    }
}

/// What a resource holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contents {
    /// UTF-8 text.
    Text(String),
    /// Bytes (sent base64-encoded).
    Blob(Vec<u8>),
}

/// One part of a read resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceContents {
    /// The part's URI (the one read, or one below it).
    pub uri: String,
    /// Its MIME type.
    pub mime_type: Option<String>,
    /// Its text or bytes.
    pub contents: Contents,
}

impl ResourceContents {
    /// Text at `uri`.
    pub fn text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: None,
            contents: Contents::Text(text.into()),
        }
    }

    /// Bytes at `uri`.
    pub fn blob(uri: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        ResourceContents {
            uri: uri.into(),
            mime_type: None,
            contents: Contents::Blob(bytes.into()),
        }
    }

    /// With a MIME type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// An argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// Whether a client must give it (the host refuses a request without it before the plugin runs).
    pub required: bool,
}

/// A prompt a client may ask for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prompt {
    /// Its name.
    pub name: String,
    /// A title for a UI.
    pub title: Option<String>,
    /// What it does.
    pub description: Option<String>,
    /// Its arguments.
    pub arguments: Vec<PromptArgument>,
}

impl Prompt {
    /// The prompt `name`, without arguments.
    pub fn new(name: impl Into<String>) -> Self {
        Prompt {
            name: name.into(),
            ..Default::default()
        }
    }

    /// With a title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// With a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// With one more argument.
    pub fn with_argument(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        required: bool,
    ) -> Self {
        self.arguments.push(PromptArgument {
            name: name.into(),
            description: Some(description.into()),
            required,
        });
        self
    }
}

/// A message of a filled-in prompt: `user` or `assistant`, and one MCP content block (`text`, `image`, `audio`,
/// `resource`, `resource_link`), which the host checks against MCP's types.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// The content block.
    pub content: Value,
}

impl PromptMessage {
    /// The user says `text`.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::user(json!({ "type": "text", "text": text.into() }))
    }

    /// The assistant says `text`.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        PromptMessage {
            role: "assistant".into(),
            content: json!({ "type": "text", "text": text.into() }),
        }
    }

    /// The user's message with the content block `content`.
    pub fn user(content: Value) -> Self {
        PromptMessage {
            role: "user".into(),
            content,
        }
    }
}

/// A prompt filled in with its arguments.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FilledPrompt {
    /// What it is for.
    pub description: Option<String>,
    /// Its messages.
    pub messages: Vec<PromptMessage>,
}

impl FilledPrompt {
    /// The prompt of `messages`.
    pub fn new(messages: Vec<PromptMessage>) -> Self {
        FilledPrompt {
            description: None,
            messages,
        }
    }
}

/// Why a read or a prompt gave nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfferError {
    /// No such resource or prompt here (the host asks the next plugin).
    NotFound,
    /// There is, and it failed: the message for the client.
    Failed(String),
}

/// What a completion is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completing {
    /// An argument of a prompt.
    Prompt,
    /// A variable of a resource template.
    ResourceTemplate,
}

/// The client that asked for a prompt or read a resource, to ask back ([`Offers::prompt_asking`],
/// [`Offers::read_asking`]): a form for the user, the client's model, its roots, as a tool asks through
/// [`Ctx::ask`](crate::Ctx::ask). A 2026-07-28 client answers with its next `prompts/get` or `resources/read`: the
/// prompt is then filled in (the resource read) again from the start, and the same questions get their answers at
/// once.
pub trait OfferClient {
    /// Ask `questions`, answered in order; the error says why not (nobody to ask, a capability the client lacks,
    /// a refusal).
    fn ask(&self, questions: &[crate::InputRequest]) -> Result<Vec<Value>, String>;
    /// The methods that may be asked (`elicitation/create`, `sampling/createMessage`, `roots/list`); empty when
    /// there is nobody to ask.
    fn answers(&self) -> Vec<String>;
}

/// An [`OfferClient`] with nobody behind it: every question is refused with [`crate::NO_CLIENT_TO_ASK`].
#[derive(Debug, Clone, Copy, Default)]
pub struct NobodyToAsk;

impl OfferClient for NobodyToAsk {
    fn ask(&self, questions: &[crate::InputRequest]) -> Result<Vec<Value>, String> {
        let _ = questions;
        Err(crate::NO_CLIENT_TO_ASK.into())
    }

    fn answers(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The MCP resources and prompts a plugin offers. Every method has a default: offer nothing.
pub trait Offers: Send + Sync {
    /// The resources offered now.
    fn resources(&self) -> Vec<Resource> {
        Vec::new()
    }

    /// The resource templates offered.
    fn resource_templates(&self) -> Vec<Resource> {
        Vec::new()
    }

    /// Read the resource at `uri` (listed, or matching one of the templates).
    fn read(&self, uri: &str) -> Result<Vec<ResourceContents>, OfferError> {
        let _ = uri;
        Err(OfferError::NotFound)
    }

    /// Likewise, able to ask the client that reads it (`client`); what the host calls. Defaults to
    /// [`Offers::read`]: implement this one instead to ask.
    fn read_asking(&self, uri: &str, client: &dyn OfferClient) -> Result<Vec<ResourceContents>, OfferError> {
        let _ = client;
        self.read(uri)
    }

    /// The prompts offered.
    fn prompts(&self) -> Vec<Prompt> {
        Vec::new()
    }

    /// The prompt `name` filled in with `arguments` (name, value).
    fn prompt(&self, name: &str, arguments: &[(String, String)]) -> Result<FilledPrompt, OfferError> {
        let _ = (name, arguments);
        Err(OfferError::NotFound)
    }

    /// Likewise, able to ask the client that wants the prompt (`client`); what the host calls. Defaults to
    /// [`Offers::prompt`]: implement this one instead to ask.
    fn prompt_asking(
        &self,
        name: &str,
        arguments: &[(String, String)],
        client: &dyn OfferClient,
    ) -> Result<FilledPrompt, OfferError> {
        let _ = client;
        self.prompt(name, arguments)
    }

    /// Values for `argument` of the prompt (or template) `name` that begin like `value`, best first.
    fn complete(&self, completing: Completing, name: &str, argument: &str, value: &str) -> Vec<String> {
        let _ = (completing, name, argument, value);
        Vec::new()
    }
}
