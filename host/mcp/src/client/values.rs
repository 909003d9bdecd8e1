//! `${VAR}` in a server's `env` and `headers` values, as pi resolves them: `${NAME}` and `$NAME` are the host's
//! variables (unset or empty is an error), `$$` is `$`, `$!` is `!`, anything else is kept as written.
//!
//! pi runs a value that starts with `!` as a shell command, unconfined, at every connect. Toolwright does not
//! run it: such a value is refused with a message that says what to write instead.

/// `value` resolved against `vars`; `what` names it in errors (`MCP server "x" env "K"`).
pub fn resolve(value: &str, what: &str, vars: &[(String, String)]) -> Result<String, String> {
    if let Some(command) = value.strip_prefix('!') {
        return Err(format!(
            "Failed to resolve {what} from shell command: {command} (Toolwright does not run shell commands from \
             MCP configuration; set a variable and write ${{NAME}})"
        ));
    }
    let lookup = |name: &str| {
        vars.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    };
    let is_start = |c: char| c.is_ascii_alphabetic() || c == '_';
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut missing: Vec<String> = Vec::new();
    let miss = |name: &str, missing: &mut Vec<String>| {
        if !missing.iter().any(|m| m == name) {
            missing.push(name.to_owned());
        }
    };
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('!') {
            out.push('!');
            rest = tail;
        } else if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => {
                    let name = &braced[..end];
                    let valid = name.starts_with(is_start) && name.chars().all(is_name);
                    if !valid {
                        out.push_str(&rest[at..at + 2 + end + 1]);
                    } else {
                        match lookup(name) {
                            Some(v) => out.push_str(v),
                            None => miss(name, &mut missing),
                        }
                    }
                    rest = &braced[end + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        } else if after.starts_with(is_start) {
            let len = after.find(|c: char| !is_name(c)).unwrap_or(after.len());
            let name = &after[..len];
            match lookup(name) {
                Some(v) => out.push_str(v),
                None => miss(name, &mut missing),
            }
            rest = &after[len..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    match missing.as_slice() {
        [] => Ok(out),
        [one] => Err(format!(
            "Failed to resolve {what} from environment variable: {one}"
        )),
        many => Err(format!(
            "Failed to resolve {what} from environment variables: {}",
            many.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vec<(String, String)> {
        vec![
            ("SET_A".into(), "alpha".into()),
            ("EMPTY_B".into(), String::new()),
        ]
    }

    fn ok(value: &str) -> String {
        resolve(value, "MCP server \"x\" env \"K\"", &vars()).unwrap()
    }

    fn err(value: &str) -> String {
        resolve(value, "MCP server \"x\" env \"K\"", &vars()).unwrap_err()
    }

    #[test]
    fn values_resolve_as_pi_resolves_them() {
        // Each case as pi 1.6.0 resolved it (recorded with its resolveConfigValue).
        assert_eq!(ok("x-$SET_A-y"), "x-alpha-y");
        assert_eq!(ok("x-${SET_A}-y"), "x-alpha-y");
        assert_eq!(ok("$$SET_A"), "$SET_A");
        assert_eq!(ok("$!x"), "!x");
        for literal in ["${}", "${A-B}", "${SET_A", "cost $5", "trail$", " !echo x", ""] {
            assert_eq!(ok(literal), literal, "{literal:?}");
        }
        assert_eq!(
            err("$SET_A_more"),
            "Failed to resolve MCP server \"x\" env \"K\" from environment variable: SET_A_more"
        );
        assert_eq!(
            err("${EMPTY_B}"),
            "Failed to resolve MCP server \"x\" env \"K\" from environment variable: EMPTY_B"
        );
        assert_eq!(
            err("${NOPE1}:${NOPE2}:${NOPE1}"),
            "Failed to resolve MCP server \"x\" env \"K\" from environment variables: NOPE1, NOPE2"
        );
    }

    #[test]
    fn a_shell_command_is_refused_not_run() {
        let error = err("!touch /tmp/toolwright-must-not-exist");
        assert!(error.starts_with(
            "Failed to resolve MCP server \"x\" env \"K\" from shell command: touch /tmp/toolwright-must-not-exist"
        ));
        assert!(!std::path::Path::new("/tmp/toolwright-must-not-exist").exists());
    }
}
