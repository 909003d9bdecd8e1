//! What a registry shows: its sets, declarations, tool infos and prompt sections (read-only).

use std::collections::HashSet;

use toolwright_sdk::LoadoutTool;

use super::info::loadout_info;
use super::prompt::PromptSections;
use super::transcript::{self, ToolChanges, ToolDeclaration};
use super::{Entry, LoadoutError, Registry, ToolInfo, source_info};
use crate::definition::ToolDefinition;
use crate::tool::AgentTool;

impl Registry {
    /// A number that changes every time the active set and its loadout are applied: when it is unchanged, so
    /// are the active tools, the declarations and the prompt sections.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The registered names, in registry order.
    pub fn registered_names(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.definition.name.clone()).collect()
    }

    /// The registered definitions, in registry order.
    pub fn definitions(&self) -> impl Iterator<Item = &ToolDefinition> {
        self.entries.iter().map(|e| &e.definition)
    }

    /// The registered tool named `name`.
    pub fn definition(&self, name: &str) -> Option<&ToolDefinition> {
        self.entry(name).map(|e| &e.definition)
    }

    /// pi's `getActiveToolNames`: the active set in active order (hidden declarations included).
    pub fn active_names(&self) -> Vec<String> {
        self.active.iter().map(|t| t.name().to_owned()).collect()
    }

    /// The active tools as the pipeline runs them (pi's `agent.state.tools`): descriptions after the loadout,
    /// hidden declarations included (the model may still call them by name).
    pub fn active_tools(&self) -> Vec<AgentTool> {
        self.active.clone()
    }

    /// The names a loadout hid from the declarations.
    pub fn hidden_declarations(&self) -> &[String] {
        &self.hidden
    }

    /// The active names minus the hidden declarations.
    pub fn declared_names(&self) -> Vec<String> {
        self.active_names()
            .into_iter()
            .filter(|n| !self.hidden.contains(n))
            .collect()
    }

    /// pi's `getCallableToolNames`: active `direct` tools and every `codemode` or `deferred` tool, in registry order.
    pub fn callable_names(&self) -> Vec<String> {
        self.callable_tools()
            .iter()
            .map(|t| t.name().to_owned())
            .collect()
    }

    /// The tools other tools can call (pi's `_getCallableTools`), in registry order.
    pub fn callable_tools(&self) -> Vec<AgentTool> {
        self.callable_now().map(|e| e.tool.clone()).collect()
    }

    /// The callable entries for the current active set.
    fn callable_now(&self) -> impl Iterator<Item = &Entry> {
        let active: HashSet<&str> = self.active.iter().map(AgentTool::name).collect();
        self.callable_for(&active).into_iter()
    }

    /// What nested callers see of the callable tools (pi's `ctx.tools`): name, description, exposure,
    /// namespace, guidelines, parameters and output schema, in registry order.
    pub fn callable_infos(&self) -> Vec<LoadoutTool> {
        // As pi's `ctx.tools` and `getAllTools`: the guidelines as the tool gave them (codemode's samples list each),
        // where the system prompt and the loadout hooks see them normalised.
        self.callable_now()
            .map(|e| LoadoutTool {
                prompt_guidelines: e.definition.prompt_guidelines.clone(),
                ..loadout_info(e)
            })
            .collect()
    }

    /// Names activated but not registered yet (restored from a transcript).
    pub fn pending_names(&self) -> &[String] {
        &self.pending
    }

    /// The loadout hooks that failed since the last call, oldest first.
    pub fn take_loadout_errors(&mut self) -> Vec<LoadoutError> {
        std::mem::take(&mut self.errors)
    }

    /// pi's `getAllTools`, with each tool's sets.
    pub fn tool_infos(&self) -> Vec<ToolInfo> {
        let active = self.active_names();
        let callable = self.callable_names();
        self.entries
            .iter()
            .map(|e| {
                let d = &e.definition;
                ToolInfo {
                    name: d.name.clone(),
                    label: d.label.clone(),
                    description: d.description.clone(),
                    parameters: d.parameters.clone(),
                    prompt_guidelines: d.prompt_guidelines.clone(),
                    exposure: d.exposure,
                    namespace: d.namespace.clone(),
                    annotations: d.annotations.clone(),
                    execution_mode: d.execution_mode,
                    default_active: self.is_activated_on_registration(&d.name),
                    source_info: source_info(d),
                    active: active.contains(&d.name),
                    declared: active.contains(&d.name) && !self.hidden.contains(&d.name),
                    callable: callable.contains(&d.name),
                }
            })
            .collect()
    }

    /// What a provider request declares (pi's `toToolDeclaration` over the active tools, hidden declarations
    /// left out), in active order.
    pub fn declarations(&self) -> Vec<ToolDeclaration> {
        self.active
            .iter()
            .filter(|t| !self.hidden.iter().any(|h| h == t.name()))
            .map(ToolDeclaration::of)
            .collect()
    }

    /// pi's `declareToolChanges`: the system message that brings a transcript whose system messages are
    /// `transcript` to the current active set (hidden declarations included: the transcript declares them, and
    /// requests leave them out), or `None` when nothing changed.
    pub fn tool_changes(&self, transcript: &[ToolChanges]) -> Option<ToolChanges> {
        let current: Vec<ToolDeclaration> = self.active.iter().map(ToolDeclaration::of).collect();
        let changes = transcript::tool_state_changes(&transcript::current_tools(transcript), &current);
        (!changes.is_empty()).then_some(changes)
    }

    /// The system prompt's `tools` and `rules` sections for the active set (pi's `buildSystemPromptSections`).
    pub fn prompt_sections(&self) -> PromptSections {
        let selected = self.active_names();
        PromptSections::build(&selected, &self.hidden, |name| match self.entry(name) {
            Some(e) => (e.snippet.as_deref(), e.guidelines.as_slice()),
            None => (None, &[]),
        })
    }
}
