//! The processes of one call: every process a call starts, and every descendant, dies when the call ends.
//!
//! A process group is not enough: a grandchild can leave it (`setsid`), and once the direct child is reaped
//! its group id can even be reused. So each call that starts a program gets its own cgroup v2 (below the host's
//! own cgroup), which every child joins between fork and exec, before it can fork itself; a cgroup cannot be
//! left from inside without write access to the cgroup tree, which confined programs lack. When the call ends
//! (result, deadline, cancellation: the store or the native call context is dropped), `cgroup.kill` kills every
//! member at once. Where no cgroup can be made (no cgroup v2, no write access), the host falls back to killing
//! the process group of each child it started.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a background thread waits for a killed cgroup to empty before removing it.
const DRAIN: Duration = Duration::from_secs(5);

/// The processes of one call. Dropping it kills them all.
#[derive(Debug, Default)]
pub struct CallScope {
    cgroup: OnceLock<Option<Cgroup>>,
}

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
        self.cgroup
            .get_or_init(Cgroup::create)
            .as_ref()
            .map(|c| c.procs.as_raw_fd())
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

    /// Kill every process of the call (the scope stays usable: a later start makes a new cgroup).
    pub fn kill_all(&mut self) {
        if let Some(Some(cgroup)) = self.cgroup.take() {
            cgroup.kill();
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
    BASE.get_or_init(|| {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let own = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim().to_owned();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        // Fields: id parent major:minor root mount-point options... - fstype source super-options.
        let mount = mounts.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
        })?;
        let dir = mount.join(own.trim_start_matches('/'));
        dir.join("cgroup.procs").exists().then_some(dir)
    })
    .as_deref()
}

impl Cgroup {
    fn create() -> Option<Cgroup> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = base()?;
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
