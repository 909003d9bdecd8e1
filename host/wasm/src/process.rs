//! The `process` import: a plugin starts a program only if its grants name it, as the host resolved it, with
//! the environment and confinement the grants allow; output streams back; dropping the handle kills its process
//! group, and the end of the call (the store dropped) kills every process the call started.

use std::time::Duration;

use toolwright_sdk::{Command, Process, ProcessEvent};
use wasmtime::component::Resource;

use super::bindings::process as wit;
use super::state::PluginState;
use toolwright_native::NativeProcess;

/// The longest a plugin's wait on a process goes without checking its deadline and cancellation.
const WAIT_SLICE: Duration = Duration::from_millis(20);

impl wit::Host for PluginState {
    fn spawn(&mut self, command: wit::Command) -> wasmtime::Result<Result<Resource<NativeProcess>, String>> {
        let command = Command {
            program: command.program,
            args: command.args,
            cwd: command.cwd,
            env: command.env,
        };
        let who = format!("the plugin {}", self.call.plugin);
        let updates = &self.call.updates;
        let launch = match self.call.programs.launch(&command, &self.call.env, &who) {
            Ok(launch) => launch,
            Err(refusal) => {
                updates.spawned(&command.program, &command.args, Some(&refusal));
                let program = command.program.clone();
                self.note_refused(toolwright_core::ask::Refused::Spawn { program });
                return Ok(Err(refusal));
            }
        };
        match NativeProcess::spawn_for(&command, &launch, &self.processes, updates.clone()) {
            Ok(process) => {
                updates.spawned(&command.program, &command.args, None);
                // What its proxy refuses it is the call's to ask about, as what the host refuses the plugin.
                if let Some(refused) = process.proxy_refusals()
                    && self.child_refused.len() < toolwright_core::ask::MAX_REFUSALS_PER_CALL
                {
                    self.child_refused.push(refused);
                }
                Ok(Ok(self.table.push(process)?))
            }
            Err(e) => {
                let error = format!("cannot start {}: {e}", command.program);
                updates.spawn_failed(&command.program, &command.args, &error);
                Ok(Err(error))
            }
        }
    }
}

impl wit::HostChild for PluginState {
    fn next(
        &mut self,
        child: Resource<NativeProcess>,
        timeout_ms: u32,
    ) -> wasmtime::Result<Result<wit::ProcessEvent, String>> {
        // Waited in slices, so a plugin waiting on a quiet process still stops at its deadline, and on
        // cancellation gets control back at once (to kill its processes and report, as the bash tool does).
        let until = std::time::Instant::now() + Duration::from_millis(u64::from(timeout_ms));
        let event = loop {
            if self.call.cancel.is_cancelled() {
                return Ok(Ok(wit::ProcessEvent::Idle));
            }
            if self.call.should_stop() {
                return Err(self.call.interrupted());
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            let child = self.table.get_mut(&child)?;
            match child.next(left.min(WAIT_SLICE)) {
                Ok(ProcessEvent::Idle) if left > WAIT_SLICE => continue,
                other => break other,
            }
        };
        Ok(match event {
            Ok(ProcessEvent::Output(bytes)) => Ok(wit::ProcessEvent::Output(bytes)),
            Ok(ProcessEvent::Exited(s)) => Ok(wit::ProcessEvent::Exited(wit::ExitStatus {
                code: s.code,
                signal: s.signal,
            })),
            Ok(ProcessEvent::Idle) => Ok(wit::ProcessEvent::Idle),
            Err(e) => Err(e.to_string()),
        })
    }

    fn kill(&mut self, child: Resource<NativeProcess>) -> wasmtime::Result<()> {
        self.table.get_mut(&child)?.kill();
        Ok(())
    }

    fn drop(&mut self, child: Resource<NativeProcess>) -> wasmtime::Result<()> {
        // Dropping the native process kills its group if it is still running.
        self.table.delete(child)?;
        Ok(())
    }
}
