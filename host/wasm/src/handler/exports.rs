//! A handler plugin's exports as typed functions, whichever shape of the `handler` interface it was built with:
//! the current one, whose `tool-call` and `tool-result` return `result<_, string>` (an error is the handler's
//! thrown error), or the bare one of the plugins built before (a decision, an option), whose answers are all
//! `ok`. The shape is found when an instance is first called, by type-checking the current one first.

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, Func, Instance, InstancePre, TypedFunc};

use crate::bindings::{handler as wit, types};
use crate::state::PluginState;

/// The interface a handler plugin exports.
const INTERFACE: &str = "toolwright:plugin/handler@0.1.0";

/// Where a component's handler exports are: found by name when it is linked, type-checked per instance.
#[derive(Debug, Clone)]
pub(crate) struct Indices {
    metadata: ComponentExportIndex,
    tool_call: ComponentExportIndex,
    tool_result: ComponentExportIndex,
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
}

impl Indices {
    /// The handler exports of the component `pre` was linked from, if it exports the interface.
    pub(crate) fn new(pre: &InstancePre<PluginState>) -> Option<Self> {
        let component = pre.component();
        let interface = component.get_export_index(None, INTERFACE)?;
        let find = |name: &str| component.get_export_index(Some(&interface), name);
        Some(Indices {
            metadata: find("metadata")?,
            tool_call: find("tool-call")?,
            tool_result: find("tool-result")?,
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
        let current = match tool_call.typed::<(&wit::ToolCallEvent,), (Decided,)>(&*store) {
            Ok(_) => {
                tool_result.typed::<(&wit::ToolResultEvent,), (Changed,)>(&*store)?;
                true
            }
            Err(error) => {
                let bare = tool_call
                    .typed::<(&wit::ToolCallEvent,), (wit::ToolCallDecision,)>(&*store)
                    .and_then(|_| {
                        tool_result
                            .typed::<(&wit::ToolResultEvent,), (Option<wit::ToolResultChanges>,)>(&*store)
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
