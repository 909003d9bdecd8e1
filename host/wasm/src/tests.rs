use super::*;
use crate::grants::network_allows;

fn spec(name: &str, parameters: serde_json::Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        parameters,
        ..Default::default()
    }
}

#[test]
fn a_tool_schema_the_host_cannot_enforce_refuses_the_plugin_naming_the_tool() {
    let metadata = PluginMetadata {
        name: "hostile".into(),
        version: "0.1.0".into(),
        description: String::new(),
        capabilities: Vec::new(),
    };
    let fine = spec("fine", serde_json::json!({"type": "object"}));
    assert_eq!(validate(&metadata, std::slice::from_ref(&fine)), Ok(()));
    let looping = spec("looping", serde_json::json!({"$ref": "#"}));
    assert_eq!(
        validate(&metadata, &[fine.clone(), looping]),
        Err(
            "the parameter schema of tool `looping` is refused: the schema at # refers to itself without \
             descending into the value (# -> #)"
                .into()
        )
    );
    let pattern = spec(
        "pattern",
        serde_json::json!({"properties": {"a": {"pattern": "(?<!"}}}),
    );
    let err = validate(&metadata, &[pattern]).unwrap_err();
    assert!(
        err.starts_with(
            "the parameter schema of tool `pattern` is refused: the pattern \"(?<!\" at #/properties/a/pattern \
             does not compile: "
        ),
        "{err}"
    );
}

fn addr(text: &str) -> std::net::SocketAddr {
    text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[tokio::test]
async fn network_rules_match_addresses_ports_and_names_resolved_again() {
    let pattern = |t: &str| toolwright_core::policy::NetPattern::parse(t).unwrap_or_else(|| panic!("{t}"));
    let ip = NetRule::from_pattern(&pattern("127.0.0.1:8080"));
    assert!(ip.allows(&addr("127.0.0.1:8080")));
    assert!(
        ip.allows(&addr("[::ffff:127.0.0.1]:8080")),
        "an IPv4-mapped address is the same host"
    );
    assert!(!ip.allows(&addr("127.0.0.1:8081")));
    assert!(!ip.allows(&addr("127.0.0.2:8080")));
    let any = NetRule::from_pattern(&pattern("*:443"));
    assert!(any.allows(&addr("10.1.2.3:443")) && !any.allows(&addr("10.1.2.3:80")));
    // A name whose addresses were unknown at load (or changed since) is resolved when it is checked.
    let stale = NetRule {
        ips: Some(Vec::new()),
        name: Some("localhost".into()),
        port: Some(8080),
    };
    assert!(!stale.allows(&addr("127.0.0.1:8080")));
    let (rules, none) = (Arc::new(vec![stale]), Arc::new(Vec::new()));
    assert!(network_allows(rules.clone(), none.clone(), addr("127.0.0.1:8080")).await);
    assert!(!network_allows(rules.clone(), none.clone(), addr("127.0.0.1:9090")).await);
    assert!(!network_allows(rules.clone(), none, addr("10.9.9.9:8080")).await);
    // Deny wins by address: a name that resolves to a denied address is refused.
    let deny = Arc::new(vec![NetRule::from_pattern(&pattern("127.0.0.1:*"))]);
    assert!(!network_allows(rules, deny, addr("127.0.0.1:8080")).await);
}

#[test]
fn the_digests_the_build_computed_are_the_embedded_components_sha256() {
    // A start trusts these instead of hashing the embedded bytes: a wrong one would misname the component.
    let (Some(builtins), Some(digests)) = (components::BUILTINS, components::BUILTIN_DIGESTS) else {
        return; // built with TOOLWRIGHT_SKIP_WASM_BUILD: nothing is embedded
    };
    assert_eq!(builtins.len(), digests.len());
    for ((name, bytes), (digest_name, digest)) in builtins.iter().zip(digests) {
        assert_eq!(name, digest_name);
        assert_eq!(&cache::digest(bytes), digest, "the digest of the embedded {name}");
    }
    assert_eq!(
        components::CODEMODE.map(cache::digest),
        components::CODEMODE_DIGEST,
        "the digest of the embedded codemode"
    );
}

/// The `ls` reference component, when the build embedded it.
fn ls_component() -> Option<&'static [u8]> {
    let builtins = components::BUILTINS?;
    let (_, ls) = builtins
        .iter()
        .find(|(name, _)| *name == "ls")
        .expect("the ls component");
    Some(ls)
}

/// A call that runs alone (a pipeline that works in place, as `toolwright exec` and `mcp` run theirs) has the next
/// call's spare made after it, and the next call runs in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_alone_with_a_fresh_instance_takes_the_spare_made_after_the_one_before() {
    use toolwright_core::{AssistantMessage, NoEvents, Pipeline, ToolCall};
    let Some(ls) = ls_component() else {
        return; // built with TOOLWRIGHT_SKIP_WASM_BUILD: nothing is embedded
    };
    let ws = tempfile::tempdir().expect("a workspace");
    std::fs::write(ws.path().join("a.txt"), "a").expect("a file");
    let host = PluginHost::new(None).expect("a plugin host");
    let plugin = host.load_bytes(Path::new("ls.wasm"), ls).expect("ls loads");
    // Its instances are taken to be dear to make: the spare is made whether or not the calls come at once
    // (`crate::instances::Turnover`).
    plugin
        .inner
        .turnover
        .instantiated(std::time::Duration::from_secs(1));
    let mut grants = WasmGrants::none(ws.path());
    let root = toolwright_sdk::paths::normalize(&ws.path().to_string_lossy());
    grants.preopens.push(Preopen {
        host: ws.path().to_path_buf(),
        guest: root,
        write: false,
    });
    let tools = vec![toolwright_core::definition::wrap_tool_definition(
        &plugin.tool_definitions(&grants)[0],
        None,
    )];
    let pipeline = Pipeline::new().with_work_here(true);
    let message = AssistantMessage {
        tool_calls: vec![ToolCall::new("c", "ls", serde_json::json!({}))],
        ..Default::default()
    };
    let call = || async {
        let cancel = tokio_util::sync::CancellationToken::new();
        let outcome = pipeline
            .execute_tool_calls(&tools, &message, &NoEvents, &cancel)
            .await;
        outcome.messages[0].content[0].as_text().map(str::to_owned)
    };
    assert_eq!(call().await.as_deref(), Some("a.txt"));
    // The first call had a spare made after it; it waits in the pool for the next call.
    let waited = Instant::now();
    while plugin.inner.pool.spares() != (0, 1) {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(20),
            "no spare was made"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(call().await.as_deref(), Some("a.txt"));
    assert_eq!(
        plugin.inner.pool.spares().0,
        1,
        "the second call ran in the spare"
    );
}

#[test]
fn spares_hold_at_most_half_of_the_idle_instances_and_give_way_to_reuse_and_to_memory_wanted_back() {
    use crate::instances::make_spare;
    use crate::instances::pool::{MAX_IDLE, MAX_SPARES};
    let Some(ls) = ls_component() else {
        return; // built with TOOLWRIGHT_SKIP_WASM_BUILD: nothing is embedded
    };
    let ws = tempfile::tempdir().expect("a workspace");
    let host = PluginHost::new(None).expect("a plugin host");
    let plugin = host.load_bytes(Path::new("ls.wasm"), ls).expect("ls loads");
    let inner = &plugin.inner;
    // A spare for each of more sets of grants than spares may be kept: only MAX_SPARES are.
    let fresh: Vec<Arc<WasmGrants>> = (0..MAX_SPARES + 4)
        .map(|_| Arc::new(WasmGrants::none(ws.path())))
        .collect();
    for grants in &fresh {
        make_spare(&**inner, grants);
    }
    assert_eq!(inner.pool.spares().1, MAX_SPARES as usize);
    // Reused instances fill the rest of the idle places, then take spares' places.
    let mut reusing = WasmGrants::none(ws.path());
    reusing.reuse = Some(toolwright_core::policy::InstanceReuse {
        max_calls: 1000,
        idle: std::time::Duration::from_secs(60),
    });
    let reusing = Arc::new(reusing);
    let linked = inner.linked().expect("ls links");
    let evicting = 2;
    let budget = host.memory_budget();
    let mut used_before_evicting = 0;
    for i in 0..(MAX_IDLE - MAX_SPARES + evicting) {
        if i == MAX_IDLE - MAX_SPARES {
            used_before_evicting = budget.used();
        }
        let mut store = inner.store(&reusing, instances::Call::none()).expect("a store");
        let instance = linked.pre.instantiate(&mut store).expect("an instance");
        assert!(
            matches!(
                inner.pool.put(&reusing, store, instance, 1),
                instances::Put::Kept(_)
            ),
            "reused instance {i} was not kept"
        );
    }
    assert_eq!(
        inner.pool.spares().1,
        (MAX_SPARES - evicting) as usize,
        "each reused instance past the free places took a spare's"
    );
    // The evicted spares' memory went back to the budget at once (their stores may still wait to be dropped on
    // the background thread): each reused instance added what each evicted spare gave back.
    assert_eq!(
        budget.used(),
        used_before_evicting,
        "an evicted spare's memory is given back when it is evicted"
    );
    // No room for another spare while the idle places are full.
    make_spare(&**inner, &Arc::new(WasmGrants::none(ws.path())));
    assert_eq!(inner.pool.spares().1, (MAX_SPARES - evicting) as usize);
    // Memory wanted back comes from the spares first: the reused instances stay.
    assert!(host.instances.pools().drop_idle(true));
    assert_eq!(inner.pool.spares().1, 0);
    assert!(
        inner.pool.take(&reusing).is_some(),
        "a reused instance is still there"
    );
    assert!(host.instances.pools().drop_idle(false));
    assert!(inner.pool.take(&reusing).is_none());
}

/// The `static`s of `source` whose type can change behind a shared reference (or that are `static mut`), and
/// every thread-local, by name. The crate has none: state that outlives a call belongs to an owner (see the
/// crate map).
fn mutable_statics(source: &str) -> Vec<String> {
    const INTERIOR: &[&str] = &[
        "Mutex",
        "RwLock",
        "Atomic",
        "OnceLock",
        "LazyLock",
        "OnceCell",
        "Cell<",
        "UnsafeCell",
        "Lazy<",
        "Condvar",
        "Semaphore",
        "Notify",
    ];
    let mut found = Vec::new();
    let lines: Vec<&str> = source.lines().collect();
    for (at, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        if code.contains(concat!("thread_", "local!")) {
            found.push(format!("a thread-local at line {}", at + 1));
            continue;
        }
        let rest = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|vis| code.strip_prefix(vis))
            .unwrap_or(code);
        let Some(rest) = rest.strip_prefix(concat!("stat", "ic ")) else {
            continue;
        };
        let name: String = rest
            .trim_start_matches("mut ")
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The type runs to the `=` (a statement may span lines).
        let mut declaration = rest.to_owned();
        let mut next = at + 1;
        while !declaration.contains('=') && next < lines.len() {
            declaration.push_str(lines[next]);
            next += 1;
        }
        let ty = declaration.split('=').next().unwrap_or_default();
        if rest.starts_with("mut ") || INTERIOR.iter().any(|t| ty.contains(t)) {
            found.push(name);
        }
    }
    found
}

#[test]
fn no_process_wide_mutable_state() {
    fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("the crate's sources").flatten() {
            let path = entry.path();
            if path.is_dir() {
                sources(&path, into);
            } else if path.extension().is_some_and(|e| e == "rs") {
                into.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(files.len() > 10, "the sources were not found");
    let mut refused = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(&root)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        let source = std::fs::read_to_string(&file).expect("a source file");
        for name in mutable_statics(&source) {
            refused.push(format!("{relative}: {name}"));
        }
    }
    assert!(
        refused.is_empty(),
        "process-wide mutable state: give it an owner (a host, an instance, a plugin): {refused:?}"
    );
}

#[test]
fn the_check_for_mutable_statics_sees_them() {
    let source = concat!(
        "static A: AtomicU64 = AtomicU64::new(0);\n",
        "pub(crate) static B: std::sync::Mutex<Vec<u8>> =\n    std::sync::Mutex::new(Vec::new());\n",
        "static C: &str = \"fine\";\n",
        "    static D: OnceLock<Instant> = OnceLock::new();\n",
        "static mut E: u8 = 0;\n",
        "fn f(x: &'static str) {}\n",
        "thread_",
        "local! { static F: Cell<u8> = Cell::new(0); }\n",
    );
    assert_eq!(
        mutable_statics(source),
        vec!["A", "B", "D", "E", "a thread-local at line 8"]
    );
}

#[test]
fn hosts_are_shared_by_clones_per_cache_directory_and_not_beyond_their_owner() {
    let hosts = Hosts::default();
    let first = hosts.get(None).unwrap();
    assert!(Arc::ptr_eq(&first, &hosts.clone().get(None).unwrap()));
    let dir = tempfile::tempdir().unwrap();
    let cached = hosts.get(Some(dir.path().to_owned())).unwrap();
    assert!(!Arc::ptr_eq(&first, &cached), "one host per cache directory");
    // Another owner's hosts are its own: nothing is shared through the process.
    assert!(!Arc::ptr_eq(&first, &Hosts::default().get(None).unwrap()));
    // Held weakly: once nothing holds it, the next caller gets a new one.
    let weak = Arc::downgrade(&first);
    drop(first);
    assert!(weak.upgrade().is_none());
    let again = hosts.get(None).unwrap();
    assert_eq!(Arc::strong_count(&again), 1);
}
