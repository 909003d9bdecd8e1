//! Applying an active set (pi's `_applyToolLoadout`): ordering, the loadout hooks, and their changes.
//!
//! Applying is planned, run and committed in three steps, so that a [`SharedRegistry`](super::SharedRegistry)
//! runs the hooks (a wasm plugin's `prepare-loadout` is a fresh instance with a deadline) with no lock held: a
//! plain [`Registry`] does the three at once.

use std::collections::{BTreeMap, HashSet};
use std::panic::AssertUnwindSafe;

use toolwright_sdk::Exposure;

use super::info::{LoadoutError, loadout_info, source_info};
use super::{Entry, Registry, search};
use crate::definition::{PrepareLoadout, ToolLoadout};
use crate::tool::{AgentTool, ToolError};

/// An active set about to be applied: its tools in order, and the loadout hooks still to run on it.
pub struct LoadoutPlan {
    /// The active tools in order, with their registered descriptions.
    tools: Vec<AgentTool>,
    /// Each hook with its tool's name and source path.
    hooks: Vec<(String, String, PrepareLoadout)>,
    /// What the hooks see (`None` without hooks).
    loadout: Option<ToolLoadout>,
    /// The registry's plan count when this plan was made: a later plan supersedes it.
    generation: u64,
}

impl std::fmt::Debug for LoadoutPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadoutPlan")
            .field("tools", &self.tools.len())
            .field("hooks", &self.hooks.len())
            .field("generation", &self.generation)
            .finish()
    }
}

/// What a plan's hooks changed.
#[derive(Debug, Default)]
pub struct LoadoutOutcome {
    descriptions: BTreeMap<String, String>,
    hidden: Vec<String>,
    errors: Vec<LoadoutError>,
}

impl LoadoutPlan {
    /// The plan's tools wrapped again (`tool(name)`: the registry's tool now).
    pub(super) fn rewrap(&mut self, tool: impl Fn(&str) -> Option<AgentTool>) {
        self.tools = self
            .tools
            .iter()
            .filter_map(|t| tool(t.name()).map(|new| new.with_description(t.description().to_owned())))
            .collect();
    }

    /// Run the hooks, in active order (a panicking hook is an error, as a throwing one in pi). Touches no
    /// registry: call it with no lock held.
    pub(crate) fn run(&self) -> LoadoutOutcome {
        let mut outcome = LoadoutOutcome::default();
        let Some(loadout) = &self.loadout else {
            return outcome;
        };
        for (tool, path, hook) in &self.hooks {
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| hook(loadout)))
                .unwrap_or_else(|_| Err(ToolError::new("prepareLoadout panicked")));
            match result {
                Ok(Some(changes)) => {
                    outcome.descriptions.extend(changes.descriptions);
                    for name in changes.hidden_declarations {
                        if !outcome.hidden.contains(&name) {
                            outcome.hidden.push(name);
                        }
                    }
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(tool = %tool, "prepare_loadout failed: {}", error.message());
                    outcome.errors.push(LoadoutError {
                        extension_path: path.clone(),
                        tool: tool.clone(),
                        event: "prepare_loadout",
                        error: error.message().to_owned(),
                    });
                }
            }
        }
        outcome
    }

    /// Whether the plan has hooks to run.
    pub(crate) fn has_hooks(&self) -> bool {
        !self.hooks.is_empty()
    }
}

impl Registry {
    /// pi's `_applyToolLoadout`: order the requested names (active ones keep their order, new ones follow), keep
    /// the registered, non-hidden, activatable ones, and run every active tool's loadout hook. A registry shared
    /// by a [`SharedRegistry`](super::SharedRegistry) takes the new set at once and leaves the hooks to it.
    pub(super) fn apply_loadout(&mut self, names: &[String]) {
        let plan = self.plan_loadout(names);
        if self.deferred && plan.has_hooks() {
            // The new set at once (the registry's own rules read it next); what the hooks hide or rename stays
            // as it was, for the tools still active, until the commit.
            self.active = plan.tools.clone();
            let active: HashSet<&str> = self.active.iter().map(AgentTool::name).collect();
            self.hidden.retain(|n| active.contains(n.as_str()));
            self.revision += 1;
            self.planned = Some(plan);
            return;
        }
        // This plan supersedes any still waiting.
        self.planned = None;
        let outcome = plan.run();
        self.commit_loadout(plan, outcome);
    }

    fn plan_loadout(&mut self, names: &[String]) -> LoadoutPlan {
        self.generation += 1;
        let requested: Vec<&String> = {
            let mut seen = HashSet::new();
            names.iter().filter(|n| seen.insert(n.as_str())).collect()
        };
        let kept = self.active_names().into_iter().filter(|n| requested.contains(&n));
        let mut order: Vec<String> = Vec::new();
        for name in kept.chain(requested.iter().map(|n| (*n).clone())) {
            if !order.contains(&name) {
                order.push(name);
            }
        }
        let tools: Vec<&Entry> = order
            .iter()
            .filter_map(|n| self.entry(n))
            .filter(|e| e.definition.exposure != Exposure::Hidden && self.is_activatable(&e.definition.name))
            .collect();
        let hooks: Vec<(String, String, PrepareLoadout)> = tools
            .iter()
            .filter_map(|e| {
                let hook = e.definition.prepare_loadout.clone()?;
                Some((e.definition.name.clone(), source_info(&e.definition).path, hook))
            })
            .collect();
        let loadout = (!hooks.is_empty()).then(|| {
            let active: HashSet<&str> = tools.iter().map(|e| e.definition.name.as_str()).collect();
            ToolLoadout {
                declared: tools.iter().map(|e| e.tool.clone()).collect(),
                callable: self
                    .callable_for(&active)
                    .iter()
                    .map(|e| e.tool.clone())
                    .collect(),
                registered: self.entries.iter().map(|e| e.tool.clone()).collect(),
                info: self
                    .entries
                    .iter()
                    .map(|e| (e.definition.name.clone(), loadout_info(e)))
                    .collect(),
            }
        });
        LoadoutPlan {
            tools: tools.iter().map(|e| e.tool.clone()).collect(),
            hooks,
            loadout,
            generation: self.generation,
        }
    }

    /// Apply what `plan`'s hooks changed; only their errors when a later plan superseded it (that plan's commit
    /// decides the loadout).
    pub(crate) fn commit_loadout(&mut self, plan: LoadoutPlan, outcome: LoadoutOutcome) {
        if plan.generation != self.generation {
            self.errors.extend(outcome.errors);
            return;
        }
        self.active = plan
            .tools
            .into_iter()
            .map(|tool| match outcome.descriptions.get(tool.name()) {
                Some(description) => tool.with_description(description.clone()),
                None => tool,
            })
            .collect();
        self.hidden = outcome.hidden;
        self.errors.extend(outcome.errors);
        self.revision += 1;
    }

    /// The plan whose hooks a [`SharedRegistry`](super::SharedRegistry) still has to run, if any.
    pub(crate) fn take_planned_loadout(&mut self) -> Option<LoadoutPlan> {
        self.planned.take()
    }

    pub(super) fn callable_for(&self, active: &HashSet<&str>) -> Vec<&Entry> {
        self.entries
            .iter()
            .filter(|e| match e.definition.exposure {
                Exposure::Codemode | Exposure::Deferred => true,
                Exposure::Direct => active.contains(e.definition.name.as_str()),
                Exposure::ModelOnly | Exposure::Hidden => false,
            })
            .collect()
    }

    /// pi's `searchAndLoad`: rank the `codemode` and `deferred` tools that are not active, activate the matches,
    /// and return their names and registered descriptions in rank order.
    pub fn search_and_load(&mut self, query: &str, limit: usize) -> Vec<(String, String)> {
        let active = self.active_names();
        let candidates: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| search::is_searchable(e.definition.exposure) && !active.contains(&e.definition.name))
            .collect();
        let documents: Vec<search::SearchDocument> = candidates
            .iter()
            .map(|e| {
                let d = &e.definition;
                search::SearchDocument::new(&d.name, &d.description, &d.parameters, d.namespace.as_ref())
            })
            .collect();
        let matches = search::rank(query, &documents, limit);
        let found: Vec<(String, String)> = matches
            .iter()
            .map(|m| {
                let description = candidates
                    .iter()
                    .find(|e| e.definition.name == m.name)
                    .map(|e| e.definition.description.clone())
                    .unwrap_or_default();
                (m.name.clone(), description)
            })
            .collect();
        if !found.is_empty() {
            let mut names = active;
            names.extend(found.iter().map(|(n, _)| n.clone()));
            self.set_active_tools(&names);
        }
        found
    }
}
