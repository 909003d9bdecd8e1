//! # toolwright-tool-powershell
//!
//! pi 1.6.0's `powershell` tool: pi's shell tool ([`toolwright_sdk::shell`], shared with `bash`) with
//! PowerShell's configuration. It starts `pwsh` (PowerShell 7, which runs on Linux and macOS too) found on the
//! `PATH` the tool is given, as pi starts `pwsh.exe` on Windows: with `-NoProfile -NonInteractive
//! -ExecutionPolicy Bypass -Command` and pi's UTF-8 prologue before the command. Without `pwsh` every call fails
//! with pi's text for a missing PowerShell. pi itself refuses every call outside Windows (`The powershell tool
//! is only available on Windows.`); running `pwsh` where it is installed is Toolwright's choice.
//!
//! ```
//! use toolwright_sdk::Tool;
//! assert_eq!(toolwright_tool_powershell::PowerShell.spec().name, "powershell");
//! ```

use toolwright_sdk::shell::Shell;
use toolwright_sdk::{Ctx, Tool, ToolError, ToolResult, ToolSpec, Value};

/// The `powershell` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct PowerShell;

/// pi's `powershellToolConfig`.
const POWERSHELL: Shell = Shell {
    name: "powershell",
    shell_name: "PowerShell",
    snippet: "Execute PowerShell commands",
    temp_prefix: "toolwright-powershell",
    program,
    arguments,
};

/// The program looked for on `PATH`.
const PROGRAM: &str = "pwsh";

/// pi's error when it finds no PowerShell (`getPowerShellConfig`).
const NOT_FOUND: &str =
    "No PowerShell executable found. Install PowerShell or add powershell.exe/pwsh.exe to PATH.";

/// pi's `POWERSHELL_ARGS`.
const ARGS: [&str; 5] = [
    "-NoProfile",
    "-NonInteractive",
    "-ExecutionPolicy",
    "Bypass",
    "-Command",
];

/// pi's `UTF8_OUTPUT_PREFIX`, put before every command so that output is UTF-8 whatever the console's code page.
const UTF8_PROLOGUE: &str = "try { [Console]::OutputEncoding=[System.Text.Encoding]::UTF8 } catch {}\n";

/// The first `pwsh` on the `PATH` the tool's environment has (pi asks `where pwsh.exe`), as an absolute path,
/// so that the host starts the file this found.
fn program(ctx: &dyn Ctx) -> Result<String, ToolError> {
    let path = ctx
        .env()
        .into_iter()
        .find_map(|(name, value)| (name == "PATH").then_some(value))
        .unwrap_or_default();
    path.split(':')
        .filter(|dir| dir.starts_with('/'))
        .map(|dir| format!("{}/{PROGRAM}", dir.trim_end_matches('/')))
        .find(|candidate| ctx.files().metadata(candidate).is_ok_and(|m| m.is_file()))
        .ok_or_else(|| ToolError::new(NOT_FOUND))
}

/// The arguments for `command`. pi appends an exit-code suffix only for Windows PowerShell 5.1
/// (`powershell.exe`), never for `pwsh`.
fn arguments(command: &str) -> Vec<String> {
    let mut args: Vec<String> = ARGS.iter().map(|a| (*a).to_owned()).collect();
    args.push(format!("{UTF8_PROLOGUE}{command}"));
    args
}

impl Tool for PowerShell {
    fn spec(&self) -> ToolSpec {
        POWERSHELL.spec()
    }

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        POWERSHELL.execute(args, ctx)
    }
}

toolwright_sdk::export_tool!(PowerShell; capabilities = [
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Spawn(PROGRAM.into()), "runs the commands the model asks for"),
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Read("/".into()), "finds pwsh on PATH and checks the working directory exists"),
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Env("*".into()), "passes the environment to the commands, as a shell does"),
]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_get_pi_arguments_and_prologue() {
        assert_eq!(
            arguments("Get-ChildItem"),
            [
                "-NoProfile",
                "-NonInteractive",
                "-ExecutionPolicy",
                "Bypass",
                "-Command",
                "try { [Console]::OutputEncoding=[System.Text.Encoding]::UTF8 } catch {}\nGet-ChildItem"
            ]
        );
    }
}
