//! # toolwright-tool-bash
//!
//! pi 1.6.0's `bash` tool: run a command with `bash -c` (`sh -c` where there is no `/bin/bash`) in the
//! workspace. The run itself is pi's shell tool, shared with `powershell`: [`toolwright_sdk::shell`].
//!
//! ```
//! use toolwright_sdk::Tool;
//! assert_eq!(toolwright_tool_bash::Bash.spec().name, "bash");
//! ```

use toolwright_sdk::shell::Shell;
use toolwright_sdk::{Ctx, Tool, ToolError, ToolResult, ToolSpec, Value};

/// The `bash` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bash;

/// pi's `bashToolConfig`, with pi's Unix shell resolution: `/bin/bash`, else `sh`.
const BASH: Shell = Shell {
    name: "bash",
    shell_name: "bash",
    snippet: "Execute bash commands (ls, grep, find, etc.)",
    temp_prefix: "toolwright-bash",
    program,
    arguments: |command| vec!["-c".into(), command.into()],
};

fn program(ctx: &dyn Ctx) -> Result<String, ToolError> {
    Ok(if ctx.files().metadata("/bin/bash").is_ok() {
        "/bin/bash".into()
    } else {
        "sh".into()
    })
}

impl Tool for Bash {
    fn spec(&self) -> ToolSpec {
        BASH.spec()
    }

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        BASH.execute(args, ctx)
    }
}

toolwright_sdk::export_tool!(Bash; capabilities = [
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Spawn("/bin/bash".into()), "runs the commands the model asks for"),
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Read("/".into()), "checks the working directory exists"),
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Env("*".into()), "passes the environment to the commands, as a shell does"),
]);
