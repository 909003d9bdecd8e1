//! Text a plugin, a client or a model chose, made safe to show people: [`escape`] writes every character a
//! terminal would act on (line breaks, `ESC` and the rest of C0 and C1, `DEL`) and every character that reorders
//! or hides what is shown (bidi overrides and isolates, zero-width marks) as an escape (`\n`, `\r`, `\t`,
//! `\u{1b}`), so that a name cannot print a line of its own, move the cursor, recolour or retitle the terminal,
//! and nothing it holds is lost. Backslashes stay as they are: an escape can look like text, but never act.
//!
//! ```
//! use toolwright_core::text::escape;
//! assert_eq!(escape("plain name"), "plain name");
//! assert_eq!(escape("c1\n2026-12-01  fake"), "c1\\n2026-12-01  fake");
//! assert_eq!(escape("\u{1b}[2Kread"), "\\u{1b}[2Kread");
//! assert_eq!(escape("abc\u{202e}txt.exe"), "abc\\u{202e}txt.exe");
//! ```

use std::borrow::Cow;

/// Whether `c` is written as an escape by [`escape`].
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Bidi embeddings, overrides and isolates, and the marks: they reorder what follows on the line.
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            // Zero-width characters and the byte-order mark: invisible, so two names that differ look alike.
            | '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}'
            // Line and paragraph separators: line breaks to some terminals and viewers.
            | '\u{2028}' | '\u{2029}'
        )
}

/// `text` with every character of [`needs_escape`] written as an escape; borrowed when there is none.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_control_is_escaped_and_nothing_is_lost() {
        assert!(matches!(escape("read files below ./docs"), Cow::Borrowed(_)));
        assert_eq!(escape("a\r\n\tb"), "a\\r\\n\\tb");
        assert_eq!(escape("\u{0}\u{7}\u{7f}"), "\\u{0}\\u{7}\\u{7f}");
        // C1, including the single-character CSI and OSC.
        assert_eq!(escape("\u{9b}2K\u{9d}0;x"), "\\u{9b}2K\\u{9d}0;x");
        // An OSC title sequence ended by BEL.
        assert_eq!(escape("\u{1b}]0;owned\u{7}"), "\\u{1b}]0;owned\\u{7}");
        assert_eq!(
            escape("\u{2067}x\u{2069}\u{200b}\u{feff}\u{2028}"),
            "\\u{2067}x\\u{2069}\\u{200b}\\u{feff}\\u{2028}"
        );
        // What people write is left as it is.
        assert_eq!(
            escape("grüße, 日本語, C:\\dir, a\\nb"),
            "grüße, 日本語, C:\\dir, a\\nb"
        );
        let hostile = "x\u{1b}[2K\n";
        assert!(!escape(hostile).chars().any(needs_escape));
    }
}
