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
        for (plugin, grants) in self.offering() {
            match plugin.read_resource(&grants, uri, client) {
                Ok(None) => continue,
                Ok(Some(contents)) => return Ok(Some(contents)),
                Err(error) => return Err(format!("the plugin {} failed: {error}", plugin.metadata.name)),
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
