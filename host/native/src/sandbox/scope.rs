//! The processes of one call: every process a call starts, and every descendant, dies when the call ends.
//!
//! A process group is not enough: a grandchild can leave it (`setsid`), and once the direct child is reaped
//! its group id can even be reused. So each call that starts a program gets its own cgroup v2 (below the host's
//! own cgroup), which every child joins between fork and exec, before it can fork itself; a cgroup cannot be
//! left from inside without write access to the cgroup tree, which confined programs lack. When the call ends
//! (result, deadline, cancellation: the store or the native call context is dropped), `cgroup.kill` kills every
//! member at once.
//!
//! Where no cgroup can be made (no cgroup v2, no write access), each child starts a session of its own (as pi's
//! detached children do) and the host becomes a child subreaper, so orphans are re-parented to it instead of
//! init. When the call ends the host kills every process of its children's sessions, wherever they were
//! re-parented, and every orphan it adopted that leads a session of its own (a `setsid` escapee) with that
//! session, then reaps them. An adopted session leader cannot be told apart by call, so the first call to end
//! kills every such orphan: stricter, never looser.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::confine::Limits;

/// How long a background thread waits for a killed cgroup to empty before removing it.
const DRAIN: Duration = Duration::from_secs(5);

/// The processes of one call. Dropping it kills them all.
#[derive(Debug, Default)]
pub struct CallScope {
    cgroup: OnceLock<Option<Cgroup>>,
    /// The cgroups of v1 hierarchies that carry the call's limits where the unified one has not the controller.
    limiters: OnceLock<Vec<Cgroup>>,
    /// The sessions of the children started without a cgroup (each child leads its own).
    sessions: Mutex<Vec<i32>>,
}

/// The direct children of every live [`CallScope`] (they are the host's children and lead sessions, like the
/// orphans the fallback kills; these are not orphans).
static DIRECT_CHILDREN: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

#[derive(Debug)]
struct Cgroup {
    dir: PathBuf,
    /// `cgroup.procs`, open for writing: a child writes `0` to it to join.
    procs: File,
}

impl CallScope {
    /// A scope; its cgroup is made on the first start.
    pub fn new() -> Self {
        Self::default()
    }

    /// The file descriptor a child writes `0` to, to join the call's cgroup before exec (none where the host
    /// cannot make cgroups: then only process groups are killed).
    pub fn join_fd(&self) -> Option<RawFd> {
        let fd = self
            .cgroup
            .get_or_init(Cgroup::create)
            .as_ref()
            .map(|c| c.procs.as_raw_fd());
        if fd.is_none() {
            // Before the child is forked: only processes forked after the host became a subreaper have their
            // orphans re-parented to it.
            adopt_orphans();
        }
        fd
    }

    /// The descriptors a child writes `0` to, to join the call's cgroup and the ones that carry `limits` (made
    /// by the first start that has limits: the call's later starts share them).
    pub fn join_fds(&self, limits: &Limits) -> [Option<RawFd>; 3] {
        let unified = self.join_fd();
        let mut fds = [unified, None, None];
        if limits.pids.is_none() && limits.memory.is_none() {
            return fds;
        }
        let dir = self.cgroup.get().and_then(Option::as_ref).map(|c| c.dir.clone());
        let limiters = self.limiters.get_or_init(|| limit(dir.as_deref(), limits));
        for (slot, limiter) in fds[1..].iter_mut().zip(limiters) {
            *slot = Some(limiter.procs.as_raw_fd());
        }
        fds
    }

    /// A scope that never makes a cgroup: the fallback, for tests on hosts that can make them.
    #[cfg(test)]
    pub(crate) fn without_cgroup() -> Self {
        let scope = Self::default();
        let _ = scope.cgroup.set(None);
        scope
    }

    /// Whether the host can give calls cgroups of their own (cgroup v2, writable where the host runs).
    pub fn available() -> bool {
        static AVAILABLE: OnceLock<bool> = OnceLock::new();
        *AVAILABLE.get_or_init(|| Cgroup::create().map(Cgroup::kill).is_some())
    }

    /// Whether the call's processes are in a cgroup of their own.
    pub fn is_cgroup(&self) -> bool {
        self.cgroup.get().is_some_and(Option::is_some)
    }

    /// Record a started child (the leader of its own session).
    pub fn started(&self, pid: i32) {
        // Every direct child, also of scopes with a cgroup: the fallback must never take one for an orphan.
        if let Ok(mut live) = DIRECT_CHILDREN.lock() {
            live.get_or_insert_with(HashSet::new).insert(pid);
        }
        if !self.is_cgroup()
            && let Ok(mut sessions) = self.sessions.lock()
        {
            sessions.push(pid);
        }
    }

    /// Forget a child that was reaped (its pid may be reused).
    pub fn reaped(pid: i32) {
        if let Ok(mut live) = DIRECT_CHILDREN.lock()
            && let Some(live) = live.as_mut()
        {
            live.remove(&pid);
        }
    }

    /// Kill every process of the call (the scope stays usable: a later start makes a new cgroup).
    pub fn kill_all(&mut self) {
        if let Some(Some(cgroup)) = self.cgroup.take() {
            cgroup.kill();
        }
        for limiter in self.limiters.take().into_iter().flatten() {
            limiter.kill();
        }
        let sessions = std::mem::take(self.sessions.get_mut().unwrap_or_else(|e| e.into_inner()));
        if !sessions.is_empty() {
            kill_sessions(sessions);
        }
    }
}

/// Set `limits` on the unified cgroup `unified` where its controllers allow, and make cgroups of the v1
/// hierarchies (`pids`, `memory`) for the rest: those to join besides the unified one. A limit no hierarchy can
/// carry is left out (logged once per call).
fn limit(unified: Option<&Path>, limits: &Limits) -> Vec<Cgroup> {
    let set = |dir: &Path, file: &str, value: String| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join(file))
            .and_then(|mut f| f.write_all(value.as_bytes()))
            .is_ok()
    };
    let mut extra = Vec::new();
    let wanted = [
        ("pids", limits.pids.map(|p| vec![("pids.max", p.to_string())])),
        (
            "memory",
            limits
                .memory
                .map(|m| vec![("memory.max", m.to_string()), ("memory.swap.max", "0".to_owned())]),
        ),
    ];
    for (controller, files) in wanted {
        let Some(files) = files else { continue };
        if let Some(dir) = unified
            && set(dir, files[0].0, files[0].1.clone())
        {
            for (file, value) in &files[1..] {
                let _ = set(dir, file, value.clone());
            }
            continue;
        }
        let v1 = v1_base(controller).and_then(|base| {
            let group = Cgroup::create_in(&base)?;
            let file = match controller {
                "pids" => ("pids.max", files[0].1.clone()),
                _ => ("memory.limit_in_bytes", files[0].1.clone()),
            };
            if set(&group.dir, file.0, file.1) {
                Some(group)
            } else {
                group.kill();
                None
            }
        });
        match v1 {
            Some(group) => extra.push(group),
            None => tracing::debug!("no cgroup can carry the {controller} limit of a call: left out"),
        }
    }
    extra
}

/// The host's own cgroup in the v1 hierarchy of `controller`, where one is mounted and writable.
fn v1_base(controller: &str) -> Option<PathBuf> {
    own_cgroup(Some(controller))
}

/// The host's own cgroup directory: in the unified hierarchy (`controller` none), or in the v1 hierarchy of
/// `controller`, where one is mounted with a `cgroup.procs`; what hosts that exited before their clean-up ran
/// left there is swept.
fn own_cgroup(controller: Option<&str>) -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // Lines: hierarchy-id:controllers:path (the unified one is `0::path`).
    let own = own.lines().find_map(|l| {
        let mut fields = l.splitn(3, ':');
        let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let wanted = match controller {
            None => id == "0" && controllers.is_empty(),
            Some(c) => controllers.split(',').any(|x| x == c),
        };
        wanted.then(|| path.trim().to_owned())
    })?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // Fields: id parent major:minor root mount-point options... - fstype source super-options.
    let mount = mounts.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut right = right.split_whitespace();
        let (fstype, options) = (right.next()?, right.nth(1).unwrap_or_default());
        let wanted = match controller {
            None => fstype == "cgroup2",
            Some(c) => fstype == "cgroup" && options.split(',').any(|o| o == c),
        };
        wanted.then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    let dir = mount.join(own.trim_start_matches('/'));
    if !dir.join("cgroup.procs").exists() {
        return None;
    }
    sweep(&dir);
    Some(dir)
}

/// Make the host a child subreaper (once), so the orphans of the processes it starts stay within its reach.
fn adopt_orphans() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        if let Err(e) =
            rustix::process::set_child_subreaper(rustix::process::Pid::from_raw(std::process::id() as i32))
        {
            tracing::warn!("cannot become a child subreaper ({e}): a setsid descendant may outlive its call");
        }
    });
}

/// One process of `/proc`: pid, parent, session.
fn processes() -> Vec<(i32, i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // After the command (in parentheses, which may hold anything): state ppid pgrp session ...
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            Some((pid, fields.get(1)?.parse().ok()?, fields.get(3)?.parse().ok()?))
        })
        .collect()
}

/// Kill every process of `sessions` and every session-leading orphan the host adopted (with its session), then
/// reap the host's own children among them.
fn kill_sessions(mut sessions: Vec<i32>) {
    let host = std::process::id() as i32;
    let live = DIRECT_CHILDREN
        .lock()
        .map(|l| l.clone().unwrap_or_default())
        .unwrap_or_default();
    // Killed processes can have forked in between: go round until nothing of the call is left.
    for _ in 0..20 {
        let all = processes();
        sessions.extend(
            all.iter()
                .filter(|(pid, ppid, sid)| *ppid == host && pid == sid && !live.contains(pid))
                .map(|(pid, _, _)| *pid),
        );
        let doomed: Vec<(i32, i32)> = all
            .iter()
            .filter(|(pid, _, sid)| sessions.contains(sid) && *pid != host)
            .map(|(pid, ppid, _)| (*pid, *ppid))
            .collect();
        if doomed.is_empty() {
            break;
        }
        for (pid, ppid) in doomed {
            let Some(p) = rustix::process::Pid::from_raw(pid) else {
                continue;
            };
            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            if ppid == host && !live.contains(&pid) {
                // An adopted orphan: nobody else waits for it.
                let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::empty());
            }
        }
    }
}

impl Drop for CallScope {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Where the host may make cgroups: its own cgroup v2 directory, found once.
fn base() -> Option<&'static Path> {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    BASE.get_or_init(|| own_cgroup(None)).as_deref()
}

/// Remove the empty cgroups earlier hosts left in `base` (a host that exited before its clean-up thread ran).
fn sweep(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("toolwright-"))
            .and_then(|n| n.split('-').next())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            // Fails, harmlessly, for a cgroup that still has members.
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

impl Cgroup {
    fn create() -> Option<Cgroup> {
        Self::create_in(base()?)
    }

    /// A new cgroup below `base`.
    fn create_in(base: &Path) -> Option<Cgroup> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = base.join(format!(
            "toolwright-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let made = std::fs::create_dir(&dir).and_then(|()| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
        });
        match made {
            Ok(procs) => Some(Cgroup { dir, procs }),
            Err(e) => {
                tracing::debug!(
                    "cannot make a cgroup in {} ({e}): the processes of a call are killed by process group",
                    base.display()
                );
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    fn kill(self) {
        let killed = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
            .and_then(|mut f| f.write_all(b"1"));
        if let Err(e) = killed {
            // Before Linux 5.14: kill the members one by one until none is left (they cannot leave).
            tracing::debug!(
                "{}: no cgroup.kill ({e}); killing members one by one",
                self.dir.display()
            );
            for _ in 0..100 {
                let members = self.members();
                if members.is_empty() {
                    break;
                }
                for pid in members {
                    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                    }
                }
            }
        }
        // The members are dying; the directory can go once they are gone. Not waited for on the call's thread.
        let dir = self.dir;
        drop(self.procs);
        if std::fs::remove_dir(&dir).is_ok() {
            return;
        }
        let _ = std::thread::Builder::new()
            .name("toolwright-cgroup".into())
            .spawn(move || {
                let until = Instant::now() + DRAIN;
                while std::fs::remove_dir(&dir).is_err() {
                    if Instant::now() >= until {
                        tracing::warn!(
                            "{}: the cgroup of a call did not empty; left behind",
                            dir.display()
                        );
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
    }

    fn members(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_makes_its_cgroup_on_first_use_and_removes_it() {
        // Also: a scope that made no cgroup and started nothing kills nothing.
        CallScope::new().kill_all();
        let mut scope = CallScope::new();
        assert!(!scope.is_cgroup());
        if scope.join_fd().is_none() {
            return; // no cgroup v2 we may write: the fallback is tested through the process tests
        }
        let dir = scope.cgroup.get().unwrap().as_ref().unwrap().dir.clone();
        assert!(dir.join("cgroup.procs").exists());
        scope.kill_all();
        let until = Instant::now() + Duration::from_secs(2);
        while dir.exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!dir.exists(), "{} was left behind", dir.display());
    }
}
