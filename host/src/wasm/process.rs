//! The `process` import: a plugin starts a program only if its grants name it; output streams back; dropping
//! the handle (or the store, when a call ends) kills the whole process group.

use std::time::Duration;

use toolwright_sdk::{Command, Process, ProcessEvent};
use wasmtime::component::Resource;

use super::bindings::process as wit;
use super::state::PluginState;
use crate::native::NativeProcess;

/// A process a plugin started.
pub struct ChildProcess(NativeProcess);

impl wit::Host for PluginState {
    fn spawn(&mut self, command: wit::Command) -> wasmtime::Result<Result<Resource<ChildProcess>, String>> {
        if !self.call.programs.allows(&command.program) {
            return Ok(Err(format!(
                "Permission denied: starting {} is not granted to the plugin {}. A process grant of {} in the policy \
                 file (toolwright.toml) would allow it.",
                command.program, self.call.plugin, command.program
            )));
        }
        let command = Command {
            program: command.program,
            args: command.args,
            cwd: command.cwd,
            env: command.env,
        };
        match NativeProcess::spawn(&command, &self.call.env) {
            Ok(process) => Ok(Ok(self.table.push(ChildProcess(process))?)),
            Err(e) => Ok(Err(format!("cannot start {}: {e}", command.program))),
        }
    }
}

impl wit::HostChild for PluginState {
    fn next(
        &mut self,
        child: Resource<ChildProcess>,
        timeout_ms: u32,
    ) -> wasmtime::Result<Result<wit::ProcessEvent, String>> {
        let child = self.table.get_mut(&child)?;
        Ok(match child.0.next(Duration::from_millis(u64::from(timeout_ms))) {
            Ok(ProcessEvent::Output(bytes)) => Ok(wit::ProcessEvent::Output(bytes)),
            Ok(ProcessEvent::Exited(s)) => Ok(wit::ProcessEvent::Exited(wit::ExitStatus {
                code: s.code,
                signal: s.signal,
            })),
            Ok(ProcessEvent::Idle) => Ok(wit::ProcessEvent::Idle),
            Err(e) => Err(e.to_string()),
        })
    }

    fn kill(&mut self, child: Resource<ChildProcess>) -> wasmtime::Result<()> {
        self.table.get_mut(&child)?.0.kill();
        Ok(())
    }

    fn drop(&mut self, child: Resource<ChildProcess>) -> wasmtime::Result<()> {
        // Dropping the native process kills its group if it is still running.
        self.table.delete(child)?;
        Ok(())
    }
}
