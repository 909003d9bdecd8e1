use super::*;

fn command(program: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
    Command {
        program: program.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        cwd: None,
    }
}

fn grant(rules: &[SpawnRule], path: &str, writable: &[PathBuf], settable: &[&str]) -> ProgramGrant {
    ProgramGrant::Only(Programs::new(
        rules,
        path,
        writable,
        Some(settable.iter().map(|s| s.to_string()).collect()),
        None,
    ))
}

#[test]
fn steering_variables_are_recognised() {
    for v in [
        "PATH",
        "LD_PRELOAD",
        "ld_library_path",
        "DYLD_INSERT_LIBRARIES",
        "GIT_CONFIG_GLOBAL",
        "GIT_EXEC_PATH",
        "GIT_SSH_COMMAND",
        "GIT_DIR",
        "BASH_ENV",
        "BASH_FUNC_echo%%",
        "ENV",
        "PYTHONPATH",
        "NODE_OPTIONS",
        "PERL5OPT",
        "RUBYOPT",
        "JAVA_TOOL_OPTIONS",
        "IFS",
        "HOME",
        "npm_config_script_shell",
    ] {
        assert!(steers_code(v), "{v}");
    }
    for v in ["LANG", "TERM", "GIT_AUTHOR_NAME", "MY_SETTING", "TZ"] {
        assert!(!steers_code(v), "{v}");
    }
}

#[test]
fn names_resolve_on_the_host_path_and_never_inside_a_writable_grant() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("tool");
    std::fs::write(&tool, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("relative:{}", bin.display());
    let ok = grant(&["tool".into()], &path, &[], &[]);
    let launch = ok
        .launch(&command("tool", &[], &[]), &[], "the plugin p")
        .unwrap();
    assert_eq!(launch.program, tool.to_string_lossy());
    assert_eq!(
        launch.env,
        [("PATH".to_owned(), bin.to_string_lossy().into_owned())],
        "relative PATH entries are left out"
    );
    // A path must be the resolved one.
    assert!(
        ok.launch(&command(&tool.to_string_lossy(), &[], &[]), &[], "x")
            .is_ok()
    );
    assert!(ok.launch(&command("/bin/tool", &[], &[]), &[], "x").is_err());
    assert!(ok.launch(&command("./tool", &[], &[]), &[], "x").is_err());

    let inside = grant(&["tool".into()], &path, &[dir.path().to_path_buf()], &[]);
    assert_eq!(
        inside
            .launch(&command("tool", &[], &[]), &[], "the plugin p")
            .unwrap_err(),
        format!(
            "Permission denied: tool is {}, inside {}, which the plugin p may write: a program it could replace \
             is not started",
            tool.display(),
            std::fs::canonicalize(dir.path()).unwrap().display()
        )
    );
    let missing = grant(&["nothing-here".into()], &path, &[], &[]);
    assert_eq!(
        missing
            .launch(&command("nothing-here", &[], &[]), &[], "the plugin p")
            .unwrap_err(),
        "Permission denied: nothing-here is granted to the plugin p, but there is no such program on the \
         host's PATH"
    );
}

#[test]
fn arguments_must_start_with_a_granted_prefix() {
    let rule = SpawnRule {
        program: "/bin/echo".into(),
        args: Some(vec![vec!["status".into()], vec!["log".into(), "-1".into()]]),
    };
    let g = grant(&[rule], "", &[], &[]);
    assert!(
        g.launch(&command("/bin/echo", &["status", "-s"], &[]), &[], "p")
            .is_ok()
    );
    assert!(
        g.launch(&command("/bin/echo", &["log", "-1"], &[]), &[], "p")
            .is_ok()
    );
    assert_eq!(
        g.launch(&command("/bin/echo", &["log"], &[]), &[], "the plugin p")
            .unwrap_err(),
        "Permission denied: the plugin p may start /bin/echo only with arguments starting with one of [status], \
         [log -1]; [log] is not granted."
    );
}

#[test]
fn steering_variables_need_a_grant_by_name() {
    let g = grant(&["/bin/echo".into()], "/usr/bin:/bin", &[], &["LD_PRELOAD"]);
    let base = [("LANG".to_owned(), "C".to_owned())];
    assert_eq!(
        g.launch(
            &command("/bin/echo", &[], &[("PATH", "/tmp")]),
            &base,
            "the plugin p"
        )
        .unwrap_err(),
        "Permission denied: the plugin p may not set PATH for /bin/echo: it changes which code a program loads \
         or runs. An env grant naming PATH (not `*`) in the policy file (toolwright.toml) would allow it."
    );
    let launch = g
        .launch(
            &command("/bin/echo", &[], &[("LD_PRELOAD", "x.so"), ("MY", "1")]),
            &base,
            "p",
        )
        .unwrap();
    let env: Vec<(&str, &str)> = launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        env,
        [
            ("LANG", "C"),
            ("PATH", "/usr/bin:/bin"),
            ("LD_PRELOAD", "x.so"),
            ("MY", "1")
        ]
    );
    assert!(!launch.no_new_privs, "unconfined in this test");
}
