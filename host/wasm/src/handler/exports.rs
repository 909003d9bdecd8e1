//! A handler plugin's exports as typed functions, whichever shape of the `handler` interface it was built with:
//! the current one, whose `tool-call` and `tool-result` return `result<_, string>` (an error is the handler's
//! thrown error), or the bare one of the plugins built before (a decision, an option), whose answers are all
//! `ok`. The shape is found when an instance is first called, by type-checking the current one first.
//!
//! A plugin built against `toolwright:plugin@0.1.0` exports `handler@0.1.0` (in either shape): its `metadata`
//! and `tool-call` have the same types as 0.2.0's (wasmtime compares types by structure), and its `tool-result`
//! is called with the event in 0.1.0's types (`crate::v1`: audio and resources as the model sees them) and its
//! changes converted back. Left alone, a result keeps its blocks.

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, Func, Instance, InstancePre, TypedFunc};

use crate::bindings::{handler as wit, types, v1::handler as v1};
use crate::state::PluginState;
use crate::v1::Conv as _;

/// The interface a handler plugin exports.
const INTERFACE: &str = "toolwright:plugin/handler@0.2.0";

/// The interface a handler plugin built against 0.1.0 exports.
const INTERFACE_V1: &str = "toolwright:plugin/handler@0.1.0";

/// Where a component's handler exports are: found by name when it is linked, type-checked per instance.
#[derive(Debug, Clone)]
pub(crate) struct Indices {
    metadata: ComponentExportIndex,
    tool_call: ComponentExportIndex,
    tool_result: ComponentExportIndex,
    /// Built against 0.1.0.
    v1: bool,
}

type Decided = Result<wit::ToolCallDecision, String>;
type Changed = Result<Option<wit::ToolResultChanges>, String>;

/// An instance's handler exports, type-checked. The hooks are kept untyped: their parameters borrow the event,
/// which a stored `TypedFunc` cannot name, so each call types them again (a comparison of types, no lookup).
#[derive(Clone)]
pub(crate) struct Exports {
    metadata: TypedFunc<(), (types::PluginMetadata,)>,
    tool_call: Func,
    tool_result: Func,
    /// The current shape; else the bare one of plugins built before the hooks returned `result`.
    current: bool,
    /// Built against 0.1.0: `tool-result` takes and gives 0.1.0's types.
    v1: bool,
}

type ChangedV1 = Result<Option<v1::ToolResultChanges>, String>;

impl Indices {
    /// The handler exports of the component `pre` was linked from, if it exports the interface.
    pub(crate) fn new(pre: &InstancePre<PluginState>) -> Option<Self> {
        let component = pre.component();
        let (interface, v1) = match component.get_export_index(None, INTERFACE) {
            Some(interface) => (interface, false),
            None => (component.get_export_index(None, INTERFACE_V1)?, true),
        };
        let find = |name: &str| component.get_export_index(Some(&interface), name);
        Some(Indices {
            metadata: find("metadata")?,
            tool_call: find("tool-call")?,
            tool_result: find("tool-result")?,
            v1,
        })
    }

    /// The exports of `instance`, type-checked: an error names what does not match the current shape.
    pub(crate) fn load(
        &self,
        store: &mut Store<PluginState>,
        instance: &Instance,
    ) -> wasmtime::Result<Exports> {
        let metadata = instance.get_typed_func(&mut *store, self.metadata)?;
        let func = |store: &mut Store<PluginState>, index| {
            instance
                .get_func(store, index)
                .ok_or_else(|| wasmtime::format_err!("no export `{}`", INTERFACE))
        };
        let (tool_call, tool_result) = (func(store, &self.tool_call)?, func(store, &self.tool_result)?);
        let v1 = self.v1;
        let current = match tool_call.typed::<(&wit::ToolCallEvent,), (Decided,)>(&*store) {
            Ok(_) => {
                if v1 {
                    tool_result.typed::<(&v1::ToolResultEvent,), (ChangedV1,)>(&*store)?;
                } else {
                    tool_result.typed::<(&wit::ToolResultEvent,), (Changed,)>(&*store)?;
                }
                true
            }
            Err(error) => {
                let bare = tool_call
                    .typed::<(&wit::ToolCallEvent,), (wit::ToolCallDecision,)>(&*store)
                    .and_then(|_| {
                        if v1 {
                            tool_result
                                .typed::<(&v1::ToolResultEvent,), (Option<v1::ToolResultChanges>,)>(&*store)
                                .map(drop)
                        } else {
                            tool_result
                                .typed::<(&wit::ToolResultEvent,), (Option<wit::ToolResultChanges>,)>(&*store)
                                .map(drop)
                        }
                    });
                if bare.is_err() {
                    return Err(error.context("type-checking export func `tool-call`"));
                }
                false
            }
        };
        Ok(Exports {
            metadata,
            tool_call,
            tool_result,
            current,
            v1,
        })
    }
}

impl Exports {
    /// The plugin's metadata.
    pub(crate) fn call_metadata(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<types::PluginMetadata> {
        Ok(self.metadata.call(store, ())?.0)
    }

    /// Its `tool-call` hook: the decision, or the handler's thrown error.
    pub(crate) fn call_tool_call(
        &self,
        store: &mut Store<PluginState>,
        event: &wit::ToolCallEvent,
    ) -> wasmtime::Result<Decided> {
        if self.current {
            let hook = self
                .tool_call
                .typed::<(&wit::ToolCallEvent,), (Decided,)>(&*store)?;
            return Ok(hook.call(store, (event,))?.0);
        }
        let hook = self
            .tool_call
            .typed::<(&wit::ToolCallEvent,), (wit::ToolCallDecision,)>(&*store)?;
        Ok(Ok(hook.call(store, (event,))?.0))
    }

    /// Its `tool-result` hook: the changes (if any), or the handler's thrown error.
    pub(crate) fn call_tool_result(
        &self,
        store: &mut Store<PluginState>,
        event: &wit::ToolResultEvent,
    ) -> wasmtime::Result<Changed> {
        if self.v1 {
            let shown: v1::ToolResultEvent = event.clone().conv();
            let changed = if self.current {
                let hook = self
                    .tool_result
                    .typed::<(&v1::ToolResultEvent,), (ChangedV1,)>(&*store)?;
                hook.call(store, (&shown,))?.0
            } else {
                let hook = self
                    .tool_result
                    .typed::<(&v1::ToolResultEvent,), (Option<v1::ToolResultChanges>,)>(&*store)?;
                Ok(hook.call(store, (&shown,))?.0)
            };
            return Ok(changed.map(|changes| {
                changes.map(|mut changes| {
                    let content = changes
                        .content
                        .take()
                        .map(|c| crate::v1::restored(c, &shown.content, &event.content));
                    let mut changes: wit::ToolResultChanges = changes.conv();
                    changes.content = content;
                    changes
                })
            }));
        }
        if self.current {
            let hook = self
                .tool_result
                .typed::<(&wit::ToolResultEvent,), (Changed,)>(&*store)?;
            return Ok(hook.call(store, (event,))?.0);
        }
        let hook = self
            .tool_result
            .typed::<(&wit::ToolResultEvent,), (Option<wit::ToolResultChanges>,)>(&*store)?;
        Ok(Ok(hook.call(store, (event,))?.0))
    }
}
