//! Loadouts (pi's `prepareLoadout`): after every change of the active set, a tool that sets
//! [`ToolSpec::prepares_loadout`](crate::ToolSpec::prepares_loadout) sees the tools about to be declared and may
//! override their descriptions or hide their declarations.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Exposure, ToolNamespace};

/// One tool as a loadout shows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadoutTool {
    /// The tool's name.
    pub name: String,
    /// Its registered description (before any override).
    pub description: String,
    /// How the model can reach it.
    #[serde(default)]
    pub exposure: Exposure,
    /// Its namespace, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<ToolNamespace>,
    /// Its prompt guidelines, normalised (trimmed, no empty entries, no duplicates).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompt_guidelines: Vec<String>,
    /// Its parameters' JSON Schema, when known (loadouts and `Ctx::tools` give it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<serde_json::Value>,
    /// Its output schema, when it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
}

/// The input of a loadout hook (pi's `ToolLoadout`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Loadout {
    /// The active tools about to be declared, in active order.
    pub declared: Vec<LoadoutTool>,
    /// The tools other tools can call for this active set, in registry order.
    pub callable: Vec<LoadoutTool>,
    /// Every registered tool, in registry order.
    pub registered: Vec<LoadoutTool>,
}

impl Loadout {
    /// The registered tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&LoadoutTool> {
        self.registered.iter().find(|t| t.name == name)
    }

    /// pi's `getExposure`: the tool's exposure, `direct` when unknown.
    pub fn exposure(&self, name: &str) -> Exposure {
        self.tool(name).map(|t| t.exposure).unwrap_or_default()
    }
}

/// The output of a loadout hook (pi's `ToolLoadoutChanges`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadoutChanges {
    /// Model-visible description overrides, by tool name; later hooks win.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub descriptions: BTreeMap<String, String>,
    /// Tools that stay active and callable but are left out of the declarations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden_declarations: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loadout_crosses_the_boundary_as_pi_names_it() {
        let loadout = Loadout {
            declared: vec![LoadoutTool {
                name: "echo".into(),
                description: "Echo".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = serde_json::to_string(&loadout).unwrap();
        assert_eq!(
            text,
            r#"{"declared":[{"name":"echo","description":"Echo","exposure":"direct"}],"callable":[],"registered":[]}"#
        );
        assert_eq!(serde_json::from_str::<Loadout>(&text).unwrap(), loadout);
        let changes: LoadoutChanges =
            serde_json::from_str(r#"{"descriptions":{"echo":"E"},"hiddenDeclarations":["echo"]}"#).unwrap();
        assert_eq!(changes.hidden_declarations, ["echo"]);
        assert_eq!(loadout.exposure("nope"), Exposure::Direct);
    }
}
