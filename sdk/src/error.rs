//! The error a tool raises, and Node-style texts for filesystem errors (pi's messages quote Node's).

use std::io;

/// A failure a tool raises (pi's thrown `Error`). Its message is exactly the text the model sees.
///
/// When the host, not the tool, ended the call (a plugin trapped, ran past a limit or its deadline, was
/// cancelled, or returned a value the host could not accept), [`ToolError::host_fault`] says which: an embedder
/// can tell a sandbox fault from the tool's own error while the model still sees pi's texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    message: String,
    fault: Option<HostFault>,
}

/// Why the host ended a call (see [`ToolError::host_fault`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HostFault {
    /// The plugin trapped: a panic, an unreachable instruction, a stack overflow, a failed host call.
    Trap,
    /// The plugin went past a limit it was given: memory, fuel, the size of a result.
    Limit,
    /// The plugin ran past its deadline.
    Timeout,
    /// The call was cancelled before or while it ran.
    Cancelled,
    /// The plugin returned a value the host could not accept (malformed JSON, an invalid result).
    Malformed,
    /// The plugin runtime could not run the call (it is shutting down, or the plugin is unusable).
    Unavailable,
}

impl ToolError {
    /// An error whose message the model will see verbatim.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            fault: None,
        }
    }

    /// An error the host raised for `fault`, with the text the model sees.
    pub fn host(fault: HostFault, message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            fault: Some(fault),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Why the host ended the call, when it did; `None` for an error the tool raised itself.
    pub fn host_fault(&self) -> Option<HostFault> {
        self.fault
    }

    /// An I/O error as Node reports it for `syscall` on `path`, e.g.
    /// `ENOENT: no such file or directory, access '/abs/path'`.
    pub fn io(error: &io::Error, syscall: &str, path: &str) -> Self {
        ToolError::new(node_message(error, syscall, Some(path)))
    }

    /// An I/O error as Node reports it for `syscall` without a path, e.g.
    /// `EISDIR: illegal operation on a directory, read`.
    pub fn io_no_path(error: &io::Error, syscall: &str) -> Self {
        ToolError::new(node_message(error, syscall, None))
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        ToolError::new(message)
    }
}

/// The Node error code and description of an I/O error, e.g. `("ENOENT", "no such file or directory")`.
pub fn node_code(error: &io::Error) -> Option<(&'static str, &'static str)> {
    use io::ErrorKind as K;
    Some(match error.kind() {
        K::NotFound => ("ENOENT", "no such file or directory"),
        K::PermissionDenied => ("EACCES", "permission denied"),
        K::AlreadyExists => ("EEXIST", "file already exists"),
        K::IsADirectory => ("EISDIR", "illegal operation on a directory"),
        K::NotADirectory => ("ENOTDIR", "not a directory"),
        K::DirectoryNotEmpty => ("ENOTEMPTY", "directory not empty"),
        K::ReadOnlyFilesystem => ("EROFS", "read-only file system"),
        K::InvalidFilename => ("ENAMETOOLONG", "name too long"),
        K::StorageFull => ("ENOSPC", "no space left on device"),
        _ => return None,
    })
}

/// `CODE: description, syscall 'path'`, Node's format. An error the host made itself (a refused grant) keeps its
/// own message, which says which grant would allow the access.
fn node_message(error: &io::Error, syscall: &str, path: Option<&str>) -> String {
    if error.get_ref().is_some() {
        return error.to_string();
    }
    match (node_code(error), path) {
        (Some((code, text)), Some(path)) => format!("{code}: {text}, {syscall} '{path}'"),
        (Some((code, text)), None) => format!("{code}: {text}, {syscall}"),
        (None, _) => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_texts() {
        let e = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(
            ToolError::io(&e, "access", "/w/x").message(),
            "ENOENT: no such file or directory, access '/w/x'"
        );
        let e = io::Error::from(io::ErrorKind::IsADirectory);
        assert_eq!(
            ToolError::io_no_path(&e, "read").message(),
            "EISDIR: illegal operation on a directory, read"
        );
        let e = io::Error::new(
            io::ErrorKind::PermissionDenied,
            "write access to /etc is not granted",
        );
        assert_eq!(
            ToolError::io(&e, "open", "/etc").message(),
            "write access to /etc is not granted"
        );
    }
}
