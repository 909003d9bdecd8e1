//! One engine with its linker and its cache, and a component linked on it: what a plugin's instances are
//! instantiated from.

use std::path::{Path, PathBuf};

use wasmtime::component::{InstancePre, Linker};

use crate::cache::{self, Compilation, ComponentCache, Digest, FileId, FileStamp};
use crate::engine;
use crate::error::PluginError;
use crate::state::PluginState;

/// One engine with its linker and cache.
pub(crate) struct Runtime {
    /// The engine (and its epoch thread).
    pub(crate) engine: engine::PluginEngine,
    linker: Linker<PluginState>,
    /// Its compiled components on disk.
    pub(crate) cache: ComponentCache,
    /// Compiled with fuel.
    pub(crate) metered: bool,
}

impl Runtime {
    /// An engine (`metered`: with fuel) with room for `instances` at once, its linker, with WASI and what
    /// `imports` adds, and its cache in `cache_dir`.
    pub(crate) fn new(
        cache_dir: Option<PathBuf>,
        metered: bool,
        instances: u32,
        imports: fn(&mut Linker<PluginState>) -> wasmtime::Result<()>,
    ) -> Result<Self, PluginError> {
        let engine = engine::PluginEngine::new(metered, instances)
            .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        let mut linker = Linker::new(engine.engine());
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .and_then(|()| imports(&mut linker))
            .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        let cache = ComponentCache::new(cache_dir, engine.fingerprint());
        Ok(Runtime {
            engine,
            linker,
            cache,
            metered,
        })
    }
}

/// A component pre-linked for instantiation, and where its exports are.
pub(crate) struct Linked {
    pub(crate) pre: InstancePre<PluginState>,
    pub(crate) tool: Option<crate::v1::ToolIndices>,
    pub(crate) handler: Option<crate::handler::Indices>,
    /// Its MCP resources and prompts, when it offers some (`crate::offers`).
    pub(crate) offers: Option<crate::v1::OffersIndices>,
    /// The cached file its memory image is mapped from, where the pages its calls write are kept resident
    /// (`crate::instances::resident`; none when it was compiled here, or when which file was mapped is not known
    /// for sure: the entry renamed over during the map, or not found by `stat`).
    pub(crate) image: Option<FileId>,
}

/// Map (or compile) the component whose SHA-256 is `digest` and link it: from the cache, else from `bytes`,
/// else from the file at `path` if it still hashes to `digest`.
pub(crate) fn link(
    runtime: &Runtime,
    path: &Path,
    bytes: Option<&[u8]>,
    digest: &Digest,
) -> Result<(Linked, Compilation), PluginError> {
    let engine = runtime.engine.engine();
    let (component, compilation, image) = match runtime.cache.mapped(engine, digest) {
        Some((component, file)) => {
            // Merging written runs only helps a reset by the pages PAGEMAP_SCAN finds (`crate::instances::resident`).
            let file = file.filter(|_| runtime.engine.pagemap_scan());
            (component, Compilation::Cached, file)
        }
        None => {
            let read;
            let bytes = match bytes {
                Some(bytes) => bytes,
                None => {
                    read = read_file(path)?.0;
                    if cache::digest(&read) != *digest {
                        return Err(PluginError::Changed {
                            path: path.to_owned(),
                        });
                    }
                    &read
                }
            };
            let component =
                runtime
                    .cache
                    .compile(engine, bytes, digest)
                    .map_err(|e| PluginError::Invalid {
                        path: path.to_owned(),
                        message: format!("{e:#}"),
                    })?;
            // Compiled here: its memory image is anonymous memory, not a file's (`resident`).
            (component, Compilation::Compiled, None)
        }
    };
    let incompatible = |message: String| PluginError::Incompatible {
        path: path.to_owned(),
        message,
    };
    let pre = runtime
        .linker
        .instantiate_pre(&component)
        .map_err(|e| incompatible(format!("{e:#}")))?;
    let tool = crate::v1::ToolIndices::new(&pre);
    let handler = crate::handler::Indices::new(&pre);
    let offers = crate::v1::OffersIndices::new(&pre);
    if tool.is_none() && handler.is_none() {
        return Err(incompatible(
            "it exports neither `toolwright:plugin/tool@0.2.0` nor `toolwright:plugin/handler@0.2.0` (nor 0.1.0's)"
                .into(),
        ));
    }
    Ok((
        Linked {
            pre,
            tool,
            handler,
            offers,
            image,
        },
        compilation,
    ))
}

/// The bytes of the file at `path`, and its stamp as it was when it was opened.
pub(crate) fn read_file(path: &Path) -> Result<(Vec<u8>, Option<FileStamp>), PluginError> {
    use std::io::Read as _;
    let error = |source| PluginError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(error)?;
    let meta = file.metadata().map_err(error)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes).map_err(error)?;
    Ok((bytes, FileStamp::of(&meta)))
}
