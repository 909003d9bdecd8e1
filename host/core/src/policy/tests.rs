use toolwright_sdk::{Capability, CapabilityRequest};

use super::*;

/// The directories of a decision as `(path, writable)`.
fn dirs(e: &Effective) -> Vec<(String, bool)> {
    e.dirs
        .iter()
        .map(|d| (d.path.to_string_lossy().into_owned(), d.write))
        .collect()
}

/// The network patterns of a decision as text.
fn net(patterns: &[NetPattern]) -> Vec<String> {
    patterns.iter().map(ToString::to_string).collect()
}

fn req(c: Capability) -> CapabilityRequest {
    CapabilityRequest::new(c, "because")
}

#[test]
fn intersection_of_requests_and_grants() {
    let policy = PluginPolicy {
        read: vec!["./data".into()],
        write: vec!["./out".into()],
        spawn: vec!["git".into()],
        env: vec!["LANG".into()],
        ..Default::default()
    };
    let e = intersect(
        "p",
        &[
            req(Capability::Read("/".into())),
            req(Capability::Write(".".into())),
            req(Capability::Spawn("git".into())),
            req(Capability::Spawn("curl".into())),
            req(Capability::Env("*".into())),
            req(Capability::Read("/etc".into())),
        ],
        Some(&policy),
        "/w",
        None,
    );
    assert_eq!(
        dirs(&e),
        [("/w/data".to_owned(), false), ("/w/out".to_owned(), true)]
    );
    assert_eq!(e.programs, ["git"]);
    assert_eq!(e.env, ["LANG"]);
    assert_eq!(
        e.decisions[3].refused.as_deref(),
        Some("not granted: add spawn = [\"curl\"] under [plugins.p] in toolwright.toml")
    );
    assert!(e.decisions[5].refused.is_some());
}

#[test]
fn deny_wins() {
    let policy = PluginPolicy {
        read: vec![".".into()],
        deny: Deny {
            read: vec!["./secrets".into()],
            spawn: vec!["git".into()],
            ..Default::default()
        },
        spawn: vec!["git".into()],
        ..Default::default()
    };
    let e = intersect(
        "p",
        &[
            req(Capability::Read(".".into())),
            req(Capability::Spawn("git".into())),
        ],
        Some(&policy),
        "/w",
        None,
    );
    assert!(
        e.dirs.is_empty(),
        "a denied directory inside a grant refuses the grant: {:?}",
        e.dirs
    );
    assert!(e.decisions[0].refused.as_deref().unwrap().contains("deny wins"));
    assert!(e.programs.is_empty());
}

#[test]
fn nothing_without_a_policy() {
    let e = intersect(
        "p",
        &[
            req(Capability::Read(".".into())),
            req(Capability::Env("HOME".into())),
        ],
        None,
        "/w",
        None,
    );
    assert_eq!(
        e,
        Effective {
            decisions: e.decisions.clone(),
            ..Default::default()
        }
    );
    assert!(e.decisions.iter().all(|d| d.refused.is_some()));
}

#[test]
fn parses_kebab_case_and_rejects_unknown_keys() {
    let p = Policy::parse(
        Path::new("t.toml"),
        "[plugins.x]\nread = [\".\"]\ntimeout-ms = 5\ndeny = { env = [\"*\"] }\n",
    )
    .unwrap();
    assert_eq!(p.plugins["x"].timeout_ms, Some(5));
    let err = Policy::parse(Path::new("t.toml"), "[plugins.x]\nraed = [\".\"]\n").unwrap_err();
    assert!(err.to_string().starts_with("t.toml: "), "{err}");
    // The sandbox's keys belong to the built-ins; a plugin's programs are confined to its own grants.
    let err = Policy::parse(Path::new("t.toml"), "[plugins.x]\nsandbox = \"off\"\n").unwrap_err();
    assert!(
        err.to_string().contains("only the [builtins] section sets them"),
        "{err}"
    );
    let p = Policy::parse(
        Path::new("t.toml"),
        "[builtins]\nsandbox = \"read-only\"\nnetwork = [\"crates.io:443\"]\n",
    )
    .unwrap();
    let b = p.builtins.unwrap();
    assert_eq!((b.sandbox, b.network.len()), (Some(SandboxMode::ReadOnly), 1));
    let err = Policy::parse(Path::new("t.toml"), "[builtins]\nfuel = 5\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "t.toml: [builtins] cannot set fuel: the built-in tools are not metered (use timeout-ms)"
    );
    for (text, bad) in [
        ("[plugins.x]\nnetwork = [\"example.com\"]\n", "\"example.com\""),
        (
            "[plugins.x]\ndeny = { network = [\"10.0.0.0/8:*\"] }\n",
            "\"10.0.0.0/8:*\"",
        ),
    ] {
        let err = Policy::parse(Path::new("t.toml"), text).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "t.toml: [plugins.x] network: {bad} is not HOST:PORT (HOST an IP address, a name or *, PORT a \
                 number or *)"
            )
        );
    }
}

#[test]
fn the_projects_grants_are_kept_apart_from_the_trusted_files() {
    let dir = tempfile::tempdir().unwrap();
    let (user, project) = (dir.path().join("user.toml"), dir.path().join("toolwright.toml"));
    let pin = "AB".repeat(32);
    std::fs::write(&user, "[plugins.x]\nread = [\"/etc\"]\n").unwrap();
    std::fs::write(
        &project,
        format!("[plugins.x]\nread = [\".\"]\nsha256 = \"{pin}\"\n"),
    )
    .unwrap();
    let cwd = dir.path().to_string_lossy();
    let p = Policy::load_with_project(&[user], Some(&project), &cwd, None).unwrap();
    assert_eq!(p.plugins["x"].read, ["/etc"]);
    assert_eq!(p.project_plugins["x"].read, ["."]);
    assert_eq!(p.project_plugins["x"].sha256, [pin.to_lowercase()]);
}

#[test]
fn an_untrusted_project_cannot_widen_the_builtins_the_user_restricted() {
    let dir = tempfile::tempdir().unwrap();
    let (user, project) = (dir.path().join("user.toml"), dir.path().join("toolwright.toml"));
    std::fs::write(&user, "[builtins]\nread = [\"./src\"]\n").unwrap();
    std::fs::write(
        &project,
        "[builtins]\nread = [\".\"]\nwrite = [\".\"]\nspawn = [\"*\"]\nenv = [\"*\"]\ntimeout-ms = 500\ndeny = { read = [\"./src/secret\"] }\n",
    )
    .unwrap();
    let cwd = dir.path().to_string_lossy();
    let p = Policy::load_with_project(std::slice::from_ref(&user), Some(&project), &cwd, None).unwrap();
    let b = p.builtins.as_ref().unwrap();
    assert_eq!(b.read, ["./src"]);
    assert!(
        b.write.is_empty() && b.spawn.is_empty() && b.env.is_empty(),
        "{b:?}"
    );
    // It may narrow: its denial and its limit hold.
    assert_eq!(b.deny.read, ["./src/secret"]);
    assert_eq!(b.timeout_ms, Some(500));
    assert!(
        p.ignored
            .iter()
            .any(|l| l.starts_with("[builtins] spawn = [\"*\"] (the user's config sets")),
        "{:?}",
        p.ignored
    );
    // Without a [builtins] of the user's, the project's grants stand where they do not widen the default.
    std::fs::write(&user, "").unwrap();
    let p = Policy::load_with_project(&[user], Some(&project), &cwd, None).unwrap();
    assert_eq!(p.builtins.as_ref().unwrap().read, ["."]);
}

#[test]
fn spawn_grants_are_names_or_tables_with_argument_prefixes() {
    let p = Policy::parse(
        Path::new("t.toml"),
        "[plugins.x]\nspawn = [\"echo\", { program = \"git\", args = [[\"status\"], [\"log\"]] },              { program = \"ls\" }]\nunconfined-spawn = true\n",
    )
    .unwrap();
    let x = &p.plugins["x"];
    assert!(x.unconfined_spawn);
    assert_eq!(
        x.spawn,
        [
            SpawnRule::from("echo"),
            SpawnRule {
                program: "git".into(),
                args: Some(vec![vec!["status".into()], vec!["log".into()]]),
            },
            SpawnRule::from("ls"),
        ]
    );
    assert_eq!(
        x.spawn[1].to_string(),
        "{ program = \"git\", args = [[\"status\"], [\"log\"]] }"
    );
    let err = Policy::parse(
        Path::new("t.toml"),
        "[plugins.x]\nspawn = [{ program = \"git\", arg = [] }]\n",
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("t.toml: "), "{err}");
    let err = Policy::parse(Path::new("t.toml"), "[builtins]\nunconfined-spawn = true\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "t.toml: [builtins] cannot set unconfined-spawn: the built-in tools' programs are not confined"
    );

    // Rules naming the same program add up; one without a restriction lifts them.
    let rules = [
        SpawnRule {
            program: "git".into(),
            args: Some(vec![vec!["status".into()]]),
        },
        SpawnRule {
            program: "*".into(),
            args: Some(vec![vec!["--version".into()]]),
        },
    ];
    let git = SpawnRule::combined("git", &rules).unwrap();
    assert_eq!(
        git.args,
        Some(vec![vec!["status".into()], vec!["--version".into()]])
    );
    assert!(git.allows_args(&["status".into(), "-s".into()]));
    assert!(!git.allows_args(&["-c".into(), "alias.x=!sh".into(), "x".into()]));
    assert_eq!(SpawnRule::combined("cat", &rules[..1]), None);
    let any = SpawnRule::combined("git", &[rules[0].clone(), "git".into()]).unwrap();
    assert_eq!(any.args, None);

    // What only a name grants: `*` does not count.
    let e = intersect(
        "p",
        &[req(Capability::Spawn("git".into()))],
        Some(&PluginPolicy {
            spawn: rules.to_vec(),
            env: vec!["*".into(), "PATH".into(), "LD_PRELOAD".into()],
            deny: Deny {
                env: vec!["LD_PRELOAD".into()],
                ..Default::default()
            },
            ..Default::default()
        }),
        "/w",
        None,
    );
    assert_eq!(e.spawn_rules, [git]);
    assert_eq!(e.settable_env, ["PATH"]);
}

#[test]
fn network_patterns_parse_and_nest() {
    let p = |t: &str| NetPattern::parse(t).unwrap();
    assert_eq!(
        p("Example.COM:443"),
        NetPattern {
            host: "example.com".into(),
            port: Some(443)
        }
    );
    assert_eq!(
        p("[::1]:*"),
        NetPattern {
            host: "::1".into(),
            port: None
        }
    );
    assert_eq!(p("[::1]:*").to_string(), "[::1]:*");
    for bad in ["example.com", ":80", "host:http", "10.0.0.0/8:80", "a b:1"] {
        assert_eq!(NetPattern::parse(bad), None, "{bad}");
    }
    assert!(p("127.0.0.1:80").within(&p("127.0.0.1:*")));
    assert!(p("127.0.0.1:80").within(&p("*:*")));
    assert!(!p("127.0.0.1:*").within(&p("127.0.0.1:80")));
    assert!(!p("10.0.0.1:80").within(&p("127.0.0.1:*")));
    let e = intersect(
        "p",
        &[
            req(Capability::Network("*:443".into())),
            req(Capability::Network("db:5432".into())),
        ],
        Some(&PluginPolicy {
            network: vec!["api.example.com:443".into(), "*:5432".into()],
            deny: Deny {
                network: vec!["db:*".into()],
                ..Default::default()
            },
            ..Default::default()
        }),
        "/w",
        None,
    );
    assert_eq!(net(&e.network), ["api.example.com:443"]);
    assert_eq!(
        e.decisions[1].refused.as_deref(),
        Some("db:5432 is denied by the policy (deny db:*); deny wins")
    );
}

#[test]
fn instance_reuse_is_the_users_choice_and_fresh_wins() {
    let reuse = |text: &str| Policy::parse(Path::new("t.toml"), text).unwrap().plugins["x"].reuse();
    assert_eq!(reuse("[plugins.x]\n"), None);
    assert_eq!(reuse("[plugins.x]\ninstance = \"fresh\"\n"), None);
    assert_eq!(
        reuse("[plugins.x]\ninstance = \"reuse\"\n"),
        Some(InstanceReuse {
            max_calls: DEFAULT_REUSE_MAX_CALLS,
            idle: std::time::Duration::from_millis(DEFAULT_REUSE_IDLE_MS),
        })
    );
    assert_eq!(
        reuse("[plugins.x]\ninstance = \"reuse\"\ninstance-max-calls = 5\ninstance-idle-ms = 7\n"),
        Some(InstanceReuse {
            max_calls: 5,
            idle: std::time::Duration::from_millis(7),
        })
    );
    let err = Policy::parse(
        Path::new("t.toml"),
        "[plugins.x]\ninstance = \"reuse\"\ninstance-max-calls = 0\n",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "t.toml: [plugins.x] instance-max-calls: 0 calls would serve none (at least 1)"
    );
    assert!(Policy::parse(Path::new("t.toml"), "[plugins.x]\ninstance = \"shared\"\n").is_err());

    // Files combine by the stricter setting: one "fresh" wins, the smaller bounds win.
    let mut a = Policy::parse(
        Path::new("a.toml"),
        "[plugins.x]\ninstance = \"reuse\"\ninstance-max-calls = 9\n",
    )
    .unwrap()
    .plugins["x"]
        .clone();
    a.merge(
        Policy::parse(Path::new("b.toml"), "[plugins.x]\ninstance-max-calls = 3\n")
            .unwrap()
            .plugins["x"]
            .clone(),
    );
    assert_eq!(a.reuse().map(|r| r.max_calls), Some(3));
    a.merge(
        Policy::parse(Path::new("c.toml"), "[plugins.x]\ninstance = \"fresh\"\n")
            .unwrap()
            .plugins["x"]
            .clone(),
    );
    assert_eq!(a.reuse(), None);

    // A project's file cannot turn it on, for a plugin or for the built-ins; it is listed as ignored.
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("toolwright.toml");
    std::fs::write(
        &project,
        "[plugins.x]\ninstance = \"reuse\"\n[builtins]\ninstance = \"reuse\"\n",
    )
    .unwrap();
    let cwd = dir.path().to_string_lossy();
    let p = Policy::load_with_project(&[], Some(&project), &cwd, None).unwrap();
    assert_eq!(p.project_plugins["x"].reuse(), None);
    assert_eq!(p.builtins.as_ref().and_then(PluginPolicy::reuse), None);
    assert!(
        p.ignored.contains(&"[plugins.x] instance = \"reuse\"".to_owned()),
        "{:?}",
        p.ignored
    );
    assert!(
        p.ignored.contains(&"[builtins] instance = \"reuse\"".to_owned()),
        "{:?}",
        p.ignored
    );
}

#[test]
fn only_the_users_file_turns_asking_for_grants_on() {
    let dir = tempfile::tempdir().unwrap();
    let (user, project) = (dir.path().join("user.toml"), dir.path().join("toolwright.toml"));
    std::fs::write(&project, "[ask]\ngrants = true\n").unwrap();
    let cwd = dir.path().to_string_lossy();
    // Trusted or not, a project's `[ask]` is ignored: a cloned repository cannot have the user asked.
    for trusted in [false, true] {
        let p = Policy::load_with_trusted_project(&[], Some(&project), &cwd, None, trusted).unwrap();
        assert!(!p.ask.grants(), "trusted: {trusted}");
        assert!(
            p.ignored.iter().any(|i| i.starts_with("[ask]")),
            "{:?}",
            p.ignored
        );
    }
    std::fs::write(&user, "[ask]\ngrants = true\n").unwrap();
    let p = Policy::load_with_project(std::slice::from_ref(&user), Some(&project), &cwd, None).unwrap();
    assert!(p.ask.grants());
    assert!(!Policy::default().ask.grants(), "off by default");
}
