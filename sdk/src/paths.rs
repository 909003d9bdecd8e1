//! pi's path handling (`path-utils.ts`, `utils/paths.ts`): what a path argument means, as plain string work on
//! POSIX paths, so that it behaves the same natively and inside a wasm plugin.

use crate::{ToolError, uri};

/// Unicode spaces pi turns into ASCII spaces in path arguments.
fn is_unicode_space(c: char) -> bool {
    matches!(
        c,
        '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

/// pi's `expandPath`: Unicode spaces to ASCII, one leading `@` stripped, `~` and `~/x` expanded, `file://` URLs
/// to paths. A URL whose escapes do not decode keeps its path as written: pi throws there, and the built-ins
/// meet that error first ([`check`]).
pub fn expand(path: &str, home: Option<&str>) -> String {
    expanded(path, home).unwrap_or_else(|undecoded| undecoded)
}

/// The error pi's `resolveToCwd` throws for `path` itself: Node's `fileURLToPath` fails with `URI malformed`
/// on a `file://` URL whose escapes `decodeURIComponent` refuses.
pub fn check(path: &str) -> Result<(), ToolError> {
    if !path.contains("file://") {
        return Ok(());
    }
    expanded(path, None)
        .map(drop)
        .map_err(|_| ToolError::new("URI malformed"))
}

/// [`expand`], or the undecoded path of a `file://` URL whose escapes do not decode.
fn expanded(path: &str, home: Option<&str>) -> Result<String, String> {
    let spaced: String = path
        .chars()
        .map(|c| if is_unicode_space(c) { ' ' } else { c })
        .collect();
    let p = spaced.strip_prefix('@').unwrap_or(&spaced);
    if let Some(home) = home {
        if p == "~" {
            return Ok(home.to_owned());
        }
        if let Some(rest) = p.strip_prefix("~/") {
            return Ok(join(home, rest));
        }
    }
    if let Some(rest) = p.strip_prefix("file://") {
        let rest = rest.strip_prefix("localhost").unwrap_or(rest);
        return uri::decode_component(rest).ok_or_else(|| rest.to_owned());
    }
    Ok(p.to_owned())
}

/// pi's `resolveToCwd`: the expanded path made absolute against `cwd`, with `.` and `..` resolved lexically
/// (Node's `path.resolve`; symlinks are not followed).
pub fn resolve_to_cwd(path: &str, cwd: &str, home: Option<&str>) -> String {
    let expanded = expand(path, home);
    if expanded.starts_with('/') {
        normalize(&expanded)
    } else {
        normalize(&join(cwd, &expanded))
    }
}

/// `a/b`, with exactly one separator.
pub fn join(a: &str, b: &str) -> String {
    if a.ends_with('/') {
        format!("{a}{b}")
    } else {
        format!("{a}/{b}")
    }
}

/// Node's `path.resolve` normalisation of an absolute path: `.` and empty segments dropped, `..` applied, no
/// trailing slash (except for `/`).
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The parent directory of an absolute path (`/` for `/`).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last component of a path.
pub fn base_name(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or(path)
}

/// `path` relative to `base` with `/` separators (Node's `path.relative` for absolute POSIX paths).
pub fn relative(base: &str, path: &str) -> String {
    let from: Vec<&str> = base.split('/').filter(|s| !s.is_empty()).collect();
    let to: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = std::iter::repeat_n("..", from.len() - common).collect();
    parts.extend(&to[common..]);
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_like_node() {
        assert_eq!(resolve_to_cwd("a.txt", "/w", None), "/w/a.txt");
        assert_eq!(resolve_to_cwd("./x/../y/", "/w", None), "/w/y");
        assert_eq!(resolve_to_cwd("/etc/../tmp", "/w", None), "/tmp");
        assert_eq!(resolve_to_cwd("@src/a.rs", "/w", None), "/w/src/a.rs");
        assert_eq!(resolve_to_cwd("~/notes", "/w", Some("/home/u")), "/home/u/notes");
        assert_eq!(resolve_to_cwd("a\u{00A0}b", "/w", None), "/w/a b");
        assert_eq!(resolve_to_cwd("file:///tmp/a%20b", "/w", None), "/tmp/a b");
        assert_eq!(resolve_to_cwd("../../..", "/w", None), "/");
        assert_eq!(resolve_to_cwd("file://localhost/tmp/x", "/w", None), "/tmp/x");
    }

    /// Node 20's `fileURLToPath` throws `URIError: URI malformed` for these; the path stays as written, and
    /// [`check`] gives pi's error (it used to decode them leniently, and `%a\u{e9}` panicked).
    #[test]
    fn malformed_file_urls_fail_as_in_pi() {
        for url in [
            "file:///tmp/%zz",
            "file:///tmp/%e9",
            "file:///tmp/%a\u{e9}",
            "@file:///tmp/a%4",
        ] {
            assert_eq!(check(url).unwrap_err().message(), "URI malformed", "{url}");
        }
        assert_eq!(resolve_to_cwd("file:///tmp/%zz", "/w", None), "/tmp/%zz");
        assert_eq!(resolve_to_cwd("file:///tmp/%e9", "/w", None), "/tmp/%e9");
        assert!(check("file:///tmp/%C3%A9").is_ok() && check("a%zz").is_ok());
        assert_eq!(resolve_to_cwd("file:///tmp/%C3%A9", "/w", None), "/tmp/é");
    }

    #[test]
    fn relative_paths() {
        assert_eq!(relative("/w", "/w/a/b"), "a/b");
        assert_eq!(relative("/w/a", "/w/b"), "../b");
        assert_eq!(relative("/w", "/w"), "");
        assert_eq!(parent("/w/a"), "/w");
        assert_eq!(parent("/w"), "/");
        assert_eq!(base_name("/w/a.txt"), "a.txt");
    }
}
