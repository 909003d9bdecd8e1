use std::sync::Arc;

use super::transcript::{ToolChanges, ToolDeclaration};
use super::*;
use crate::definition::ToolLoadout;
use crate::types::ToolResult;
use serde_json::json;

fn tool(name: &str, exposure: Exposure) -> ToolDefinition {
    let mut d = ToolDefinition::new(
        name,
        format!("The {name} tool"),
        json!({"type": "object"}),
        |_run, _ctx| async { Ok(ToolResult::text("ok")) },
    );
    d.exposure = exposure;
    d
}

fn builtins() -> Vec<ToolDefinition> {
    ["read", "bash", "edit", "write", "grep", "find", "ls"]
        .iter()
        .map(|n| {
            let mut d = tool(n, Exposure::Direct);
            d.source = ToolSource::Builtin;
            d
        })
        .collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_spec_allowlist_example_filters_built_ins_too() {
    let sources = RegistrySources {
        builtins: builtins(),
        extensions: vec![
            tool("ask_question", Exposure::Direct),
            tool("dynamic_tool", Exposure::Direct),
        ],
        embedder: Vec::new(),
    };
    let selection = Selection {
        tools: Some(names(&["*_tool", "ask_*", "re*"])),
        exclude_tools: Some(names(&["ask*"])),
        ..Default::default()
    };
    let registry = Registry::new(sources, &selection).unwrap();
    assert_eq!(registry.registered_names(), ["read", "dynamic_tool"]);
    assert_eq!(registry.active_names(), ["read", "dynamic_tool"]);
}

#[test]
fn mcp_tools_survive_an_allowlist_without_mcp_entries_but_only_tool_search_can_activate_them() {
    let sources = RegistrySources {
        builtins: builtins(),
        extensions: vec![
            tool("mcp__docs__search", Exposure::Direct),
            tool("mcp__docs__fetch", Exposure::Deferred),
        ],
        embedder: Vec::new(),
    };
    let selection = Selection {
        tools: Some(names(&["read"])),
        ..Default::default()
    };
    let mut registry = Registry::new(sources.clone(), &selection).unwrap();
    assert_eq!(
        registry.registered_names(),
        ["read", "mcp__docs__search", "mcp__docs__fetch"]
    );
    registry.set_active_tools(&names(&["read", "mcp__docs__search", "mcp__docs__fetch"]));
    // No tool_search: neither MCP tool is activatable.
    assert_eq!(registry.active_names(), ["read"]);

    // tool_search must itself be allowed to be registered.
    let with_search = Selection {
        tools: Some(names(&["read", "tool_search"])),
        ..Default::default()
    };
    let shared = Registry::with_tool_search(sources.clone(), &with_search).unwrap();
    shared.update(|r| r.set_active_tools(&names(&["read", "mcp__docs__search", "mcp__docs__fetch"])));
    assert_eq!(
        shared.read(|r| r.active_names()),
        ["read", "mcp__docs__fetch"],
        "a direct MCP tool stays inactive"
    );

    let filtering = Selection {
        tools: Some(names(&["read", "mcp__other__*"])),
        ..Default::default()
    };
    let registry = Registry::new(sources, &filtering).unwrap();
    assert_eq!(registry.registered_names(), ["read"]);
}

#[test]
fn a_refresh_activates_new_tools_but_not_ones_the_user_deactivated() {
    let mut registry = Registry::new(
        RegistrySources {
            builtins: builtins(),
            ..Default::default()
        },
        &Selection::default(),
    )
    .unwrap();
    assert_eq!(registry.active_names(), ["read", "bash", "edit", "write"]);
    registry.set_active_tools(&names(&["read", "edit"]));
    registry.register(tool("fresh", Exposure::Direct));
    assert_eq!(registry.active_names(), ["read", "edit", "fresh"]);
    // Re-registering keeps the position and does not re-activate what was deactivated.
    registry.set_active_tools(&names(&["read"]));
    registry.register(tool("fresh", Exposure::Direct));
    assert_eq!(registry.active_names(), ["read"]);
    assert_eq!(
        registry.registered_names().last().map(String::as_str),
        Some("fresh")
    );
    // A tool whose exposure changes from hidden to direct counts as new.
    registry.register(tool("ghost", Exposure::Hidden));
    assert_eq!(registry.active_names(), ["read"]);
    registry.register(tool("ghost", Exposure::Direct));
    assert_eq!(registry.active_names(), ["read", "ghost"]);
}

#[test]
fn pending_names_are_forgotten_when_a_run_starts() {
    let mut registry = Registry::new(
        RegistrySources {
            builtins: builtins(),
            ..Default::default()
        },
        &Selection::default(),
    )
    .unwrap();
    let declared = |n: &str| ToolDeclaration {
        name: n.into(),
        description: String::new(),
        parameters: json!({}),
        constrained_sampling: None,
    };
    registry.restore_from_transcript(&[ToolChanges {
        tools_added: vec![declared("read"), declared("late")],
        ..Default::default()
    }]);
    assert_eq!(registry.active_names(), ["read"]);
    assert_eq!(registry.pending_names(), ["late"]);
    registry.start_run();
    registry.register(tool("late", Exposure::Direct));
    // Registration still activates it as a new tool, but not because it was pending.
    assert_eq!(registry.pending_names(), [] as [String; 0]);
    assert_eq!(registry.active_names(), ["read", "late"]);
}

#[test]
fn a_panicking_loadout_hook_is_reported_and_the_others_apply() {
    let mut panics = tool("panics", Exposure::Direct);
    panics.prepare_loadout = Some(Arc::new(|_: &ToolLoadout| panic!("boom")));
    let mut renames = tool("renames", Exposure::Direct);
    renames.prepare_loadout = Some(Arc::new(|loadout: &ToolLoadout| {
        assert_eq!(loadout.exposure("panics"), Exposure::Direct);
        let mut changes = crate::definition::LoadoutChanges::default();
        changes.descriptions.insert("panics".into(), "Renamed".into());
        changes.descriptions.insert("not_active".into(), "ignored".into());
        Ok(Some(changes))
    }));
    let mut registry = Registry::new(
        RegistrySources {
            embedder: vec![panics, renames],
            ..Default::default()
        },
        &Selection::default(),
    )
    .unwrap();
    let errors = registry.take_loadout_errors();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].extension_path, "<sdk:panics>");
    assert_eq!(errors[0].error, "prepareLoadout panicked");
    assert_eq!(registry.declarations()[0].description, "Renamed");
    assert_eq!(
        registry.tool_infos()[0].description,
        "The panics tool",
        "ToolInfo keeps the registered text"
    );
}

#[test]
fn selections_are_validated_with_pi_texts() {
    let bad = |tools: &[&str]| {
        Registry::new(
            RegistrySources::default(),
            &Selection {
                tools: Some(names(tools)),
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        bad(&["read", "+grep"]),
        "Invalid tools option: tool names cannot be mixed with +name or -name entries"
    );
    assert_eq!(
        bad(&["+gr*"]),
        "Invalid tools option: +name and -name entries take exact tool names, not patterns: +gr*"
    );
    assert_eq!(
        apply_tool_modifiers(
            &names(&["read", "bash"]),
            &names(&["+grep", "-read", "+bash", "-nope", "+"])
        ),
        ["bash", "grep"]
    );
    assert!(ToolMatcher::new(&names(&["a.b*"])).matches("a.bc"));
    assert!(
        !ToolMatcher::new(&names(&["a.b*"])).matches("axbc"),
        "only * is special"
    );
}

#[test]
fn loadout_hooks_run_with_the_shared_registry_unlocked() {
    // A hook that reads the registry: were the lock held while hooks run, this would never return.
    let handle: Arc<std::sync::OnceLock<WeakRegistry>> = Arc::new(std::sync::OnceLock::new());
    let seen = handle.clone();
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = reads.clone();
    let mut watcher = tool("watcher", Exposure::Direct);
    watcher.prepare_loadout = Some(Arc::new(move |_: &ToolLoadout| {
        if let Some(registry) = seen.get().and_then(WeakRegistry::upgrade) {
            registry.read(|r| r.active_names());
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(Some(toolwright_sdk::LoadoutChanges {
            hidden_declarations: vec!["other".into()],
            ..Default::default()
        }))
    }));
    let sources = RegistrySources {
        embedder: vec![watcher, tool("other", Exposure::Direct)],
        ..Default::default()
    };
    let shared = SharedRegistry::new(Registry::new(sources, &Selection::default()).unwrap());
    handle.set(shared.downgrade()).unwrap();
    let (done, finished) = std::sync::mpsc::channel();
    let updating = shared.clone();
    std::thread::spawn(move || {
        updating.update(|r| r.set_active_tools(&names(&["other", "watcher"])));
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the hook ran with the registry unlocked");
    assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1);
    // The hook's changes were committed.
    assert_eq!(shared.read(|r| r.declared_names()), ["watcher"]);
}
