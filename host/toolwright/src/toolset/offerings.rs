//! The plugins' MCP resources and prompts for `toolwright mcp` ([`crate::mcp::resources::Offerings`]): the
//! third-party plugins that export `offers`, each asked under the grants its tools run under, in load order. A
//! URI or a prompt name offered by two plugins is the first one's; a read goes to the plugins in order until one
//! has the resource. Built-ins and a project's plugins of an untrusted project (not loaded) offer nothing.

use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::Toolset;
use crate::mcp::resources::{Offerings, PromptError, missing_argument};
use crate::wasm::offers::Completing;
use crate::wasm::{Plugin, WasmGrants};

/// The offering plugins of the latest toolset (a reload puts its own in place: [`PluginOfferings::replace`]).
#[derive(Default)]
pub struct PluginOfferings {
    plugins: RwLock<Vec<(Plugin, Arc<WasmGrants>)>>,
}

impl std::fmt::Debug for PluginOfferings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PluginOfferings")
    }
}

impl PluginOfferings {
    /// The plugins of `toolset` that may offer resources and prompts.
    pub fn new(toolset: &Toolset) -> Arc<Self> {
        let offerings = Arc::new(PluginOfferings::default());
        offerings.replace(toolset);
        offerings
    }

    /// Offer what `toolset`'s plugins offer from now on (its plugins reloaded).
    pub fn replace(&self, toolset: &Toolset) {
        *self.plugins.write().unwrap_or_else(|p| p.into_inner()) = toolset.offering.clone();
    }

    /// The plugins that export `offers` (linked now if not yet).
    fn offering(&self) -> Vec<(Plugin, Arc<WasmGrants>)> {
        let plugins = self.plugins.read().unwrap_or_else(|p| p.into_inner()).clone();
        plugins
            .into_iter()
            .filter(|(plugin, _)| plugin.offers())
            .collect()
    }

    /// Every entry the plugins list, the first of each `key`.
    fn listed(
        &self,
        key: &str,
        list: impl Fn(&Plugin, &WasmGrants) -> Result<Vec<Value>, String>,
    ) -> Vec<Value> {
        let mut all: Vec<Value> = Vec::new();
        for (plugin, grants) in self.offering() {
            match list(&plugin, &grants) {
                Ok(entries) => {
                    for entry in entries {
                        if !all.iter().any(|e| e[key] == entry[key]) {
                            all.push(entry);
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(plugin = %plugin.metadata.name, "cannot list what it offers: {error}")
                }
            }
        }
        all
    }
}

/// Whether `plugin` offers `uri`: lists it, or lists a template that matches it.
fn offers_uri(plugin: &Plugin, grants: &WasmGrants, uri: &str) -> bool {
    let listed = |templates: bool, key: &str| {
        plugin
            .list_resources(grants, templates)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|r| r[key].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    listed(false, "uri").iter().any(|listed| listed == uri)
        || listed(true, "uriTemplate")
            .iter()
            .any(|template| template_matches(template, uri))
}

/// Whether `uri` matches the RFC 6570 `template` as the SDKs match it: `{name}` is one path segment (no `/`),
/// `{+name}` any text (at least a character); the rest literally.
fn template_matches(template: &str, uri: &str) -> bool {
    fn matches(parts: &[Part<'_>], uri: &str) -> bool {
        match parts.split_first() {
            None => uri.is_empty(),
            Some((Part::Literal(text), rest)) => uri.strip_prefix(text).is_some_and(|uri| matches(rest, uri)),
            Some((Part::Variable { any }, rest)) => (1..=uri.len())
                .filter(|&end| uri.is_char_boundary(end))
                .take_while(|&end| *any || !uri[..end].contains('/'))
                .any(|end| matches(rest, &uri[end..])),
        }
    }
    enum Part<'a> {
        Literal(&'a str),
        Variable { any: bool },
    }
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        parts.push(Part::Variable {
            any: rest[open + 1..].starts_with('+'),
        });
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }
    matches(&parts, uri)
}

impl Offerings for PluginOfferings {
    fn list_resources(&self) -> Vec<Value> {
        self.listed("uri", |plugin, grants| plugin.list_resources(grants, false))
    }

    fn list_resource_templates(&self) -> Vec<Value> {
        self.listed("uriTemplate", |plugin, grants| {
            plugin.list_resources(grants, true)
        })
    }

    fn read_resource(&self, uri: &str, client: Option<&str>) -> Result<Option<Vec<Value>>, String> {
        // Read with nobody to ask, in load order. A plugin that tried to ask is run again with the client if it
        // offers the URI (lists it, or a template of its matches it): a plugin cannot ask the reader of another's
        // resource.
        for (plugin, grants) in self.offering() {
            let failed = |error: &dyn std::fmt::Display| {
                format!("the plugin {} failed: {error}", plugin.metadata.name)
            };
            let first = plugin.read_resource(&grants, uri, None);
            if first.asked_nobody && client.is_some() && offers_uri(&plugin, &grants, uri) {
                return plugin
                    .read_resource(&grants, uri, client)
                    .read
                    .map_err(|e| failed(&e));
            }
            match first.read {
                Ok(None) => continue,
                Ok(Some(contents)) => return Ok(Some(contents)),
                Err(error) => return Err(failed(&error)),
            }
        }
        Ok(None)
    }

    fn list_prompts(&self) -> Vec<Value> {
        self.listed("name", |plugin, grants| plugin.list_prompts(grants))
    }

    fn get_prompt(
        &self,
        name: &str,
        arguments: &[(String, String)],
        client: Option<&str>,
    ) -> Result<Option<Value>, PromptError> {
        // The plugin that lists the prompt first fills it in, once its declared arguments are there.
        for (plugin, grants) in self.offering() {
            let listed = plugin.list_prompts(&grants).unwrap_or_default();
            let Some(declaration) = listed.iter().find(|p| p["name"] == name) else {
                continue;
            };
            if let Some(argument) = missing_argument(declaration, arguments) {
                return Err(PromptError::Missing(argument));
            }
            return plugin
                .get_prompt(&grants, name, arguments, client)
                .map_err(|error| {
                    PromptError::Failed(format!("the plugin {} failed: {error}", plugin.metadata.name))
                });
        }
        Ok(None)
    }

    fn complete(&self, prompt: bool, name: &str, argument: &str, value: &str) -> Vec<String> {
        let kind = if prompt {
            Completing::Prompt
        } else {
            Completing::ResourceTemplate
        };
        for (plugin, grants) in self.offering() {
            match plugin.complete(&grants, kind, name, argument, value) {
                Ok(values) if !values.is_empty() => return values,
                Ok(_) => {}
                Err(error) => tracing::warn!(plugin = %plugin.metadata.name, "cannot complete: {error}"),
            }
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::template_matches;

    #[test]
    fn templates_match_as_the_sdks_match_them() {
        for (template, uri, expected) in [
            ("py://day/{date}", "py://day/2026-12-06", true),
            ("py://day/{date}", "py://day/a/b", false),
            ("py://day/{date}", "py://day/", false),
            ("py://{+path}", "py://a/b/c", true),
            ("test://template/{id}/data", "test://template/7/data", true),
            ("test://template/{id}/data", "test://template/7/other", false),
            ("x://{a}-{b}", "x://one-two", true),
            ("x://static", "x://static", true),
            ("x://static", "x://static2", false),
            ("x://é/{v}", "x://é/ü", true),
        ] {
            assert_eq!(template_matches(template, uri), expected, "{template} {uri}");
        }
    }
}
