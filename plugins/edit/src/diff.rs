//! pi's `generateEditDiff`: the display diff and unified patch of an edit, computed in windows of ±32 lines
//! around the replacements so time follows the size of the change, not of the file.

use serde_json::{Value, json};

use crate::apply::Replacement;
use crate::jsdiff::{Hunk, Part, diff_lines, format_patch, structured_patch};

const MARGIN_LINES: usize = 32;
const CONTEXT_LINES: usize = 4;

fn count_line_feeds(text: &str) -> usize {
    text.bytes().filter(|b| *b == b'\n').count()
}

/// `{diff, patch, firstChangedLine}` for an edit of `base` into `new`.
pub fn edit_details(path: &str, base: &str, new: &str, replacements: &[Replacement]) -> Value {
    let width = (count_line_feeds(base) + 1)
        .max(count_line_feeds(new) + 1)
        .to_string()
        .len();
    let skip = format!(" {} ...", " ".repeat(width));
    let mut output: Vec<String> = Vec::new();
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut first_changed: Option<usize> = None;
    for w in windows(base, replacements) {
        let (old_text, new_text) = (&base[w.old_start..w.old_end], &new[w.new_start..w.new_end]);
        let (mut shown, first) = display_diff(
            &diff_lines(old_text, new_text),
            w.old_line + 1,
            w.new_line + 1,
            width,
        );
        first_changed = first_changed.or(first);
        if output.last() == Some(&skip) && shown.first() == Some(&skip) {
            shown.remove(0);
        }
        output.extend(shown);
        for mut hunk in structured_patch(old_text, new_text, CONTEXT_LINES) {
            hunk.old_start += w.old_line;
            hunk.new_start += w.new_line;
            hunks.push(hunk);
        }
    }
    let mut details = serde_json::Map::new();
    details.insert("diff".into(), json!(output.join("\n")));
    details.insert("patch".into(), json!(format_patch(path, &hunks)));
    if let Some(line) = first_changed {
        details.insert("firstChangedLine".into(), json!(line));
    }
    Value::Object(details)
}

struct Window {
    old_start: usize,
    old_end: usize,
    old_line: usize,
    new_start: usize,
    new_end: usize,
    new_line: usize,
}

fn line_start_before(text: &str, offset: usize) -> usize {
    if offset == 0 {
        0
    } else {
        text[..offset].rfind('\n').map_or(0, |i| i + 1)
    }
}

/// Whole-line windows with margin around the (sorted, disjoint) replacements; overlapping windows merge.
fn windows(base: &str, replacements: &[Replacement]) -> Vec<Window> {
    let mut windows: Vec<Window> = Vec::new();
    let (mut offset_delta, mut line_delta) = (0isize, 0isize);
    let (mut cursor_offset, mut cursor_line) = (0usize, 0usize);
    for r in replacements {
        let match_end = r.index + r.length;
        let mut start = line_start_before(base, r.index);
        for _ in 0..MARGIN_LINES {
            if start == 0 {
                break;
            }
            start = line_start_before(base, start - 1);
        }
        let mut end = match_end;
        for i in 0..=MARGIN_LINES {
            if end >= base.len() {
                break;
            }
            let from = if i == 0 {
                match_end.saturating_sub(1).max(r.index)
            } else {
                end
            };
            end = base[from..].find('\n').map_or(base.len(), |j| from + j + 1);
        }
        let replacement_offset_delta = r.new_text.len() as isize - r.length as isize;
        let replacement_line_delta =
            count_line_feeds(&r.new_text) as isize - count_line_feeds(&base[r.index..match_end]) as isize;
        match windows.last_mut() {
            Some(previous) if start <= previous.old_end => {
                previous.old_end = previous.old_end.max(end);
                previous.new_end =
                    (previous.old_end as isize + offset_delta + replacement_offset_delta) as usize;
            }
            _ => {
                cursor_line += count_line_feeds(&base[cursor_offset..start]);
                cursor_offset = start;
                windows.push(Window {
                    old_start: start,
                    old_end: end,
                    old_line: cursor_line,
                    new_start: (start as isize + offset_delta) as usize,
                    new_end: (end as isize + offset_delta + replacement_offset_delta) as usize,
                    new_line: (cursor_line as isize + line_delta) as usize,
                });
            }
        }
        offset_delta += replacement_offset_delta;
        line_delta += replacement_line_delta;
    }
    windows
}

/// pi's `formatDisplayDiff`: numbered `+`/`-`/context lines with at most 4 context lines around changes.
fn display_diff(
    parts: &[Part],
    old_start: usize,
    new_start: usize,
    width: usize,
) -> (Vec<String>, Option<usize>) {
    let mut out = Vec::new();
    let (mut old_line, mut new_line) = (old_start, new_start);
    let mut last_was_change = false;
    let mut first_changed = None;
    let numbered = |sign: char, n: usize, line: &str| format!("{sign}{n:>width$} {line}");
    let skip = format!(" {} ...", " ".repeat(width));
    for (i, part) in parts.iter().enumerate() {
        let mut raw: Vec<&str> = part.value.split('\n').collect();
        if raw.last() == Some(&"") {
            raw.pop();
        }
        if part.added || part.removed {
            first_changed.get_or_insert(new_line);
            for line in raw {
                if part.added {
                    out.push(numbered('+', new_line, line));
                    new_line += 1;
                } else {
                    out.push(numbered('-', old_line, line));
                    old_line += 1;
                }
            }
            last_was_change = true;
            continue;
        }
        let next_is_change = parts.get(i + 1).is_some_and(|p| p.added || p.removed);
        let context = |lines: &[&str], out: &mut Vec<String>, old_line: &mut usize, new_line: &mut usize| {
            for line in lines {
                out.push(numbered(' ', *old_line, line));
                *old_line += 1;
                *new_line += 1;
            }
        };
        match (last_was_change, next_is_change) {
            (true, true) if raw.len() <= CONTEXT_LINES * 2 => {
                context(&raw, &mut out, &mut old_line, &mut new_line)
            }
            (true, true) => {
                let skipped = raw.len() - 2 * CONTEXT_LINES;
                context(&raw[..CONTEXT_LINES], &mut out, &mut old_line, &mut new_line);
                out.push(skip.clone());
                old_line += skipped;
                new_line += skipped;
                context(
                    &raw[raw.len() - CONTEXT_LINES..],
                    &mut out,
                    &mut old_line,
                    &mut new_line,
                );
            }
            (true, false) => {
                let shown = raw.len().min(CONTEXT_LINES);
                context(&raw[..shown], &mut out, &mut old_line, &mut new_line);
                let skipped = raw.len() - shown;
                if skipped > 0 {
                    out.push(skip.clone());
                    old_line += skipped;
                    new_line += skipped;
                }
            }
            (false, true) => {
                let skipped = raw.len().saturating_sub(CONTEXT_LINES);
                if skipped > 0 {
                    out.push(skip.clone());
                    old_line += skipped;
                    new_line += skipped;
                }
                context(&raw[skipped..], &mut out, &mut old_line, &mut new_line);
            }
            (false, false) => {
                old_line += raw.len();
                new_line += raw.len();
            }
        }
        last_was_change = false;
    }
    (out, first_changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_diff_and_patch() {
        let base = "a\nb\nc\n";
        let r = Replacement {
            index: 2,
            length: 1,
            new_text: "B".into(),
        };
        let details = edit_details("f.txt", base, "a\nB\nc\n", &[r]);
        assert_eq!(details["diff"], " 1 a\n-2 b\n+2 B\n 3 c");
        assert_eq!(
            details["patch"],
            "--- f.txt\n+++ f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
        assert_eq!(details["firstChangedLine"], 2);
    }
}
