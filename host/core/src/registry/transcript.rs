//! Tool declarations as the transcript records them (pi-ai's `utils/transcript.ts`): a request declares
//! `{name, description, parameters, constrainedSampling?}` per tool, and every change of the declared set is a
//! system message with `toolsAdded` / `toolsRemoved`.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Registry, apply_tool_modifiers};
use crate::tool::AgentTool;

/// One tool as a provider request declares it (pi's `toToolDeclaration`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDeclaration {
    /// The name the model calls.
    pub name: String,
    /// The model-visible description, after loadout overrides.
    pub description: String,
    /// The parameters' JSON Schema.
    pub parameters: Value,
    /// The constrained-sampling request, when the tool sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrained_sampling: Option<Value>,
}

impl ToolDeclaration {
    /// The declaration of `tool`.
    pub fn of(tool: &AgentTool) -> Self {
        ToolDeclaration {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            parameters: tool.parameters().clone(),
            constrained_sampling: tool.constrained_sampling().cloned(),
        }
    }
}

/// A removed tool: its name only (pi's `ToolReference`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolReference {
    /// The tool's name.
    pub name: String,
}

/// The tool fields of a transcript system message: what was added and removed, in pi's JSON names. Empty lists
/// are left out, as pi leaves them out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolChanges {
    /// Declarations added (or redefined: a changed definition is removed and added again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_added: Vec<ToolDeclaration>,
    /// Names removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools_removed: Vec<ToolReference>,
}

impl ToolChanges {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.tools_added.is_empty() && self.tools_removed.is_empty()
    }

    /// The changes without the tools named in `hidden` (pi's hidden-declarations projection, applied to every
    /// system message before a request).
    pub fn without(&self, hidden: &[String]) -> ToolChanges {
        ToolChanges {
            tools_added: self
                .tools_added
                .iter()
                .filter(|t| !hidden.contains(&t.name))
                .cloned()
                .collect(),
            tools_removed: self
                .tools_removed
                .iter()
                .filter(|t| !hidden.contains(&t.name))
                .cloned()
                .collect(),
        }
    }
}

/// pi's `getCurrentTools`: the declarations after replaying every message's removals, then additions, in order.
pub fn current_tools(messages: &[ToolChanges]) -> Vec<ToolDeclaration> {
    let mut tools: Vec<ToolDeclaration> = Vec::new();
    for message in messages {
        for removed in &message.tools_removed {
            tools.retain(|t| t.name != removed.name);
        }
        for added in &message.tools_added {
            match tools.iter_mut().find(|t| t.name == added.name) {
                // A JavaScript Map keeps the first insertion's position when a key is set again.
                Some(slot) => *slot = added.clone(),
                None => tools.push(added.clone()),
            }
        }
    }
    tools
}

/// pi's `getToolStateChanges`: what turns `previous` into `current`. Declarations are compared by their JSON
/// text, so a changed description or schema is a removal and an addition of the same name.
pub fn tool_state_changes(previous: &[ToolDeclaration], current: &[ToolDeclaration]) -> ToolChanges {
    let same = |a: &ToolDeclaration, b: &ToolDeclaration| {
        serde_json::to_string(a).ok() == serde_json::to_string(b).ok()
    };
    ToolChanges {
        tools_added: current
            .iter()
            .filter(|tool| match previous.iter().find(|p| p.name == tool.name) {
                Some(before) => !same(before, tool),
                None => true,
            })
            .cloned()
            .collect(),
        tools_removed: previous
            .iter()
            .filter(|tool| match current.iter().find(|c| c.name == tool.name) {
                Some(now) => !same(tool, now),
                None => true,
            })
            .map(|t| ToolReference { name: t.name.clone() })
            .collect(),
    }
}

impl Registry {
    /// pi's `_restoreToolsFromTranscript`: the loadout the transcript's system messages declare, plus extension
    /// tools it never mentioned that registration activates, with the selection's `+`/`-` modifiers. Names not
    /// registered yet stay pending and activate when they register.
    pub fn restore_from_transcript(&mut self, system_messages: &[ToolChanges]) {
        self.pending.clear();
        self.restored.clear();
        if system_messages.is_empty() {
            return;
        }
        let mentioned: HashSet<&str> = system_messages
            .iter()
            .flat_map(|m| {
                m.tools_added
                    .iter()
                    .map(|t| t.name.as_str())
                    .chain(m.tools_removed.iter().map(|t| t.name.as_str()))
            })
            .collect();
        let base: HashSet<&str> = self.sources.builtins.iter().map(|d| d.name.as_str()).collect();
        let declared: Vec<String> = current_tools(system_messages)
            .into_iter()
            .map(|t| t.name)
            .collect();
        let new_tools: Vec<String> = self
            .registered_names()
            .into_iter()
            .filter(|n| !mentioned.contains(n.as_str()) && !base.contains(n.as_str()))
            .filter(|n| self.is_activated_on_registration(n))
            .collect();
        let names = apply_tool_modifiers(&[declared.clone(), new_tools].concat(), &self.modifiers);
        let mut pending: Vec<String> = Vec::new();
        for name in names.iter().filter(|n| self.is_allowed(n)) {
            if !pending.contains(name) {
                pending.push(name.clone());
            }
        }
        self.pending = pending;
        self.restored = apply_tool_modifiers(&declared, &self.modifiers)
            .into_iter()
            .collect();
        self.set_active(&names);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decl(name: &str, description: &str) -> ToolDeclaration {
        ToolDeclaration {
            name: name.into(),
            description: description.into(),
            parameters: json!({"type": "object"}),
            constrained_sampling: None,
        }
    }

    #[test]
    fn a_changed_description_is_a_removal_and_an_addition() {
        let before = vec![decl("read", "Read"), decl("echo", "Echo")];
        let after = vec![decl("read", "Read"), decl("echo", "Echo!"), decl("ls", "List")];
        let changes = tool_state_changes(&before, &after);
        assert_eq!(
            serde_json::to_value(&changes).unwrap(),
            json!({
                "toolsAdded": [
                    {"name": "echo", "description": "Echo!", "parameters": {"type": "object"}},
                    {"name": "ls", "description": "List", "parameters": {"type": "object"}}
                ],
                "toolsRemoved": [{"name": "echo"}]
            })
        );
        let replayed = current_tools(&[
            ToolChanges {
                tools_added: before,
                ..Default::default()
            },
            changes,
        ]);
        assert_eq!(replayed, after);
        assert!(tool_state_changes(&after, &after).is_empty());
        assert_eq!(serde_json::to_string(&ToolChanges::default()).unwrap(), "{}");
    }
}
