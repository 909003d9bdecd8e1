//! Plugins built against `toolwright:plugin@0.1.0` (`wit-0.1`), which the host still loads beside 0.2.0's.
//!
//! wasmtime matches a 0.x import or export only within its minor version, so a 0.1 plugin's `host@0.1.0` and
//! `process@0.1.0` imports are linked here, each function served by the current one ([`crate::host_import`],
//! [`crate::process`]), and its `tool@0.1.0`, `handler@0.1.0` and `offers@0.1.0` exports are called through
//! [`ToolGuest`], [`OffersGuest`] and `crate::handler::exports`, which speak 0.2.0's types to the rest of the
//! host. What crosses is converted ([`Conv`]): the two versions' types are the same but for `content` (0.2.0
//! added audio and embedded resources) and `tool-spec` (`long-running`). A 0.1 plugin sees an audio or resource
//! block as the model does ([`toolwright_core::model_view`]): as text, or an image resource as the image (a
//! binary resource named, not saved to a file).

use wasmtime::component::{Instance, InstancePre, Resource};
use wasmtime::{AsContextMut, Store};

use crate::bindings::{self, v1};
use crate::state::PluginState;
use toolwright_native::NativeProcess;

/// A value of one version's generated type as the other's.
pub(crate) trait Conv<T> {
    /// The value converted.
    fn conv(self) -> T;
}

macro_rules! identity {
    ($($t:ty),*) => {$(
        impl Conv<$t> for $t {
            fn conv(self) -> $t {
                self
            }
        }
    )*};
}
identity!(String, bool, u8, u32, u64, i32, f64);

impl<A: Conv<B>, B> Conv<Option<B>> for Option<A> {
    fn conv(self) -> Option<B> {
        self.map(Conv::conv)
    }
}

impl<A: Conv<B>, B> Conv<Vec<B>> for Vec<A> {
    fn conv(self) -> Vec<B> {
        self.into_iter().map(Conv::conv).collect()
    }
}

impl<A: Conv<C>, B: Conv<D>, C, D> Conv<(C, D)> for (A, B) {
    fn conv(self) -> (C, D) {
        (self.0.conv(), self.1.conv())
    }
}

impl<A: Conv<C>, B: Conv<D>, C, D> Conv<Result<C, D>> for Result<A, B> {
    fn conv(self) -> Result<C, D> {
        self.map(Conv::conv).map_err(Conv::conv)
    }
}

/// Records of the same fields in both versions, converted both ways.
macro_rules! records {
    ($old:ident, $new:ident: $($name:ident { $($field:ident),* $(,)? })*) => {$(
        impl Conv<$new::$name> for $old::$name {
            fn conv(self) -> $new::$name {
                $new::$name { $($field: self.$field.conv()),* }
            }
        }
        impl Conv<$old::$name> for $new::$name {
            fn conv(self) -> $old::$name {
                $old::$name { $($field: self.$field.conv()),* }
            }
        }
    )*};
}

/// Variants (and enums) of the same cases in both versions, converted both ways.
macro_rules! variants {
    ($old:ident, $new:ident: $($name:ident { $($case:ident $(($payload:ident))?),* $(,)? })*) => {$(
        impl Conv<$new::$name> for $old::$name {
            fn conv(self) -> $new::$name {
                match self {
                    $($old::$name::$case $(($payload))? => $new::$name::$case $(($payload.conv()))?),*
                }
            }
        }
        impl Conv<$old::$name> for $new::$name {
            fn conv(self) -> $old::$name {
                match self {
                    $($new::$name::$case $(($payload))? => $old::$name::$case $(($payload.conv()))?),*
                }
            }
        }
    )*};
}

use bindings::{handler as h2, offers as o2, process as p2, types as t2};
use v1::{handler as h1, offers as o1, process as p1, types as t1};

records! { t1, t2:
    Annotations { read_only, destructive, idempotent, open_world }
    ToolNamespace { name, aliases, description, instructions }
    ToolInfo { name, description, exposure, namespace, prompt_guidelines, parameters, output_schema }
    Loadout { declared, callable, registered }
    LoadoutChanges { descriptions, hidden_declarations }
    Image { data, mime_type }
    Cost { input, output, cache_read, cache_write, total, total_from_provider }
    Usage { input, output, cache_read, cache_write, cache_write_1h, reasoning, total_tokens, cost }
    ToolResult { content, details, structured_content, usage, is_error, terminate }
    CapabilityRequest { capability, reason }
    PluginMetadata { name, version, description, capabilities }
    InputRequest { key, method, params }
    CallOutcome { result, is_error, duration_ms }
}
variants! { t1, t2:
    Exposure { Direct, ModelOnly, Codemode, Deferred, Hidden }
    ExecutionMode { Parallel, Sequential }
    Capability { Read(p), Write(p), Spawn(p), Env(p), Network(p) }
    LogLevel { Debug, Info, Warn, Error }
}
records! { h1, h2:
    ToolCallEvent { tool_name, tool_call_id, parent_tool_call_id, input }
    Block { reason, terminate }
    ToolResultEvent { tool_name, tool_call_id, parent_tool_call_id, input, content, details, structured_content,
        is_error, usage }
    ToolResultChanges { content, details, structured_content, is_error, usage }
}
variants! { h1, h2:
    ToolCallDecision { Allow, Block(b), Rewrite(r) }
}
records! { p1, p2:
    Command { program, args, cwd, env }
    ExitStatus { code, signal }
}
variants! { p1, p2:
    ProcessEvent { Output(o), Exited(e), Idle }
}
records! { o1, o2:
    ResourceInfo { uri, name, title, description, mime_type, size }
    ResourceContents { uri, mime_type, contents }
    PromptArgument { name, description, required }
    Prompt { name, title, description, arguments }
    PromptMessage { role, content }
    PromptResult { description, messages }
}
variants! { o1, o2:
    Contents { Text(t), Blob(b) }
    OfferError { NotFound, Failed(f) }
    CompletionKind { Prompt, ResourceTemplate }
}

impl Conv<t2::Content> for t1::Content {
    fn conv(self) -> t2::Content {
        match self {
            t1::Content::Text(text) => t2::Content::Text(text),
            t1::Content::Image(image) => t2::Content::Image(image.conv()),
        }
    }
}

/// An audio or resource block as the model sees it: text, or an image resource as the image (a binary one named,
/// not saved: the plugin could not read the file).
impl Conv<t1::Content> for t2::Content {
    fn conv(self) -> t1::Content {
        use toolwright_sdk::{Content, ResourceBody};
        let shown = match self {
            t2::Content::Text(text) => return t1::Content::Text(text),
            t2::Content::Image(image) => return t1::Content::Image(image.conv()),
            t2::Content::Audio(audio) => Content::Audio {
                data: audio.data,
                mime_type: audio.mime_type,
            },
            t2::Content::Resource(r) => Content::Resource {
                resource: toolwright_sdk::EmbeddedResource {
                    uri: r.uri,
                    mime_type: r.mime_type,
                    body: match r.body {
                        t2::ResourceBody::Text(text) => ResourceBody::Text { text },
                        t2::ResourceBody::Blob(blob) => ResourceBody::Blob { blob },
                    },
                },
            },
        };
        match toolwright_core::model_view::shown(&shown) {
            Content::Image { data, mime_type } => t1::Content::Image(t1::Image { data, mime_type }),
            other => t1::Content::Text(other.as_text().unwrap_or_default().to_owned()),
        }
    }
}

/// The content a 0.1 handler returned, in 0.2.0's blocks: a block it returned as it was shown (`shown`, the
/// 0.1 view of `original`) at the same place is the original block again, so a handler that changed one text
/// block (a redactor) leaves the audio and resources beside it whole.
pub(crate) fn restored(
    changed: Vec<t1::Content>,
    shown: &[t1::Content],
    original: &[t2::Content],
) -> Vec<t2::Content> {
    let same = |a: &t1::Content, b: &t1::Content| match (a, b) {
        (t1::Content::Text(a), t1::Content::Text(b)) => a == b,
        (t1::Content::Image(a), t1::Content::Image(b)) => a.data == b.data && a.mime_type == b.mime_type,
        _ => false,
    };
    changed
        .into_iter()
        .enumerate()
        .map(|(i, block)| match (shown.get(i), original.get(i)) {
            (Some(seen), Some(original)) if same(&block, seen) => original.clone(),
            _ => block.conv(),
        })
        .collect()
}

impl Conv<t2::ToolSpec> for t1::ToolSpec {
    fn conv(self) -> t2::ToolSpec {
        t2::ToolSpec {
            name: self.name,
            label: self.label,
            description: self.description,
            parameters: self.parameters,
            output_schema: self.output_schema,
            prompt_snippet: self.prompt_snippet,
            prompt_guidelines: self.prompt_guidelines,
            constrained_sampling: self.constrained_sampling,
            execution_mode: self.execution_mode.conv(),
            exposure: self.exposure.conv(),
            annotations: self.annotations.conv(),
            namespace: self.namespace.conv(),
            default_active: self.default_active,
            renders_own_frame: self.renders_own_frame,
            prepares_arguments: self.prepares_arguments,
            mutates_files: self.mutates_files,
            prepares_loadout: self.prepares_loadout,
            long_running: None,
        }
    }
}

/// An export of either version: where it is in a component (`$indices`, 0.2.0's looked up first) and an
/// instance's, type-checked (`$guest`).
macro_rules! versioned_export {
    (
        $(#[$i:meta])* $indices:ident, $(#[$g:meta])* $guest:ident, $name:literal,
        $ci:ty => $cg:ty, $oi:ty => $og:ty
    ) => {
        $(#[$i])*
        pub(crate) enum $indices {
            #[doc = concat!("`", $name, "@0.2.0`.")]
            Current($ci),
            #[doc = concat!("`", $name, "@0.1.0`.")]
            V1($oi),
        }

        impl $indices {
            #[doc = concat!("The `", $name, "` export of the component `pre` was linked from, if it has one.")]
            pub(crate) fn new(pre: &InstancePre<PluginState>) -> Option<Self> {
                <$ci>::new(pre)
                    .map($indices::Current)
                    .or_else(|_| <$oi>::new(pre).map($indices::V1))
                    .ok()
            }

            /// The export of `instance`, type-checked.
            pub(crate) fn load(&self, store: &mut Store<PluginState>, instance: &Instance) -> wasmtime::Result<$guest> {
                Ok(match self {
                    $indices::Current(indices) => $guest::Current(indices.load(store, instance)?),
                    $indices::V1(indices) => $guest::V1(indices.load(store, instance)?),
                })
            }
        }

        $(#[$g])*
        #[derive(Clone)]
        pub(crate) enum $guest {
            #[doc = concat!("`", $name, "@0.2.0`.")]
            Current($cg),
            #[doc = concat!("`", $name, "@0.1.0`.")]
            V1($og),
        }
    };
}

/// Link 0.1.0's imports (`types`, `host`, `process`) beside 0.2.0's.
pub(crate) fn add_to_linker(linker: &mut wasmtime::component::Linker<PluginState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    t1::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v1::host::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    p1::add_to_linker::<_, HasSelf<_>>(linker, |s| s)
}

impl t1::Host for PluginState {}

impl v1::host::Host for PluginState {
    fn update(&mut self, partial: t1::ToolResult) -> wasmtime::Result<()> {
        bindings::host::Host::update(self, partial.conv())
    }

    fn is_cancelled(&mut self) -> wasmtime::Result<bool> {
        bindings::host::Host::is_cancelled(self)
    }

    fn log(&mut self, level: t1::LogLevel, message: String) -> wasmtime::Result<()> {
        bindings::host::Host::log(self, level.conv(), message)
    }

    fn cwd(&mut self) -> wasmtime::Result<String> {
        bindings::host::Host::cwd(self)
    }

    fn home(&mut self) -> wasmtime::Result<Option<String>> {
        bindings::host::Host::home(self)
    }

    fn temp_dir(&mut self) -> wasmtime::Result<Option<String>> {
        bindings::host::Host::temp_dir(self)
    }

    fn refusal(&mut self, path: String, write: bool) -> wasmtime::Result<Option<String>> {
        bindings::host::Host::refusal(self, path, write)
    }

    fn call_tool(&mut self, name: String, arguments: String) -> wasmtime::Result<t1::CallOutcome> {
        bindings::host::Host::call_tool(self, name, arguments).map(Conv::conv)
    }

    fn call_tools(&mut self, calls: Vec<(String, String)>) -> wasmtime::Result<Vec<t1::CallOutcome>> {
        bindings::host::Host::call_tools(self, calls).map(Conv::conv)
    }

    fn callable_tools(&mut self) -> wasmtime::Result<Vec<t1::ToolInfo>> {
        bindings::host::Host::callable_tools(self).map(Conv::conv)
    }

    fn start_call(&mut self, name: String, arguments: String) -> wasmtime::Result<u64> {
        bindings::host::Host::start_call(self, name, arguments)
    }

    fn next_outcomes(&mut self, wait: bool) -> wasmtime::Result<Vec<(u64, t1::CallOutcome)>> {
        bindings::host::Host::next_outcomes(self, wait).map(Conv::conv)
    }

    fn search_tools(
        &mut self,
        query: String,
        among: Option<Vec<String>>,
        limit: u32,
    ) -> wasmtime::Result<Vec<String>> {
        bindings::host::Host::search_tools(self, query, among, limit)
    }

    fn ask(&mut self, requests: Vec<t1::InputRequest>) -> wasmtime::Result<Result<Vec<String>, String>> {
        bindings::host::Host::ask(self, requests.conv())
    }

    fn client_answers(&mut self) -> wasmtime::Result<Vec<String>> {
        bindings::host::Host::client_answers(self)
    }
}

impl p1::Host for PluginState {
    fn spawn(&mut self, command: p1::Command) -> wasmtime::Result<Result<Resource<NativeProcess>, String>> {
        p2::Host::spawn(self, command.conv())
    }
}

impl p1::HostChild for PluginState {
    fn next(
        &mut self,
        child: Resource<NativeProcess>,
        timeout_ms: u32,
    ) -> wasmtime::Result<Result<p1::ProcessEvent, String>> {
        p2::HostChild::next(self, child, timeout_ms).map(Conv::conv)
    }

    fn kill(&mut self, child: Resource<NativeProcess>) -> wasmtime::Result<()> {
        p2::HostChild::kill(self, child)
    }

    fn drop(&mut self, child: Resource<NativeProcess>) -> wasmtime::Result<()> {
        p2::HostChild::drop(self, child)
    }
}

versioned_export!(
    /// Where a component's `tool` export is, in the version it was built against.
    ToolIndices,
    /// An instance's `tool` export, in 0.2.0's types whichever version it was built against.
    ToolGuest,
    "tool",
    bindings::tool::GuestIndices => bindings::tool::Guest,
    v1::tool::GuestIndices => v1::tool::Guest
);

impl ToolGuest {
    pub(crate) fn call_metadata<S: AsContextMut>(&self, store: S) -> wasmtime::Result<t2::PluginMetadata>
    where
        S::Data: Send,
    {
        match self {
            ToolGuest::Current(g) => g.call_metadata(store),
            ToolGuest::V1(g) => g.call_metadata(store).map(Conv::conv),
        }
    }

    pub(crate) fn call_list_tools<S: AsContextMut>(&self, store: S) -> wasmtime::Result<Vec<t2::ToolSpec>>
    where
        S::Data: Send,
    {
        match self {
            ToolGuest::Current(g) => g.call_list_tools(store),
            ToolGuest::V1(g) => g.call_list_tools(store).map(Conv::conv),
        }
    }

    pub(crate) fn call_prepare_arguments<S: AsContextMut>(
        &self,
        store: S,
        tool: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<Option<String>, String>>
    where
        S::Data: Send,
    {
        match self {
            ToolGuest::Current(g) => g.call_prepare_arguments(store, tool, arguments),
            ToolGuest::V1(g) => g.call_prepare_arguments(store, tool, arguments),
        }
    }

    pub(crate) fn call_mutated_path<S: AsContextMut>(
        &self,
        store: S,
        tool: &str,
        arguments: &str,
    ) -> wasmtime::Result<Option<String>>
    where
        S::Data: Send,
    {
        match self {
            ToolGuest::Current(g) => g.call_mutated_path(store, tool, arguments),
            ToolGuest::V1(g) => g.call_mutated_path(store, tool, arguments),
        }
    }

    pub(crate) fn call_execute<S: AsContextMut>(
        &self,
        store: S,
        tool: &str,
        call_id: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<t2::ToolResult, String>>
    where
        S::Data: Send,
    {
        match self {
            ToolGuest::Current(g) => g.call_execute(store, tool, call_id, arguments),
            ToolGuest::V1(g) => g.call_execute(store, tool, call_id, arguments).map(Conv::conv),
        }
    }

    pub(crate) fn call_prepare_loadout<S: AsContextMut>(
        &self,
        store: S,
        tool: &str,
        loadout: &t2::Loadout,
    ) -> wasmtime::Result<Result<Option<t2::LoadoutChanges>, String>>
    where
        S::Data: Send,
    {
        match self {
            ToolGuest::Current(g) => g.call_prepare_loadout(store, tool, loadout),
            ToolGuest::V1(g) => g
                .call_prepare_loadout(store, tool, &loadout.clone().conv())
                .map(Conv::conv),
        }
    }

    pub(crate) fn call_render_call<S: AsContextMut>(
        &self,
        store: S,
        tool: &str,
        arguments: &str,
    ) -> wasmtime::Result<Option<String>>
    where
        S::Data: Send,
    {
        match self {
            ToolGuest::Current(g) => g.call_render_call(store, tool, arguments),
            ToolGuest::V1(g) => g.call_render_call(store, tool, arguments),
        }
    }

    pub(crate) fn call_render_result<S: AsContextMut>(
        &self,
        store: S,
        tool: &str,
        result: &t2::ToolResult,
        expanded: bool,
        partial: bool,
    ) -> wasmtime::Result<Option<String>>
    where
        S::Data: Send,
    {
        match self {
            ToolGuest::Current(g) => g.call_render_result(store, tool, result, expanded, partial),
            ToolGuest::V1(g) => g.call_render_result(store, tool, &result.clone().conv(), expanded, partial),
        }
    }
}

versioned_export!(
    /// Where a component's `offers` export is, in the version it was built against.
    OffersIndices,
    /// An instance's `offers` export, in 0.2.0's types whichever version it was built against.
    OffersGuest,
    "offers",
    o2::GuestIndices => o2::Guest,
    o1::GuestIndices => o1::Guest
);

impl OffersGuest {
    pub(crate) fn call_list_resources<S: AsContextMut>(
        &self,
        store: S,
    ) -> wasmtime::Result<Vec<o2::ResourceInfo>>
    where
        S::Data: Send,
    {
        match self {
            OffersGuest::Current(g) => g.call_list_resources(store),
            OffersGuest::V1(g) => g.call_list_resources(store).map(Conv::conv),
        }
    }

    pub(crate) fn call_list_resource_templates<S: AsContextMut>(
        &self,
        store: S,
    ) -> wasmtime::Result<Vec<o2::ResourceInfo>>
    where
        S::Data: Send,
    {
        match self {
            OffersGuest::Current(g) => g.call_list_resource_templates(store),
            OffersGuest::V1(g) => g.call_list_resource_templates(store).map(Conv::conv),
        }
    }

    pub(crate) fn call_read_resource<S: AsContextMut>(
        &self,
        store: S,
        uri: &str,
    ) -> wasmtime::Result<Result<Vec<o2::ResourceContents>, o2::OfferError>>
    where
        S::Data: Send,
    {
        match self {
            OffersGuest::Current(g) => g.call_read_resource(store, uri),
            OffersGuest::V1(g) => g.call_read_resource(store, uri).map(Conv::conv),
        }
    }

    pub(crate) fn call_list_prompts<S: AsContextMut>(&self, store: S) -> wasmtime::Result<Vec<o2::Prompt>>
    where
        S::Data: Send,
    {
        match self {
            OffersGuest::Current(g) => g.call_list_prompts(store),
            OffersGuest::V1(g) => g.call_list_prompts(store).map(Conv::conv),
        }
    }

    pub(crate) fn call_get_prompt<S: AsContextMut>(
        &self,
        store: S,
        name: &str,
        arguments: &[(String, String)],
    ) -> wasmtime::Result<Result<o2::PromptResult, o2::OfferError>>
    where
        S::Data: Send,
    {
        match self {
            OffersGuest::Current(g) => g.call_get_prompt(store, name, arguments),
            OffersGuest::V1(g) => g.call_get_prompt(store, name, arguments).map(Conv::conv),
        }
    }

    pub(crate) fn call_complete<S: AsContextMut>(
        &self,
        store: S,
        kind: o2::CompletionKind,
        name: &str,
        argument: &str,
        value: &str,
    ) -> wasmtime::Result<Vec<String>>
    where
        S::Data: Send,
    {
        match self {
            OffersGuest::Current(g) => g.call_complete(store, kind, name, argument, value),
            OffersGuest::V1(g) => g.call_complete(store, kind.conv(), name, argument, value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_0_1_plugin_sees_audio_and_resources_as_the_model_does() {
        let blocks = vec![
            t2::Content::Text("t".into()),
            t2::Content::Audio(t2::Audio {
                data: "UklGRg==".into(),
                mime_type: "audio/wav".into(),
            }),
            t2::Content::Resource(t2::EmbeddedResource {
                uri: "test://r".into(),
                mime_type: Some("text/plain".into()),
                body: t2::ResourceBody::Text("inside".into()),
            }),
            t2::Content::Resource(t2::EmbeddedResource {
                uri: "test://p.png".into(),
                mime_type: Some("image/png".into()),
                body: t2::ResourceBody::Blob("iVBOR".into()),
            }),
        ];
        let old: Vec<t1::Content> = blocks.conv();
        let texts: Vec<String> = old
            .iter()
            .map(|c| match c {
                t1::Content::Text(text) => text.clone(),
                t1::Content::Image(image) => format!("<{}>", image.mime_type),
            })
            .collect();
        assert_eq!(texts, ["t", "[audio audio/wav omitted]", "inside", "<image/png>"]);
    }

    #[test]
    fn a_0_1_handler_that_changes_one_block_keeps_the_others_whole() {
        let original = vec![
            t2::Content::Text("SECRET=x".into()),
            t2::Content::Audio(t2::Audio {
                data: "UklGRg==".into(),
                mime_type: "audio/wav".into(),
            }),
        ];
        let shown: Vec<t1::Content> = original.clone().conv();
        let mut changed = shown.clone();
        changed[0] = t1::Content::Text("SECRET=[redacted]".into());
        let back = restored(changed, &shown, &original);
        assert!(matches!(&back[0], t2::Content::Text(t) if t == "SECRET=[redacted]"));
        assert!(matches!(&back[1], t2::Content::Audio(a) if a.mime_type == "audio/wav"));
        // A block the handler added or moved is its own, converted.
        let added = restored(vec![shown[1].clone(), shown[0].clone()], &shown, &original);
        assert!(matches!(&added[0], t2::Content::Text(t) if t == "[audio audio/wav omitted]"));
    }

    #[test]
    fn a_0_1_declaration_leaves_long_running_to_the_host() {
        let spec = t1::ToolSpec {
            name: "n".into(),
            label: "n".into(),
            description: "d".into(),
            parameters: "{}".into(),
            output_schema: None,
            prompt_snippet: None,
            prompt_guidelines: vec!["g".into()],
            constrained_sampling: None,
            execution_mode: Some(t1::ExecutionMode::Sequential),
            exposure: t1::Exposure::Deferred,
            annotations: None,
            namespace: None,
            default_active: Some(false),
            renders_own_frame: true,
            prepares_arguments: false,
            mutates_files: true,
            prepares_loadout: false,
        };
        let spec: t2::ToolSpec = spec.conv();
        assert_eq!(spec.long_running, None);
        assert!(matches!(spec.exposure, t2::Exposure::Deferred));
        assert!(matches!(spec.execution_mode, Some(t2::ExecutionMode::Sequential)));
        assert!(spec.renders_own_frame && spec.mutates_files);
    }
}
