//! Processes for native tools: a process group per spawn, stdout and stderr merged in arrival order, the whole
//! group killed on kill or drop.

use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Stdio};

use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use toolwright_sdk::{Command, ExitStatus, Process, ProcessEvent};

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
}

impl NativeProcess {
    /// Start `command` with exactly the environment `env` (plus `command.env`), in a new process group.
    pub fn spawn(command: &Command, env: &[(String, String)]) -> io::Result<Self> {
        // One pipe for both streams: the bytes arrive in exactly the order the process wrote them.
        let (reader, writer) = io::pipe()?;
        let mut cmd = std::process::Command::new(&command.program);
        cmd.args(&command.args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(writer.try_clone()?)
            .stderr(writer)
            .process_group(0);
        if let Some(cwd) = &command.cwd {
            cmd.current_dir(cwd);
        }
        let child = cmd.spawn()?;
        // `cmd` holds the parent's copies of the write end; dropping it closes them, so the pipe reports
        // end-of-file once every process that inherited it is gone.
        drop(cmd);
        // Bounded: a process that writes faster than the tool consumes waits on its pipe instead of filling
        // the host's memory (16 chunks of at most 64 KiB).
        let (tx, rx) = mpsc::sync_channel(16);
        pump(reader, tx);
        Ok(NativeProcess {
            child,
            rx,
            open_pipes: 1,
            exited: None,
            killed: false,
        })
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
        // SIGKILL to the whole group (the child leads it: process_group(0)), then to the child itself.
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
        let _ = self.child.try_wait();
    }
}
