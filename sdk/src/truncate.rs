//! pi's output truncation (`core/tools/truncate.ts`): by lines and bytes, keeping the head or the tail.

use serde::Serialize;

/// Lines a tool shows at most by default.
pub const DEFAULT_MAX_LINES: usize = 2000;
/// Bytes a tool shows at most by default (50 KiB).
pub const DEFAULT_MAX_BYTES: usize = 50 * 1024;
/// Characters (UTF-16 code units) of one grep line.
pub const GREP_MAX_LINE_LENGTH: usize = 500;

/// What a truncation did (pi's `TruncationResult`, keys in pi's order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Truncation {
    /// The kept text.
    pub content: String,
    /// Whether anything was cut.
    pub truncated: bool,
    /// `"lines"` or `"bytes"`; `null` when nothing was cut.
    pub truncated_by: Option<&'static str>,
    /// Lines of the input.
    pub total_lines: usize,
    /// UTF-8 bytes of the input.
    pub total_bytes: usize,
    /// Lines kept.
    pub output_lines: usize,
    /// UTF-8 bytes kept.
    pub output_bytes: usize,
    /// The kept tail starts inside a line.
    pub last_line_partial: bool,
    /// The first line alone exceeds the byte limit (head truncation).
    pub first_line_exceeds_limit: bool,
    /// The line limit.
    pub max_lines: usize,
    /// The byte limit.
    pub max_bytes: usize,
}

/// Line splitting for counting: empty text has no lines; a final newline does not start a line.
fn lines_for_counting(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut lines: Vec<&str> = text.split('\n').collect();
    if text.ends_with('\n') {
        lines.pop();
    }
    lines
}

/// pi's `formatSize`: `999B`, `50.0KB`, `1.5MB`.
pub fn format_size(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        format!("{}KB", to_fixed_1(bytes as f64 / 1024.0))
    } else {
        format!("{}MB", to_fixed_1(bytes as f64 / (1024.0 * 1024.0)))
    }
}

/// JavaScript's `toFixed(1)` (round half away from zero on the decimal value as printed).
fn to_fixed_1(x: f64) -> String {
    let scaled = (x * 10.0).round() / 10.0;
    format!("{scaled:.1}")
}

fn untruncated(content: &str, total_lines: usize, max_lines: usize, max_bytes: usize) -> Truncation {
    Truncation {
        content: content.to_owned(),
        truncated: false,
        truncated_by: None,
        total_lines,
        total_bytes: content.len(),
        output_lines: total_lines,
        output_bytes: content.len(),
        last_line_partial: false,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    }
}

/// pi's `truncateHead`: keep whole lines from the start within both limits.
pub fn truncate_head(content: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let lines = lines_for_counting(content);
    let total_lines = lines.len();
    if total_lines <= max_lines && content.len() <= max_bytes {
        return untruncated(content, total_lines, max_lines, max_bytes);
    }
    let mut result = untruncated("", total_lines, max_lines, max_bytes);
    result.total_bytes = content.len();
    result.truncated = true;
    if lines.first().map_or(0, |l| l.len()) > max_bytes {
        result.truncated_by = Some("bytes");
        result.first_line_exceeds_limit = true;
        result.output_lines = 0;
        result.output_bytes = 0;
        return result;
    }
    let mut kept = 0;
    let mut bytes = 0;
    let mut by = "lines";
    for (i, line) in lines.iter().enumerate().take(max_lines) {
        let line_bytes = line.len() + usize::from(i > 0);
        if bytes + line_bytes > max_bytes {
            by = "bytes";
            break;
        }
        kept += 1;
        bytes += line_bytes;
    }
    if kept >= max_lines && bytes <= max_bytes {
        by = "lines";
    }
    result.content = lines[..kept].join("\n");
    result.truncated_by = Some(by);
    result.output_lines = kept;
    result.output_bytes = result.content.len();
    result
}

/// pi's `truncateTail`: keep whole lines from the end within both limits; a last line longer than the byte
/// limit keeps its last bytes.
pub fn truncate_tail(content: &str, max_lines: usize, max_bytes: usize) -> Truncation {
    let lines = lines_for_counting(content);
    let total_lines = lines.len();
    if total_lines <= max_lines && content.len() <= max_bytes {
        return untruncated(content, total_lines, max_lines, max_bytes);
    }
    let mut result = untruncated("", total_lines, max_lines, max_bytes);
    result.total_bytes = content.len();
    result.truncated = true;
    let mut kept: Vec<String> = Vec::new();
    let mut bytes = 0;
    let mut by = "lines";
    for line in lines.iter().rev() {
        if kept.len() >= max_lines {
            break;
        }
        let line_bytes = line.len() + usize::from(!kept.is_empty());
        if bytes + line_bytes > max_bytes {
            by = "bytes";
            if kept.is_empty() {
                let tail = tail_bytes(line, max_bytes);
                bytes = tail.len();
                kept.push(tail.to_owned());
                result.last_line_partial = true;
            }
            break;
        }
        kept.push((*line).to_owned());
        bytes += line_bytes;
    }
    if kept.len() >= max_lines && bytes <= max_bytes {
        by = "lines";
    }
    kept.reverse();
    result.content = kept.join("\n");
    result.truncated_by = Some(by);
    result.output_lines = kept.len();
    result.output_bytes = result.content.len();
    result
}

/// The last `max` bytes of `s`, advanced to a character boundary.
fn tail_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// pi's `truncateLine`: lines longer than `max_chars` UTF-16 code units are cut and marked.
/// Returns the text and whether it was cut.
pub fn truncate_line(line: &str, max_chars: usize) -> (String, bool) {
    // A surrogate pair that would be split is left out whole, as pi does.
    let kept = crate::js::utf16_prefix(line, max_chars);
    if kept.len() == line.len() {
        (line.to_owned(), false)
    } else {
        (format!("{kept}... [truncated]"), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(format_size(51200), "50.0KB");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(1536), "1.5KB");
        assert_eq!(format_size(3 * 1024 * 1024), "3.0MB");
    }

    #[test]
    fn head_by_lines_and_bytes() {
        let t = truncate_head("a\nb\nc\n", 2, 100);
        assert_eq!(
            (t.content.as_str(), t.truncated_by, t.total_lines, t.output_lines),
            ("a\nb", Some("lines"), 3, 2)
        );
        let t = truncate_head("aaaa\nbbbb\ncccc", 10, 9);
        assert_eq!(
            (t.content.as_str(), t.truncated_by, t.output_bytes),
            ("aaaa\nbbbb", Some("bytes"), 9)
        );
        let t = truncate_head("toolong\nx", 10, 3);
        assert!(t.first_line_exceeds_limit);
        assert_eq!(t.content, "");
        assert!(!truncate_head("", 1, 1).truncated);
    }

    #[test]
    fn tail_keeps_the_end() {
        let t = truncate_tail("a\nb\nc", 2, 100);
        assert_eq!(t.content, "b\nc");
        let t = truncate_tail("short\nabcdéf", 10, 4);
        assert_eq!((t.content.as_str(), t.last_line_partial), ("déf", true));
    }

    #[test]
    fn long_lines() {
        assert_eq!(
            truncate_line("abcdef", 3),
            ("abc... [truncated]".to_owned(), true)
        );
        assert_eq!(truncate_line("ab😀", 3), ("ab... [truncated]".to_owned(), true));
        assert_eq!(truncate_line("abc", 3), ("abc".to_owned(), false));
    }
}

/// The notices pi appends to a listing (`ls`, `find`, `grep`) as one `\n\n[a. b. c]`, and the details that go
/// with them. Push them in pi's order, then [`Notices::finish`] the result.
#[derive(Debug, Default)]
pub struct Notices {
    texts: Vec<String>,
    details: serde_json::Map<String, serde_json::Value>,
}

impl Notices {
    /// No notices yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A notice, and the detail that records it.
    pub fn push(&mut self, text: String, key: &str, detail: serde_json::Value) {
        self.texts.push(text);
        self.details.insert(key.into(), detail);
    }

    /// `LIMIT NOUN limit reached. Use limit=2×LIMIT for more[SUFFIX]`, recorded as `key: LIMIT`.
    pub fn limit(&mut self, limit: f64, noun: &str, suffix: &str, key: &str) {
        let text = format!(
            "{} {noun} limit reached. Use limit={} for more{suffix}",
            crate::js::number_to_string(limit),
            crate::js::number_to_string(limit * 2.0)
        );
        self.push(text, key, crate::js::number(limit));
    }

    /// The 50 KB notice when `truncation` cut the output, with the truncation in the details.
    pub fn bytes(&mut self, truncation: &Truncation) {
        if truncation.truncated {
            let detail = serde_json::to_value(truncation).unwrap_or_default();
            self.push(
                format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)),
                "truncation",
                detail,
            );
        }
    }

    /// The result: `text` with the notices, and the details when there are any.
    pub fn finish(self, mut text: String) -> crate::ToolResult {
        if !self.texts.is_empty() {
            text.push_str(&format!("\n\n[{}]", self.texts.join(". ")));
        }
        let mut result = crate::ToolResult::text(text);
        if !self.details.is_empty() {
            result.details = Some(serde_json::Value::Object(self.details));
        }
        result
    }
}
