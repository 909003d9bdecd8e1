//! What a refused access tells the model: after the output of a command run in the built-ins' sandbox, when its
//! output reports a refusal, what the sandbox allowed and which grant would allow more (Claude Code's sandbox
//! violations, as text the model can act on).

use std::path::{Path, PathBuf};

use toolwright_core::policy::SandboxMode;

use super::confine::Confinement;

/// Output that shows a confined program was refused something.
const REFUSED: &[&str] = &[
    "Permission denied",
    "Operation not permitted",
    "Read-only file system",
];

/// Output that shows a confined program found no network.
const NO_NETWORK: &[&str] = &[
    "Network is unreachable",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "getaddrinfo",
    "Connection refused",
];

/// Whether a line of output reports a refusal the sandbox may have caused.
pub(crate) fn shows_refusal(line: &str) -> bool {
    REFUSED.iter().chain(NO_NETWORK).any(|r| line.contains(r))
}

/// What the model is told after the `output` of a command of the built-ins run under `confinement`, when the
/// output shows a refusal the sandbox may have caused (none otherwise: pi's texts stay as they are).
pub fn explain(
    output: &str,
    confinement: &Confinement,
    cwd: Option<&Path>,
    refused_hosts: &[String],
) -> Option<String> {
    let mode = confinement.mode?;
    let refused = REFUSED.iter().any(|r| output.contains(r));
    let offline = NO_NETWORK.iter().any(|r| output.contains(r));
    if !refused && !offline && refused_hosts.is_empty() {
        return None;
    }
    let mut lines = vec![format!(
        "[sandbox] This command ran in the {} sandbox (the [builtins] section of toolwright.toml):",
        mode.name()
    )];
    if refused {
        let paths = refused_paths(output, cwd);
        let mut named = false;
        for path in &paths {
            let path = Path::new(path);
            if let Some(secret) = confinement.hidden.iter().find(|h| path.starts_with(h)) {
                lines.push(format!(
                    "- {} is one of the user's secrets ({}): no command may read or write it. Removing it from \
                     `secrets` would allow it.",
                    path.display(),
                    secret.display()
                ));
                named = true;
            } else if confinement.protected.iter().any(|p| path.starts_with(p)) {
                lines.push(format!(
                    "- {} is the host's own (a policy file, lockfile, plugin directory, component cache or audit \
                     log): no command may change it.",
                    path.display()
                ));
                named = true;
            } else if !confinement.read.iter().any(|r| path.starts_with(r)) {
                lines.push(format!(
                    "- {} is outside what it may read ({}). `read = [\"{}\"]` would allow it.",
                    path.display(),
                    list(&confinement.read),
                    path.display()
                ));
                named = true;
            } else if mode == SandboxMode::ReadOnly {
                lines.push(format!(
                    "- it may write nothing ({}). `sandbox = \"workspace-write\"` would let it write the workspace.",
                    path.display()
                ));
                named = true;
            } else if !confinement.write.iter().any(|w| path.starts_with(w)) {
                let dir = path.parent().unwrap_or(path);
                lines.push(format!(
                    "- writing {} is outside what it may write ({}). `write = [\"{}\"]` would allow it.",
                    path.display(),
                    list(&confinement.write),
                    dir.display()
                ));
                named = true;
            }
        }
        if !named && mode == SandboxMode::ReadOnly {
            lines.push(
                "- it may write nothing. `sandbox = \"workspace-write\"` would let it write the workspace."
                    .into(),
            );
        } else if !named {
            lines.push(format!(
                "- it may write only in {}, and not the user's secrets; a \"Permission denied\" above may come \
                 from it.",
                list(&confinement.write)
            ));
        }
    }
    for host in refused_hosts {
        lines.push(format!(
            "- the proxy refused {host}: `network = [\"{host}\"]` would allow it."
        ));
    }
    if offline && refused_hosts.is_empty() && confinement.own_network {
        lines.push(match &confinement.proxy {
            None => "- it has no network (only a loopback of its own): no host outside can be reached. A \
                     `network = [\"HOST:PORT\"]` grant would let commands reach that host through the host's proxy \
                     (HTTP_PROXY); `sandbox = \"off\"` would give them the host's network."
                .into(),
            Some(hosts) => format!(
                "- it reaches only {} through the host's proxy (HTTP_PROXY, HTTPS_PROXY); a program that ignores \
                 them reaches nothing.",
                hosts.describe()
            ),
        });
    }
    lines.push("Ask the user to change the policy if the command needs more.".into());
    Some(lines.join("\n"))
}

/// `paths`, for a sentence ("nothing" when empty).
fn list(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "nothing".into();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The paths the lines of `output` report refused, each once: the last word before `: Permission denied`
/// (`touch: cannot touch '/x': Permission denied`, `bash: line 1: /x: Permission denied`), relative ones
/// resolved against `cwd`.
fn refused_paths(output: &str, cwd: Option<&Path>) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for line in output.lines() {
        for phrase in REFUSED {
            let Some(at) = line.find(&format!(": {phrase}")) else {
                continue;
            };
            let before = &line[..at];
            let said = before.rsplit(": ").next().unwrap_or(before);
            let word = said.split_whitespace().last().unwrap_or_default();
            let word = word.trim_matches(|c: char| matches!(c, '\'' | '"' | '`' | '‘' | '’'));
            let path = match cwd {
                Some(cwd) if !word.is_empty() && !word.starts_with('/') && !word.contains(' ') => {
                    toolwright_sdk::paths::normalize(&cwd.join(word).to_string_lossy())
                }
                _ => word.to_owned(),
            };
            if path.starts_with('/') && path.len() > 1 && !found.contains(&path) {
                found.push(path);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{BuiltinSandbox, Hosts};

    fn confined() -> Confinement {
        Confinement::for_builtins(&BuiltinSandbox {
            mode: SandboxMode::WorkspaceWrite,
            read: vec!["/".into()],
            write: vec!["/ws".into()],
            temp_dir: "/tmp".into(),
            hidden: vec!["/home/u/.ssh".into()],
            protected: Vec::new(),
            network: Hosts::default(),
            memory: None,
            asks_network: false,
        })
        .unwrap()
    }

    #[test]
    fn nothing_is_added_when_nothing_was_refused() {
        assert_eq!(explain("hello\n", &confined(), None, &[]), None);
    }

    #[test]
    fn a_refused_write_names_the_grant_that_would_allow_it() {
        let text = explain(
            "touch: cannot touch '/etc/x': Permission denied\n/bin/bash: line 1: /etc/y: Permission denied\n",
            &confined(),
            None,
            &[],
        )
        .unwrap();
        assert!(text.contains("workspace-write sandbox"), "{text}");
        assert!(
            text.contains(
                "writing /etc/x is outside what it may write (/ws, /tmp, /dev/shm). `write = [\"/etc\"]`"
            ),
            "{text}"
        );
        assert!(text.contains("writing /etc/y is outside"), "{text}");
        assert!(
            !text.contains("/bin/bash"),
            "the shell's own name is no refused path: {text}"
        );
    }

    #[test]
    fn a_refused_secret_is_named_as_one() {
        let text = explain(
            "cat: /home/u/.ssh/id_ed25519: Permission denied\n",
            &confined(),
            None,
            &[],
        )
        .unwrap();
        assert!(
            text.contains("/home/u/.ssh/id_ed25519 is one of the user's secrets (/home/u/.ssh)"),
            "{text}"
        );
    }

    #[test]
    fn no_network_is_said() {
        let text = explain(
            "curl: (6) Could not resolve host: example.com\n",
            &confined(),
            None,
            &[],
        )
        .unwrap();
        assert!(text.contains("it has no network"), "{text}");
    }

    #[test]
    fn off_confines_nothing() {
        let sandbox = BuiltinSandbox {
            mode: SandboxMode::Off,
            ..Default::default()
        };
        assert_eq!(Confinement::for_builtins(&sandbox), None);
    }
}
