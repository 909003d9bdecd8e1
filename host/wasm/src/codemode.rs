//! pi's `codemode` tool (spec §11): model-written JavaScript that calls other tools.
//!
//! The declaration and the loadout hook come from the `toolwright-tool-codemode` crate, natively; scripts run
//! only in its wasm component (the Boa engine inside), loaded on the first call, so a session that never runs a
//! script never compiles it. The component gets no files, no processes and no environment: only a temp
//! directory for spilled output, the plugin limits (memory, deadline), and nested calls through the `host`
//! import, which the session's runner checks like any other call. Registered inactive (`defaultActive: false`):
//! name it (`--allow codemode`, `--allow +codemode`) to use it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use toolwright_sdk::LoadoutHook;
use toolwright_tool_codemode::Codemode;

use crate::{Plugin, PluginHost, Preopen, WasmGrants};
use toolwright_core::definition::{ToolContext, ToolDefinition, ToolLoadout, ToolSource};
use toolwright_core::tool::{ToolError, ToolExecution};

pub use toolwright_tool_codemode::CODEMODE_TOOL_NAME;

/// Where and how the codemode component runs.
#[derive(Debug, Clone)]
pub struct CodemodeOptions {
    /// The workspace.
    pub cwd: PathBuf,
    /// The compiled-component cache.
    pub cache_dir: Option<PathBuf>,
    /// The wall-clock limit of one script, nested calls included (none: only cancellation stops it).
    pub timeout: Option<std::time::Duration>,
}

impl CodemodeOptions {
    /// The defaults for `cwd`: the default cache, and the plugins' default deadline.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        CodemodeOptions {
            cwd: cwd.into(),
            cache_dir: Some(crate::default_cache_dir()),
            timeout: Some(crate::DEFAULT_TIMEOUT),
        }
    }
}

/// The process's plugin host (its epoch ticker enforces the deadline), the codemode plugin and its tool.
type Loaded = (Arc<PluginHost>, Plugin, ToolDefinition);

/// The component, loaded once.
struct Component {
    options: CodemodeOptions,
    /// The runtime (its epoch ticker enforces the deadline), the plugin and its tool.
    loaded: OnceLock<Result<Loaded, String>>,
}

impl Component {
    fn grants(&self) -> WasmGrants {
        let mut grants = WasmGrants::none(&self.options.cwd);
        let temp = std::env::temp_dir();
        let temp_text = toolwright_sdk::paths::normalize(&temp.to_string_lossy());
        grants.preopens = vec![Preopen {
            host: temp,
            guest: temp_text.clone(),
            write: true,
        }];
        grants.temp_dir = Some(temp_text);
        grants.timeout = self.options.timeout;
        grants
    }

    fn load(&self) -> Result<ToolDefinition, String> {
        let loaded = self.loaded.get_or_init(|| {
            let bytes = crate::components::CODEMODE
                .ok_or("codemode is not available: this build skipped the wasm components")?;
            let host = PluginHost::shared(self.options.cache_dir.clone()).map_err(|e| e.to_string())?;
            let plugin = host
                .load_bytes(Path::new("builtin:codemode"), bytes)
                .map_err(|e| format!("cannot load the codemode component: {e}"))?;
            let definition = plugin
                .tool_definitions(&self.grants())
                .into_iter()
                .find(|d| d.name == CODEMODE_TOOL_NAME)
                .ok_or("the codemode component has no codemode tool")?;
            Ok((host, plugin, definition))
        });
        loaded.as_ref().map(|(_, _, d)| d.clone()).map_err(Clone::clone)
    }
}

/// The `codemode` tool definition.
pub fn definition(options: CodemodeOptions) -> ToolDefinition {
    let component = Arc::new(Component {
        options,
        loaded: OnceLock::new(),
    });
    let execute = move |run: ToolExecution, ctx: Option<ToolContext>| {
        let component = component.clone();
        async move {
            // Compiling the component (first call, cold cache) takes seconds: off the async workers.
            let loaded = tokio::task::spawn_blocking(move || component.load())
                .await
                .map_err(|e| ToolError::new(format!("codemode did not load: {e}")))?;
            let inner = loaded.map_err(ToolError::new)?;
            inner.execute.execute(run, ctx).await
        }
    };
    let mut definition = ToolDefinition::from_spec(
        &toolwright_sdk::declaration(&Codemode),
        ToolSource::Builtin,
        execute,
    );
    definition.prepare_loadout = Some(Arc::new(|loadout: &ToolLoadout| {
        Codemode.prepare_loadout(&loadout.to_sdk())
    }));
    // A script reaches nothing but the tools it calls (each audited as a nested call) and its own output.
    definition.origin = Some(Arc::new(toolwright_core::audit::Origin {
        runtime: toolwright_core::audit::Runtime::Wasm,
        grants: Some(Vec::new()),
        ..Default::default()
    }));
    definition
}
