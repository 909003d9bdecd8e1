//! Processes for native tools: a process group per spawn, stdout and stderr merged in arrival order, the whole
//! group killed on kill or drop; the child joins its call's cgroup and takes on its confinement (Landlock, then
//! the seccomp filter) between fork and exec.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Stdio};

use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use toolwright_sdk::{Command, ExitStatus, Process, ProcessEvent};

use super::confine::{Confinement, Launch};
use super::explain::{explain, shows_refusal};
use super::namespaces::{Namespaces, receive_listener, socket_pair};
use super::proxy;
use super::scope::CallScope;
use super::seccomp::SyscallFilter;
use toolwright_core::tool::CallSink;

/// Held for reading around every fork of the host's (a spawn), and for writing by [`without_forks`].
static FORKS: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Run `f` while no process of the host's is being forked: for work whose `pthread_atfork` child handler would
/// hang a child forked in the middle of it.
///
/// wasmtime 48 registers such a handler as it opens `/proc/self/pagemap` for its pooling allocator (at the
/// first engine made with `PAGEMAP_SCAN` resets), from inside the lazy initialisation of that file, and the
/// handler reads the same lazy value: a fork between the two (a `bash` call starting while a plugin engine is
/// made) leaves the child waiting forever for an initialisation that no thread of it runs, and the spawning
/// thread waiting forever for the child's `exec` (it happened in CI: `native_builtins_match_pi_golden_fixtures`
/// beside `native_and_wasm_builtins_give_identical_events`). `toolwright-wasm` makes its engines inside this.
pub fn without_forks<T>(f: impl FnOnce() -> T) -> T {
    let _no_forks = FORKS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    f()
}

/// Whether this system lets the host's children make the namespaces a sandbox needs, probed once by a child
/// that makes a network namespace (as the sandbox would: directly as root, else in a user namespace) and exits
/// without `exec`; else the refusal, naming what would start programs anyway.
fn namespaces_available() -> io::Result<()> {
    static PROBED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let probed = PROBED.get_or_init(|| {
        let probe = Namespaces::for_confinement(
            &Confinement {
                own_network: true,
                ..Confinement::default()
            },
            None,
        )
        .map_err(|e| e.to_string())?;
        // Never run: the child ends in `pre_exec`.
        let mut cmd = std::process::Command::new("/");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        #[allow(unsafe_code)]
        // SAFETY: between fork and exec the child makes the namespace syscalls of `Namespaces::apply` (see
        // `spawn`) and `_exit`s; it allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(move || {
                probe.apply()?;
                libc::_exit(0)
            });
        }
        let spawned = {
            let _forking = FORKS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            cmd.spawn()
        };
        match spawned.and_then(|mut child| child.wait()) {
            Ok(status) if status.success() => Ok(()),
            Ok(status) => Err(format!("the probe ended with {status}")),
            Err(e) => Err(e.to_string()),
        }
    });
    probed.clone().map_err(|why| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the sandbox cannot start programs here: this system lets the host make no network namespace \
                 ({why}; as root, or in an unprivileged user namespace). `sandbox = \"off\"` in the [builtins] \
                 section of the policy file (toolwright.toml) would start the built-ins' programs unconfined."
            ),
        )
    })
}

/// How long the pipes may stay quiet after the process exited before it counts as done (pi's 100 ms grace,
/// re-armed on every chunk), so a quiet background process holding the pipes does not block the result.
const IDLE_GRACE: Duration = Duration::from_millis(100);

enum Message {
    Output(Vec<u8>),
    Closed,
}

/// A running native process.
pub struct NativeProcess {
    child: Child,
    rx: Receiver<Message>,
    open_pipes: usize,
    exited: Option<(ExitStatus, Instant)>,
    killed: bool,
    /// The built-ins' sandbox it runs in, watching its output for refusals to explain at its end.
    watch: Option<Watch>,
    /// The proxy its sandbox reaches hosts through, serving while it lives.
    _proxy: Option<proxy::Proxy>,
    /// What that proxy refused (`host:port`, each once).
    proxy_refused: Option<std::sync::Arc<std::sync::Mutex<Vec<String>>>>,
}

/// The lines of a sandboxed process's output that report a refusal, kept to be explained once it exits
/// ([`explain`]).
struct Watch {
    confinement: Confinement,
    /// What its proxy refused.
    refused: Option<std::sync::Arc<std::sync::Mutex<Vec<String>>>>,
    /// Where it runs: relative paths in its output are resolved against it.
    cwd: Option<std::path::PathBuf>,
    /// The last line, while it is not complete.
    partial: Vec<u8>,
    /// The refusal lines seen (at most [`Watch::MAX_LINES`]).
    lines: Vec<String>,
    explained: bool,
}

impl Watch {
    const MAX_LINES: usize = 16;
    /// Longer lines are not kept whole.
    const MAX_LINE: usize = 4096;

    fn see(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' {
                self.line();
            } else if self.partial.len() < Self::MAX_LINE {
                self.partial.push(byte);
            }
        }
    }

    fn line(&mut self) {
        let line = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        if self.lines.len() < Self::MAX_LINES && shows_refusal(&line) {
            self.lines.push(line);
        }
    }

    /// What to tell the model, once.
    fn explanation(&mut self) -> Option<Vec<u8>> {
        if self.explained {
            return None;
        }
        self.explained = true;
        if !self.partial.is_empty() {
            self.line();
        }
        let refused = self
            .refused
            .as_ref()
            .map(|r| {
                r.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone()
            })
            .unwrap_or_default();
        let text = explain(
            &self.lines.join("\n"),
            &self.confinement,
            self.cwd.as_deref(),
            &refused,
        )?;
        Some(format!("\n{text}\n").into_bytes())
    }
}

impl NativeProcess {
    /// Start `command` as `launch` says (its program, exactly its environment, its confinement), in a new
    /// process group and in the cgroup of `scope`.
    pub fn spawn(command: &Command, launch: &Launch, scope: &CallScope) -> io::Result<Self> {
        Self::spawn_for(command, launch, scope, CallSink::discard())
    }

    /// [`NativeProcess::spawn`] for a call whose audit record is `sink`: the connections its sandbox's proxy
    /// allows and refuses are recorded there.
    pub fn spawn_for(
        command: &Command,
        launch: &Launch,
        scope: &CallScope,
        sink: CallSink,
    ) -> io::Result<Self> {
        // One pipe for both streams: the bytes arrive in exactly the order the process wrote them.
        let (reader, writer) = io::pipe()?;
        let mut cmd = std::process::Command::new(&launch.program);
        cmd.stdin(Stdio::null())
            .stdout(writer.try_clone()?)
            .stderr(writer);
        let (child, proxy) = start(&mut cmd, command, launch, scope, sink)?;
        // `cmd` holds the parent's copies of the write end; dropping it closes them, so the pipe reports
        // end-of-file once every process that inherited it is gone.
        drop(cmd);
        // Bounded: a process that writes faster than the tool consumes waits on its pipe instead of filling
        // the host's memory (16 chunks of at most 64 KiB).
        let (tx, rx) = mpsc::sync_channel(16);
        pump(reader, tx);
        let watch = launch
            .confinement
            .as_ref()
            .filter(|c| c.mode.is_some())
            .map(|c| Watch {
                confinement: c.clone(),
                refused: proxy.as_ref().map(proxy::Proxy::refused),
                cwd: command.cwd.as_ref().map(std::path::PathBuf::from),
                partial: Vec::new(),
                lines: Vec::new(),
                explained: false,
            });
        Ok(NativeProcess {
            child,
            rx,
            open_pipes: 1,
            exited: None,
            killed: false,
            watch,
            proxy_refused: proxy.as_ref().map(proxy::Proxy::refused),
            _proxy: proxy,
        })
    }

    /// What its sandbox's proxy refused it so far (`host:port`, each once; filled while it runs): none when it
    /// has no proxy.
    pub fn proxy_refusals(&self) -> Option<std::sync::Arc<std::sync::Mutex<Vec<String>>>> {
        self.proxy_refused.clone()
    }

    fn poll_exit(&mut self) -> io::Result<()> {
        if self.exited.is_none()
            && let Some(status) = self.child.try_wait()?
        {
            let status = ExitStatus {
                code: status.code(),
                signal: status.signal(),
            };
            self.exited = Some((status, Instant::now()));
        }
        Ok(())
    }
}

/// What a child does to itself before exec.
#[derive(Debug, Clone)]
struct ChildSetup {
    /// Lead a session (and so a process group) of its own, as pi's detached children do: the group is what
    /// `kill` signals, the session what the clean-up without a cgroup follows.
    setsid: bool,
    /// The call's cgroups' `cgroup.procs` (the unified one, and the v1 hierarchies that limit it where the
    /// unified one cannot): writing `0` moves the writer in, before it can fork.
    join: [Option<RawFd>; 3],
    /// Namespaces of its own: network (with its loopback up), mounts (the protected paths read-only).
    namespaces: Option<Namespaces>,
    /// No setuid or file-capability gains from here on (required by Landlock).
    no_new_privs: bool,
    /// A Landlock ruleset to enforce.
    ruleset: Option<RawFd>,
    /// The system calls refused to it (with a ruleset: a confined program).
    filter: Option<&'static SyscallFilter>,
}

impl ChildSetup {
    /// Runs in the forked child: syscalls only (see the SAFETY note at the call).
    #[allow(unsafe_code)]
    fn apply(&self) -> io::Result<()> {
        // SAFETY: setsid takes no arguments.
        if self.setsid && unsafe { libc::setsid() } < 0 {
            return Err(io::Error::last_os_error());
        }
        for fd in self.join.iter().flatten() {
            // SAFETY: a write of one byte from a static buffer to a descriptor that is open.
            if unsafe { libc::write(*fd, b"0".as_ptr().cast(), 1) } != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(namespaces) = &self.namespaces {
            namespaces.apply()?;
        }
        if self.no_new_privs {
            // SAFETY: prctl with integer arguments only.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(fd) = self.ruleset {
            // SAFETY: landlock_restrict_self takes a ruleset descriptor and flags (none); no memory.
            if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // Last: nothing above needs a call it refuses.
        if let Some(filter) = self.filter {
            filter.apply()?;
        }
        Ok(())
    }
}

/// Start `command` as `launch` says with `cmd` (made for `launch.program`, its standard streams set): arguments,
/// exactly its environment, the proxy where its confinement names hosts, the confinement itself, a new session,
/// the cgroups of `scope`. The child, and the proxy serving it.
fn start(
    cmd: &mut std::process::Command,
    command: &Command,
    launch: &Launch,
    scope: &CallScope,
    sink: CallSink,
) -> io::Result<(Child, Option<proxy::Proxy>)> {
    // The name the tool asked for (a granted name, or exactly the resolved path), as a shell would pass it.
    cmd.arg0(&command.program)
        .args(&command.args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)));
    if let Some(cwd) = &command.cwd {
        cmd.current_dir(cwd);
    }
    // Hosts by name through the host's proxy: the child makes its listener, the host serves it.
    let proxied = launch
        .confinement
        .as_ref()
        .filter(|c| c.own_network)
        .and_then(|c| c.proxy.clone());
    let channel = match &proxied {
        Some(_) => {
            let url = format!("http://127.0.0.1:{}", proxy::PORT);
            for name in [
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "ALL_PROXY",
                "http_proxy",
                "https_proxy",
                "all_proxy",
            ] {
                cmd.env(name, &url);
            }
            cmd.env("NO_PROXY", "localhost,127.0.0.1,::1")
                .env("no_proxy", "localhost,127.0.0.1,::1");
            Some(socket_pair()?)
        }
        None => None,
    };
    // Everything that allocates or opens files happens here, in the parent; the child only makes syscalls.
    let ruleset = launch.confinement.as_ref().map(|c| c.ruleset()).transpose()?;
    let filter = launch
        .confinement
        .as_ref()
        .map(|c| SyscallFilter::get(c.unix_sockets))
        .transpose()?;
    let limits = launch.confinement.as_ref().map(|c| c.limits).unwrap_or_default();
    let namespaces = launch
        .confinement
        .as_ref()
        .filter(|c| c.own_network || !c.protected.is_empty())
        .map(|c| Namespaces::for_confinement(c, channel.as_ref().map(|(_, child)| child.as_raw_fd())))
        .transpose()?;
    if namespaces.is_some() {
        namespaces_available()?;
    }
    let setup = ChildSetup {
        join: scope.join_fds(&limits),
        namespaces,
        setsid: true,
        no_new_privs: launch.no_new_privs || ruleset.is_some(),
        ruleset: ruleset.as_ref().map(AsRawFd::as_raw_fd),
        filter,
    };
    #[allow(unsafe_code)]
    // SAFETY: the closure runs between fork and exec in a copy of a multi-threaded process, so it must be
    // async-signal-safe: it only reads what it captured (integers, buffers formatted here, the compiled
    // filter), and makes the setsid, write, unshare, open, socket, ioctl, close, prctl,
    // landlock_restrict_self and seccomp syscalls; it allocates nothing and takes no lock. The descriptors it
    // uses are kept open by `scope` and `ruleset` until `spawn` returns; the filter is static.
    unsafe {
        cmd.pre_exec(move || setup.apply());
    }
    let child = {
        // Never while an engine is made (`without_forks`); spawns run side by side.
        let _forking = FORKS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        cmd.spawn()?
    };
    drop(ruleset);
    scope.started(child.id() as i32);
    // The child sent its listener before it ran the program (`spawn` returns once it did).
    let proxy = match (proxied, channel) {
        (Some(hosts), Some((parent, child_end))) => {
            drop(child_end);
            Some(proxy::Proxy::serve(receive_listener(&parent)?, hosts, sink))
        }
        _ => None,
    };
    Ok((child, proxy))
}

/// A sandboxed program whose standard streams are its caller's to speak over (an MCP server on stdio), started
/// as [`NativeProcess`]es are (the same confinement, proxy and cgroups), with its stdin, stdout and stderr as
/// three pipes. Dropping it kills its process group (the call's scope kills the rest).
pub struct PipedProcess {
    /// The child; its `stdin`, `stdout` and `stderr` are the caller's to take.
    pub child: Child,
    _proxy: Option<proxy::Proxy>,
}

impl PipedProcess {
    /// Start `command` as `launch` says, in `scope`, recording its proxy's connections into `sink`.
    pub fn spawn(command: &Command, launch: &Launch, scope: &CallScope, sink: CallSink) -> io::Result<Self> {
        let mut cmd = std::process::Command::new(&launch.program);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let (child, proxy) = start(&mut cmd, command, launch, scope, sink)?;
        Ok(PipedProcess { child, _proxy: proxy })
    }
}

impl Drop for PipedProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        CallScope::reaped(self.child.id() as i32);
    }
}

/// Copy a pipe into the channel, chunk by chunk, until it closes.
fn pump(mut pipe: impl Read + Send + 'static, tx: mpsc::SyncSender<Message>) {
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(Message::Output(buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Message::Closed);
    });
}

impl Process for NativeProcess {
    fn next(&mut self, timeout: Duration) -> io::Result<ProcessEvent> {
        let deadline = Instant::now() + timeout;
        loop {
            self.poll_exit()?;
            if let Some((status, since)) = self.exited
                && (self.open_pipes == 0 || since.elapsed() >= IDLE_GRACE)
            {
                // What the sandbox refused, said after the last output (nothing when it refused nothing).
                if !self.killed
                    && let Some(note) = self.watch.as_mut().and_then(Watch::explanation)
                {
                    return Ok(ProcessEvent::Output(note));
                }
                return Ok(ProcessEvent::Exited(status));
            }
            // Poll often enough to notice the exit (waitpid has no timeout), but not busily.
            let now = Instant::now();
            if now >= deadline {
                return Ok(ProcessEvent::Idle);
            }
            let slice = (deadline - now).min(Duration::from_millis(10));
            match self.rx.recv_timeout(slice) {
                Ok(Message::Output(bytes)) => {
                    if let Some((_, since)) = &mut self.exited {
                        *since = Instant::now();
                    }
                    if let Some(watch) = &mut self.watch {
                        watch.see(&bytes);
                    }
                    return Ok(ProcessEvent::Output(bytes));
                }
                Ok(Message::Closed) => self.open_pipes = self.open_pipes.saturating_sub(1),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.open_pipes = 0,
            }
        }
    }

    fn kill(&mut self) {
        if self.killed {
            return;
        }
        self.killed = true;
        // SIGKILL to the whole group (the child leads it: setsid), then to the child itself.
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.kill();
    }
}

impl Drop for NativeProcess {
    fn drop(&mut self) {
        if self.exited.is_none() {
            self.kill();
        }
        let id = self.child.id() as i32;
        if let Ok(None) = self.child.try_wait() {
            // Killed but not yet gone: reap it off the caller's thread, so it does not stay a zombie.
            let pid = rustix::process::Pid::from_raw(id);
            let _ = thread::Builder::new()
                .name("toolwright-reap".into())
                .spawn(move || {
                    let _ = rustix::process::waitpid(pid, rustix::process::WaitOptions::empty());
                    CallScope::reaped(id);
                });
        } else {
            CallScope::reaped(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
    }

    /// Runs `script` in `scope` until the shell exits; the pids it printed.
    fn run(script: &str, scope: &CallScope) -> Vec<u32> {
        let command = Command {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            ..Default::default()
        };
        let launch = Launch {
            program: "/bin/sh".into(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            confinement: None,
            no_new_privs: false,
        };
        let mut process = NativeProcess::spawn(&command, &launch, scope).unwrap();
        let mut out = Vec::new();
        loop {
            match process.next(Duration::from_secs(5)).unwrap() {
                ProcessEvent::Output(bytes) => out.extend(bytes),
                ProcessEvent::Exited(_) => break,
                ProcessEvent::Idle => {}
            }
        }
        String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    fn assert_gone(pids: &[u32], case: &str) {
        let until = Instant::now() + Duration::from_secs(3);
        while pids.iter().any(|p| running(*p)) && Instant::now() < until {
            thread::sleep(Duration::from_millis(10));
        }
        let alive: Vec<&u32> = pids.iter().filter(|p| running(**p)).collect();
        assert!(alive.is_empty(), "{case}: {alive:?} outlived the scope");
    }

    const ESCAPEES: &str = "sleep 60 & echo $!; setsid sleep 60 & echo $!; exit 0";

    #[test]
    fn a_piped_program_speaks_over_its_own_streams_inside_the_same_sandbox() {
        use std::io::{BufRead, Write};
        if super::super::landlock_abi() < 6 {
            return; // no sandbox here: the start is refused (tested with the modes)
        }
        let root = tempfile::tempdir().unwrap();
        let (ws, secret) = (root.path().join("ws"), root.path().join("secret"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(secret.join("key"), "KEY").unwrap();
        let host = crate::HostEnv::current();
        let mut sandbox = super::super::BuiltinSandbox::default_for(&ws, &host);
        sandbox.hidden.push(secret.clone());
        // A line server: each line in is answered on stdout; the secret is tried on stderr.
        let script = format!(
            "cat {} >&2; while read line; do echo \"got $line\"; done",
            secret.join("key").display()
        );
        let command = Command {
            program: "sh".into(),
            args: vec!["-c".into(), script],
            cwd: Some(ws.to_string_lossy().into_owned()),
            ..Default::default()
        };
        let launch = sandbox
            .programs()
            .launch(&command, &[("PATH".into(), "/usr/bin:/bin".into())], "test")
            .unwrap();
        let scope = CallScope::new();
        let mut server = PipedProcess::spawn(&command, &launch, &scope, CallSink::discard()).unwrap();
        let mut stdin = server.child.stdin.take().unwrap();
        let mut stdout = io::BufReader::new(server.child.stdout.take().unwrap());
        let mut stderr = server.child.stderr.take().unwrap();
        writeln!(stdin, "one").unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "got one\n");
        drop(stdin);
        let mut errors = String::new();
        stderr.read_to_string(&mut errors).unwrap();
        assert!(errors.contains("Permission denied"), "{errors}");
        assert!(!errors.contains("KEY"), "{errors}");
    }

    #[test]
    fn no_process_is_forked_while_work_that_must_not_meet_a_fork_runs() {
        let (entered, enter) = mpsc::channel();
        let holder = thread::spawn(move || {
            without_forks(|| {
                entered.send(()).unwrap();
                thread::sleep(Duration::from_millis(300));
                Instant::now()
            })
        });
        enter.recv().unwrap();
        // The spawn waits for the work to end: the shell's pid is printed after it. (A scope with a cgroup where
        // the host can make one: a scope without kills the host's orphaned sessions as it ends, which would be
        // the other test's.)
        let scope = CallScope::new();
        let pids = run("echo $$", &scope);
        let spawned_after = Instant::now();
        let ended = holder.join().unwrap();
        assert_eq!(pids.len(), 1);
        assert!(
            spawned_after >= ended,
            "a process was forked while `without_forks` ran"
        );
    }

    #[test]
    fn a_scope_kills_descendants_that_left_the_group_with_or_without_a_cgroup() {
        for (case, scope) in [
            ("cgroup", CallScope::new()),
            ("fallback", CallScope::without_cgroup()),
        ] {
            let pids = run(ESCAPEES, &scope);
            assert_eq!(pids.len(), 2, "{case}");
            // The shell exited: both children live on until the scope ends.
            assert!(pids.iter().all(|p| running(*p)), "{case}");
            drop(scope);
            assert_gone(&pids, case);
        }
    }
}
