//! The built-ins' sandbox (issue 44): under the default policy the model's `bash` writes only the workspace and
//! the temporary directory, reads no secret, reaches no host, and cannot undo its confinement; with `sandbox =
//! "off"` the same commands do what they say (pi's behaviour). Each case drives the `toolwright` command line as
//! a client would (`exec` with a calls file, `mcp` over stdio), natively and with the wasm built-ins, with a home
//! directory of its own, and checks the text the model sees and what is (not) on disk.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use toolwright_tests::golden::test_cache_dir;
use toolwright_tests::mcp::StdioServer as Mcp;
use toolwright_tests::text_of;

/// A home directory with a key (`home/.ssh/id_rsa`), a workspace (`ws`), and a directory beside it nothing
/// grants (`outside`), below the target directory (not below the temporary directory the sandbox may write).
struct Machine {
    root: tempfile::TempDir,
    builtins: &'static str,
    policy: Option<PathBuf>,
}

impl Machine {
    fn new(builtins: &'static str) -> Machine {
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        for dir in ["home/.ssh", "home/.config", "ws", "outside"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        std::fs::write(root.path().join("home/.ssh/id_rsa"), "PRIVATE KEY\n").unwrap();
        std::fs::write(root.path().join("outside/kept.txt"), "kept\n").unwrap();
        Machine {
            root,
            builtins,
            policy: None,
        }
    }

    /// The same machine under a policy file saying `text`.
    fn with_policy(mut self, text: &str) -> Machine {
        let path = self.root.path().join("policy.toml");
        std::fs::write(&path, text).unwrap();
        self.policy = Some(path);
        self
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"));
        command
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("home/.config"))
            .env_remove("TOOLWRIGHT_LOG")
            .current_dir(self.path("ws"))
            .stdin(Stdio::null());
        command
    }

    fn audit_log(&self) -> PathBuf {
        self.path("audit.jsonl")
    }

    fn args(&self) -> Vec<String> {
        let mut args = vec![
            "--audit-log".into(),
            self.audit_log().to_string_lossy().into_owned(),
            "--cwd".into(),
            self.path("ws").to_string_lossy().into_owned(),
            "--builtins".into(),
            self.builtins.into(),
            "--cache-dir".into(),
            test_cache_dir().to_string_lossy().into_owned(),
        ];
        if let Some(policy) = &self.policy {
            args.extend(["--policy".into(), policy.to_string_lossy().into_owned()]);
        }
        args
    }

    /// `toolwright exec` of one bash `command`: (isError, text).
    fn bash(&self, command: &str) -> (bool, String) {
        let file = self.path("calls.json");
        let calls = json!({"toolCalls": [{"id": "c1", "name": "bash", "arguments": {"command": command}}]});
        std::fs::write(&file, calls.to_string()).unwrap();
        let out = self
            .command()
            .arg("exec")
            .arg(&file)
            .arg("--json")
            .args(self.args())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["type"] == "message_end")
            .map(|e| (e["message"]["isError"] == true, text_of(&e["message"]["content"])))
            .unwrap()
    }

    fn mcp(&self) -> Mcp {
        let mut command = self.command();
        command.args(["mcp", "--watch-plugins", "0"]).args(self.args());
        Mcp::start_with(&mut command)
    }
}

const MODES: [&str; 2] = ["native", "wasm"];

/// A loopback listener the sandbox was not granted, and whether anything connected to it.
fn listener() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

fn reached(listener: &TcpListener) -> bool {
    std::thread::sleep(Duration::from_millis(100));
    match listener.accept() {
        Ok((mut stream, _)) => {
            let mut buf = [0u8; 16];
            let _ = stream.read(&mut buf);
            true
        }
        Err(_) => false,
    }
}

fn escape_commands(m: &Machine, port: u16) -> String {
    let outside = m.path("outside");
    let key = m.path("home/.ssh/id_rsa");
    format!(
        "echo in > inside.txt && cat inside.txt\n\
         echo out > {outside}/written.txt\n\
         ln -s {outside} link && echo swapped > link/through-link.txt\n\
         echo dots > ../outside/dots.txt\n\
         cat {key}\n\
         echo probe > /dev/tcp/127.0.0.1/{port}\n\
         echo end",
        outside = outside.display(),
        key = key.display(),
    )
}

#[test]
fn by_default_bash_writes_only_the_workspace_reads_no_secret_and_reaches_no_host() {
    for mode in MODES {
        let m = Machine::new(mode);
        let (listener, port) = listener();
        let (is_error, text) = m.bash(&escape_commands(&m, port));
        assert!(!is_error, "{mode}: {text}");
        assert!(
            text.starts_with("in\n"),
            "{mode}: the workspace is written: {text}"
        );
        assert!(text.contains("end\n"), "{mode}: {text}");
        assert!(!text.contains("PRIVATE KEY"), "{mode}: the key was read: {text}");
        for file in ["written.txt", "through-link.txt", "dots.txt"] {
            assert!(
                !m.path("outside").join(file).exists(),
                "{mode}: {file} was written outside"
            );
        }
        assert!(
            !reached(&listener),
            "{mode}: a loopback port of the host was reached"
        );
        // The model is told what was refused and which grant would allow it.
        assert!(
            text.contains("[sandbox] This command ran in the workspace-write sandbox"),
            "{mode}: {text}"
        );
        let outside = m.path("outside").canonicalize().unwrap();
        assert!(
            text.contains(&format!(
                "- writing {}/written.txt is outside what it may write",
                outside.display()
            )) && text.contains(&format!("`write = [\"{}\"]` would allow it.", outside.display())),
            "{mode}: {text}"
        );
        assert!(
            text.contains(&format!(
                "{} is one of the user's secrets",
                m.path("home/.ssh/id_rsa").display()
            )),
            "{mode}: {text}"
        );
        assert!(text.contains("- it has no network"), "{mode}: {text}");
        // The temporary directory is writable, and nothing is added when nothing is refused.
        let temp = std::env::temp_dir().join(format!("toolwright-sandbox-{mode}-{}", std::process::id()));
        let (is_error, text) = m.bash(&format!("echo t > {} && echo ok", temp.display()));
        assert_eq!((is_error, text.as_str()), (false, "ok\n"), "{mode}");
        std::fs::remove_file(temp).unwrap();
    }
}

#[test]
fn with_the_sandbox_off_the_same_commands_do_what_they_say() {
    for mode in MODES {
        let m = Machine::new(mode).with_policy("[builtins]\nsandbox = \"off\"\n");
        let (listener, port) = listener();
        let (_, text) = m.bash(&escape_commands(&m, port));
        assert!(text.contains("PRIVATE KEY"), "{mode}: {text}");
        assert!(!text.contains("[sandbox]"), "{mode}: {text}");
        for file in ["written.txt", "through-link.txt", "dots.txt"] {
            assert!(
                m.path("outside").join(file).exists(),
                "{mode}: {file} was not written"
            );
        }
        assert!(reached(&listener), "{mode}: the listener was not reached");
    }
}

#[test]
fn read_only_writes_nothing_and_says_which_mode_would() {
    let m = Machine::new("native").with_policy("[builtins]\nsandbox = \"read-only\"\n");
    let (_, text) = m.bash("echo x > inside.txt; cat /etc/hostname > /dev/null && echo read");
    assert!(!m.path("ws/inside.txt").exists());
    assert!(text.contains("read\n"), "{text}");
    assert!(text.contains("read-only sandbox"), "{text}");
    assert!(
        text.contains("`sandbox = \"workspace-write\"` would let it write the workspace"),
        "{text}"
    );
}

#[test]
fn the_hosts_own_files_in_the_workspace_stay_as_they_are() {
    for mode in MODES {
        // The user's policy file given with --policy, inside the workspace: a command that rewrote it would run
        // unconfined from the next start on.
        let m = Machine::new(mode);
        let policy = m.path("ws/policy.toml");
        std::fs::write(&policy, "[builtins]\ntimeout-ms = 60000\n").unwrap();
        let m = Machine {
            policy: Some(policy.clone()),
            ..m
        };
        let (_, text) = m.bash(
            "printf '[builtins]\\nsandbox = \"off\"\\n' > policy.toml; rm -f policy.toml; mv policy.toml p2; \
             echo new > new.txt && cat new.txt",
        );
        assert_eq!(
            std::fs::read_to_string(&policy).unwrap(),
            "[builtins]\ntimeout-ms = 60000\n",
            "{mode}: {text}"
        );
        assert!(
            text.contains("new\n"),
            "{mode}: the workspace is still writable: {text}"
        );
        assert!(text.contains("is the host's own"), "{mode}: {text}");
    }
}

#[test]
fn a_cloned_projects_policy_cannot_turn_the_sandbox_off() {
    let m = Machine::new("native");
    std::fs::write(
        m.path("ws/toolwright.toml"),
        "[builtins]\nsandbox = \"off\"\nsecrets = []\n",
    )
    .unwrap();
    let (_, text) = m.bash(&format!("cat {}", m.path("home/.ssh/id_rsa").display()));
    assert!(!text.contains("PRIVATE KEY"), "{text}");
    assert!(text.contains("one of the user's secrets"), "{text}");
}

#[test]
fn bash_cannot_undo_its_confinement_nor_reach_the_host() {
    for mode in MODES {
        let m = Machine::new(mode);
        let agent = std::os::unix::net::UnixListener::bind(m.path("home/agent.sock")).unwrap();
        agent.set_nonblocking(true).unwrap();
        // A datagram to a port of the host's loopback (the way to a DNS server): it stays in the sandbox.
        let dns = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        dns.set_nonblocking(true).unwrap();
        let dns_port = dns.local_addr().unwrap().port();
        let datagram = format!(
            "python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
             s.sendto(b\"q\", (\"127.0.0.1\", {dns_port})); print(\"SENT\")'"
        );
        let cgroup_escape = "for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/unified/cgroup.procs; do \
                             [ -e $f ] && echo $$ > $f && echo ESCAPED-CGROUP; done";
        let commands = [
            // New namespaces from inside (a user namespace would give it capabilities to mount over its rules).
            (
                "unshare -r true && echo ESCAPED-USERNS",
                "Operation not permitted",
            ),
            ("unshare -n true && echo ESCAPED-NETNS", "Operation not permitted"),
            // Mounts.
            ("mkdir -p m && mount -t tmpfs none m && echo ESCAPED-MOUNT", ""),
            // Code from memory, and another process's memory.
            (
                "python3 -c 'import os; os.memfd_create(\"x\"); print(\"ESCAPED-MEMFD\")'",
                "Operation not permitted",
            ),
            // The host itself: no signal reaches it.
            (
                "kill -STOP $PPID && echo ESCAPED-SIGNAL",
                "Operation not permitted",
            ),
            // Leaving the call's cgroup.
            (cgroup_escape, ""),
            // Another process's memory: the host's.
            (
                "python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); \
                 r = libc.ptrace(16, os.getppid(), 0, 0); print(\"ptrace\", r, ctypes.get_errno())'",
                "ptrace -1 1",
            ),
            // A Unix socket by path (an SSH agent's, a Docker daemon's): Landlock does not check `connect`.
            (
                "python3 -c 'import socket, sys; s=socket.socket(socket.AF_UNIX); \
                 s.connect(sys.argv[1]); print(\"ESCAPED-UNIX\")' $HOME/agent.sock",
                "Operation not permitted",
            ),
            (datagram.as_str(), "SENT"),
            // Its own network namespace has a loopback, and only that.
            (
                "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(); \
                 c=socket.create_connection(s.getsockname()); print(\"LOOPBACK-OK\")'",
                "LOOPBACK-OK",
            ),
        ];
        for (command, expected) in commands {
            let (_, text) = m.bash(command);
            assert!(!text.contains("ESCAPED"), "{mode}: {command}: {text}");
            assert!(text.contains(expected), "{mode}: {command}: {text}");
        }
        assert!(agent.accept().is_err(), "{mode}: the agent's socket was reached");
        assert!(
            dns.recv_from(&mut [0u8; 16]).is_err(),
            "{mode}: a datagram reached the host's loopback"
        );
    }
}

#[test]
fn a_fork_storm_stops_at_the_calls_pids_limit() {
    // Where a pids controller is mounted (cgroup v1's `pids` hierarchy, or the unified one's): elsewhere the host
    // cannot carry the limit, and says so in its log.
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
    if !Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists() && !v2.split_whitespace().any(|c| c == "pids")
    {
        eprintln!("no pids controller on this machine: the limit is not tested");
        return;
    }
    let m = Machine::new("native");
    // More processes than the limit allows: forks are refused, and the call still ends.
    let (_, text) = m.bash(
        "python3 -c '\nimport os, signal\npids = []\ntry:\n    for i in range(6000):\n        pid = os.fork()\n        \
         if pid == 0:\n            signal.pause()\n            os._exit(0)\n        pids.append(pid)\nexcept OSError as e:\n    \
         print(\"refused:\", e.strerror)\nprint(\"started\", len(pids))\nfor p in pids:\n    os.kill(p, 9)\n'",
    );
    let started: u32 = text
        .lines()
        .find_map(|l| l.strip_prefix("started "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        started < toolwright::native::sandbox::BUILTIN_PIDS,
        "{started} processes started: {text}"
    );
    assert!(
        text.contains("refused: Resource temporarily unavailable"),
        "{text}"
    );
}

#[test]
fn under_mcp_bash_is_confined_and_the_next_call_works() {
    for mode in MODES {
        let m = Machine::new(mode);
        let mut mcp = m.mcp();
        let (listener, port) = listener();
        let (is_error, text) = mcp.run(1, "bash", json!({"command": escape_commands(&m, port)}));
        assert!(!is_error, "{mode}: {text}");
        assert!(!text.contains("PRIVATE KEY"), "{mode}: {text}");
        assert!(!m.path("outside/written.txt").exists(), "{mode}");
        assert!(!reached(&listener), "{mode}");
        assert!(text.contains("[sandbox]"), "{mode}: {text}");
        let (is_error, text) = mcp.run(2, "bash", json!({"command": "echo next"}));
        assert!(!is_error && text.starts_with("next\n"), "{mode}: {text}");
    }
}

/// A loopback HTTP server answering every request with `hello from PATH`, and how many it served.
fn http_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Write;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            let path = head.split(' ').nth(1).unwrap_or("?").to_owned();
            let body = format!("hello from {path}");
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, served)
}

#[test]
fn granted_hosts_are_reached_by_name_through_the_proxy_and_the_rest_is_refused_and_audited() {
    for mode in MODES {
        let (granted, served) = http_server();
        let (refused, refused_served) = http_server();
        let m = Machine::new(mode).with_policy(&format!("[builtins]\nnetwork = [\"127.0.0.1:{granted}\"]\n"));
        // NO_PROXY names the sandbox's own loopback by default: these requests are for the host's.
        let fetch = |port: u16, path: &str| {
            format!(
                "NO_PROXY= no_proxy= python3 -c 'import urllib.request; \
                 print(urllib.request.urlopen(\"http://127.0.0.1:{port}{path}\").read().decode())'"
            )
        };
        let tunnel = format!(
            "python3 -c 'import http.client; c = http.client.HTTPConnection(\"127.0.0.1\", {proxy}); \
             c.set_tunnel(\"127.0.0.1\", {granted}); c.request(\"GET\", \"/tunnel\"); \
             print(c.getresponse().read().decode())'",
            proxy = toolwright::native::sandbox::PROXY_PORT
        );
        let (_, text) = m.bash(&format!(
            "{}; {tunnel}; {}",
            fetch(granted, "/plain"),
            fetch(refused, "/no")
        ));
        assert!(text.contains("hello from /plain"), "{mode}: {text}");
        assert!(text.contains("hello from /tunnel"), "{mode}: {text}");
        assert!(text.contains("HTTP Error 403"), "{mode}: {text}");
        assert!(
            text.contains(&format!(
                "- the proxy refused 127.0.0.1:{refused}: `network = [\"127.0.0.1:{refused}\"]` would allow it."
            )),
            "{mode}: {text}"
        );
        assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 2, "{mode}");
        assert_eq!(
            refused_served.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "{mode}"
        );
        // Without the proxy nothing goes anywhere: the host's port is not in the sandbox's namespace.
        let (_, text) = m.bash(&format!("echo > /dev/tcp/127.0.0.1/{granted} && echo DIRECT"));
        assert!(!text.contains("DIRECT"), "{mode}: {text}");
        // Both are on the audit trail.
        let log = std::fs::read_to_string(m.audit_log()).unwrap();
        let connections: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .flat_map(|r| r["connections"].as_array().cloned().unwrap_or_default())
            .collect();
        assert!(
            connections.contains(&json!({"address": format!("127.0.0.1:{granted}"), "allowed": true})),
            "{mode}: {connections:?}"
        );
        assert!(
            connections.contains(&json!({"address": format!("127.0.0.1:{refused}"), "allowed": false})),
            "{mode}: {connections:?}"
        );
    }
}

#[test]
fn a_calls_processes_share_the_memory_limit_and_the_host_lives_on() {
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
    if !Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists()
        && !v2.split_whitespace().any(|c| c == "memory")
    {
        eprintln!("no memory controller on this machine: the limit is not tested");
        return;
    }
    let m = Machine::new("native").with_policy("[builtins]\nprocess-memory-mib = 64\n");
    let (is_error, text) = m.bash(
        "python3 -c 'b = bytearray(256 << 20); b[::4096] = b\"x\" * len(b[::4096]); print(\"allocated\", len(b))'; \
         echo exit=$?",
    );
    assert!(!text.contains("allocated 268435456"), "{text}");
    assert!(
        text.contains("exit=137"),
        "killed by the kernel: {is_error} {text}"
    );
    let (is_error, text) = m.bash("python3 -c 'b = bytearray(16 << 20); print(\"small\")'");
    assert_eq!((is_error, text.as_str()), (false, "small\n"));
}
