//! A plugin's MCP resources and prompts: the optional `offers` export of `wit/plugin.wit`, beside its tools or
//! handler in one component (its metadata names it and requests its capabilities).
//!
//! Each export runs through the gate like a tool's call: a fresh instance under the plugin's grants (its
//! preopens, its deadline, its memory limit), no nested calls, nobody to ask. What comes back is checked and
//! bounded here, and handed on in MCP's shapes (JSON): resources and templates (`uri`, `name`, `title`,
//! `description`, `mimeType`, `size`), read contents (`text`, or `blob` in base64), prompts and their filled-in
//! messages (the content blocks as the plugin wrote them, parsed; the server checks them against MCP's types).
//!
//! What a plugin may not offer: a `file:` URI (the workspace's files are the server's own resources), an entry
//! without a URI or a name, more than [`MAX_ENTRIES`] entries, more than [`MAX_BYTES`] of contents, a message
//! whose role is not `user` or `assistant` or whose content is not a JSON object with a `type`.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::bindings::offers as wit;
use crate::gate::{self, Entry};
use crate::v1::OffersGuest;
use crate::{Plugin, WasmGrants};

/// The most entries one list may have (resources, templates, prompts, messages, completions).
pub const MAX_ENTRIES: usize = 1000;

/// The most bytes a read resource or a filled-in prompt may carry.
pub const MAX_BYTES: usize = 8 << 20;

/// What a completion is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completing {
    /// An argument of a prompt.
    Prompt,
    /// A variable of a resource template.
    ResourceTemplate,
}

impl Plugin {
    /// Whether the plugin exports `offers` (linking it now if its load deferred that; false when it cannot be
    /// linked, which its next call reports).
    pub fn offers(&self) -> bool {
        self.inner.linked().is_ok_and(|linked| linked.offers.is_some())
    }

    /// Its resources (`templates`: its resource templates) in MCP's shape; an error names what failed.
    pub fn list_resources(&self, grants: &WasmGrants, templates: bool) -> Result<Vec<Value>, String> {
        let export = if templates {
            "list-resource-templates"
        } else {
            "list-resources"
        };
        let listed = self.enter(grants, export, |guest, store| {
            if templates {
                guest.call_list_resource_templates(store)
            } else {
                guest.call_list_resources(store)
            }
        })?;
        let key = if templates { "uriTemplate" } else { "uri" };
        bounded(&listed, export)?;
        Ok(listed
            .into_iter()
            .filter_map(|r| match resource(&r, key) {
                Ok(value) => Some(value),
                Err(why) => {
                    tracing::warn!(plugin = %self.metadata.name, "{export}: {why}: left out");
                    None
                }
            })
            .collect())
    }

    /// The contents of the resource at `uri` in MCP's shape; `None` when the plugin has no such resource.
    /// `client`: as for [`get_prompt`](Self::get_prompt), the client that wants it, for the plugin to ask.
    /// Whether the plugin asked with nobody to ask comes with it.
    pub fn read_resource(&self, grants: &WasmGrants, uri: &str, client: Option<&str>) -> ResourceRead {
        let mut asked_nobody = false;
        let read = self.read_asking(grants, uri, client, &mut asked_nobody);
        ResourceRead { read, asked_nobody }
    }

    fn read_asking(
        &self,
        grants: &WasmGrants,
        uri: &str,
        client: Option<&str>,
        asked_nobody: &mut bool,
    ) -> Result<Option<Vec<Value>>, String> {
        let entry = Entry {
            client: asking(grants, client),
            ..Entry::bare("read-resource")
        };
        let (read, asked) = self.enter_with(grants, entry, |guest, store| {
            let read = guest.call_read_resource(&mut *store, uri)?;
            Ok((read, store.data().asked_nobody))
        })?;
        *asked_nobody = asked;
        let parts = match read {
            Ok(parts) => parts,
            Err(wit::OfferError::NotFound) => return Ok(None),
            Err(wit::OfferError::Failed(message)) => return Err(message),
        };
        bounded(&parts, "read-resource")?;
        let mut total = 0usize;
        let mut contents = Vec::with_capacity(parts.len());
        for part in parts {
            // A part is the resource read or one below it: a plugin cannot pass off its text as another URI's
            // (a workspace file's, another plugin's).
            if !part_of(uri, &part.uri) {
                return Err(format!(
                    "read-resource of {uri} returned a part for another URI ({})",
                    part.uri
                ));
            }
            let mut value = json!({ "uri": part.uri });
            if let Some(mime) = part.mime_type {
                value["mimeType"] = json!(mime);
            }
            match part.contents {
                wit::Contents::Text(text) => {
                    total += text.len();
                    value["text"] = json!(text);
                }
                wit::Contents::Blob(bytes) => {
                    total += bytes.len();
                    value["blob"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
                }
            }
            if total > MAX_BYTES {
                return Err(too_large("read-resource"));
            }
            contents.push(value);
        }
        if contents.is_empty() {
            return Err("read-resource returned no contents".into());
        }
        Ok(Some(contents))
    }

    /// Its prompts in MCP's shape.
    pub fn list_prompts(&self, grants: &WasmGrants) -> Result<Vec<Value>, String> {
        let prompts = self.enter(grants, "list-prompts", |guest, store| {
            guest.call_list_prompts(store)
        })?;
        bounded(&prompts, "list-prompts")?;
        Ok(prompts
            .into_iter()
            .filter(|p| !p.name.is_empty())
            .map(|p| {
                let arguments: Vec<Value> = p
                    .arguments
                    .into_iter()
                    .map(|a| {
                        let mut arg = json!({ "name": a.name, "required": a.required });
                        if let Some(d) = a.description {
                            arg["description"] = json!(d);
                        }
                        arg
                    })
                    .collect();
                let mut prompt = json!({ "name": p.name, "arguments": arguments });
                if let Some(t) = p.title {
                    prompt["title"] = json!(t);
                }
                if let Some(d) = p.description {
                    prompt["description"] = json!(d);
                }
                prompt
            })
            .collect())
    }

    /// The prompt `name` filled in with `arguments`, in MCP's shape (`description`, `messages`); `None` when the
    /// plugin has no such prompt. `client`: the id under which the client that wants the prompt is registered at
    /// the grants' desk ([`WasmGrants::client`]), for the plugin to ask (`host.ask`) as a tool's call would; none:
    /// nobody to ask.
    pub fn get_prompt(
        &self,
        grants: &WasmGrants,
        name: &str,
        arguments: &[(String, String)],
        client: Option<&str>,
    ) -> Result<Option<Value>, String> {
        let entry = Entry {
            client: asking(grants, client),
            ..Entry::bare("get-prompt")
        };
        let got = self.enter_with(grants, entry, |guest, store| {
            guest.call_get_prompt(store, name, arguments)
        })?;
        let filled = match got {
            Ok(filled) => filled,
            Err(wit::OfferError::NotFound) => return Ok(None),
            Err(wit::OfferError::Failed(message)) => return Err(message),
        };
        bounded(&filled.messages, "get-prompt")?;
        let mut total = 0usize;
        let mut messages = Vec::with_capacity(filled.messages.len());
        for message in filled.messages {
            if !matches!(message.role.as_str(), "user" | "assistant") {
                return Err(format!(
                    "get-prompt returned a message whose role is {:?} (user or assistant)",
                    message.role
                ));
            }
            total += message.content.len();
            if total > MAX_BYTES {
                return Err(too_large("get-prompt"));
            }
            let content: Value = serde_json::from_str(&message.content)
                .map_err(|e| format!("get-prompt returned a message whose content is not JSON: {e}"))?;
            if !content.get("type").is_some_and(Value::is_string) {
                return Err("get-prompt returned a content block without a `type`".into());
            }
            messages.push(json!({ "role": message.role, "content": content }));
        }
        let mut prompt = json!({ "messages": messages });
        if let Some(d) = filled.description {
            prompt["description"] = json!(d);
        }
        Ok(Some(prompt))
    }

    /// Its completions of `value` for `argument` of the prompt or template `name`, at most 100.
    pub fn complete(
        &self,
        grants: &WasmGrants,
        kind: Completing,
        name: &str,
        argument: &str,
        value: &str,
    ) -> Result<Vec<String>, String> {
        let kind = match kind {
            Completing::Prompt => wit::CompletionKind::Prompt,
            Completing::ResourceTemplate => wit::CompletionKind::ResourceTemplate,
        };
        let mut values = self.enter(grants, "complete", |guest, store| {
            guest.call_complete(store, kind, name, argument, value)
        })?;
        values.truncate(100);
        Ok(values)
    }

    /// Run one `offers` export in a fresh instance under `grants`, with nobody to ask.
    fn enter<T>(
        &self,
        grants: &WasmGrants,
        export: &'static str,
        call: impl FnOnce(&OffersGuest, &mut wasmtime::Store<crate::state::PluginState>) -> wasmtime::Result<T>,
    ) -> Result<T, String> {
        self.enter_with(grants, Entry::bare(export), call)
    }

    /// Run one `offers` export in a fresh instance under `grants`, as `entry` says.
    fn enter_with<T>(
        &self,
        grants: &WasmGrants,
        entry: Entry,
        call: impl FnOnce(&OffersGuest, &mut wasmtime::Store<crate::state::PluginState>) -> wasmtime::Result<T>,
    ) -> Result<T, String> {
        let inner = &self.inner;
        gate::enter(&**inner, grants, entry, |store, instance| {
            let linked = inner.linked().map_err(|e| wasmtime::format_err!("{e}"))?;
            let indices = linked.offers.as_ref().ok_or_else(|| {
                wasmtime::format_err!("the plugin {} offers no resources or prompts", inner.name)
            })?;
            let guest = indices.load(&mut *store, instance)?;
            call(&guest, store)
        })
        .map_err(|e| e.message().to_owned())
    }
}

/// A listed resource or template in MCP's shape (`key`: `uri` or `uriTemplate`), or why it is left out.
fn resource(r: &wit::ResourceInfo, key: &str) -> Result<Value, String> {
    if r.uri.is_empty() || r.name.is_empty() {
        return Err("a resource without a URI or a name".into());
    }
    let scheme = r.uri.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        None | Some("") => return Err(format!("{:?} is not a URI", r.uri)),
        Some("file") => return Err(format!("{} is a file: URI (the workspace's)", r.uri)),
        Some(_) => {}
    }
    let mut value = json!({ key: r.uri, "name": r.name });
    for (field, text) in [
        ("title", &r.title),
        ("description", &r.description),
        ("mimeType", &r.mime_type),
    ] {
        if let Some(text) = text {
            value[field] = json!(text);
        }
    }
    if let Some(size) = r.size {
        value["size"] = json!(size);
    }
    Ok(value)
}

/// Whether `part` is the URI `read` or below it (`read` followed by `/`, `#` or `?`).
fn part_of(read: &str, part: &str) -> bool {
    part == read
        || part
            .strip_prefix(read)
            .is_some_and(|rest| read.ends_with('/') || rest.starts_with(['/', '#', '?']))
}

/// What came of reading a plugin's resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRead {
    /// Its contents in MCP's shape (`None`: not the plugin's), or why not.
    pub read: Result<Option<Vec<Value>>, String>,
    /// It asked its client with nobody to ask (read with no client): it is the resource's plugin, and wants to.
    pub asked_nobody: bool,
}

/// The client registered under `id` at the grants' desk, for an offer's plugin to ask; none: nobody to ask.
fn asking(grants: &WasmGrants, id: Option<&str>) -> Option<crate::state::CallClient> {
    let id = id?;
    grants.client.clone().map(|desk| crate::state::CallClient {
        desk,
        call_id: id.to_owned(),
        sampling: grants.sampling,
    })
}

/// A list longer than [`MAX_ENTRIES`] is refused whole.
fn bounded<T>(list: &[T], export: &str) -> Result<(), String> {
    if list.len() > MAX_ENTRIES {
        return Err(format!(
            "{export} returned {} entries (at most {MAX_ENTRIES})",
            list.len()
        ));
    }
    Ok(())
}

fn too_large(export: &str) -> String {
    format!("{export} returned more than {} MiB", MAX_BYTES >> 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(uri: &str, name: &str) -> wit::ResourceInfo {
        wit::ResourceInfo {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: Some("d".into()),
            mime_type: Some("text/plain".into()),
            size: Some(3),
        }
    }

    #[test]
    fn a_plugin_cannot_offer_the_workspace_s_files_nor_nameless_entries() {
        assert_eq!(
            resource(&info("test://a", "a"), "uri").ok(),
            Some(
                json!({"uri": "test://a", "name": "a", "description": "d", "mimeType": "text/plain", "size": 3})
            )
        );
        assert!(resource(&info("file:///etc/passwd", "p"), "uri").is_err());
        assert!(resource(&info("FILE:///etc/passwd", "p"), "uri").is_err());
        assert!(resource(&info("no-scheme", "p"), "uri").is_err());
        assert!(resource(&info("test://a", ""), "uri").is_err());
        assert!(bounded(&vec![0u8; MAX_ENTRIES + 1], "x").is_err());
    }

    #[test]
    fn a_read_s_parts_are_the_resource_or_below_it() {
        assert!(part_of("notes://day", "notes://day"));
        assert!(part_of("notes://day", "notes://day/1") && part_of("notes://day/", "notes://day/1"));
        assert!(!part_of("notes://day", "notes://days"), "a sibling is not below");
        assert!(!part_of("notes://day", "file:///home/me/.ssh/id_rsa"));
        assert!(!part_of("notes://day", "test://static-text"));
    }
}
