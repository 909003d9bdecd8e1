//! jsdiff 8's line diff (`diffLines`, `structuredPatch`, `formatPatch`), the algorithm pi's edit tool uses for
//! `details.diff` and `details.patch`. Ported for its exact tie-breaking: two Myers implementations can align
//! the same change differently, and the patch text would then differ from pi's.

/// A run of lines: unchanged, added or removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The lines, each with its `\n` (the last may lack it).
    pub value: String,
    /// Only in the new text.
    pub added: bool,
    /// Only in the old text.
    pub removed: bool,
}

/// jsdiff's `tokenize` for lines: each line keeps its line break.
fn tokenize(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            lines.push(&text[start..=i]);
            start = i + 1;
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

#[derive(Clone, Copy)]
struct Component {
    count: usize,
    added: bool,
    removed: bool,
    previous: Option<usize>,
}

#[derive(Clone, Copy)]
struct Path {
    old_pos: isize,
    last: Option<usize>,
}

/// jsdiff's `diffLines(old, new)`.
pub fn diff_lines(old: &str, new: &str) -> Vec<Part> {
    let (o, n) = (tokenize(old), tokenize(new));
    let (old_len, new_len) = (o.len() as isize, n.len() as isize);
    let mut arena: Vec<Component> = Vec::new();

    let extract_common = |arena: &mut Vec<Component>, path: &mut Path, diagonal: isize| -> isize {
        let mut old_pos = path.old_pos;
        let mut new_pos = old_pos - diagonal;
        let mut common = 0;
        while new_pos + 1 < new_len
            && old_pos + 1 < old_len
            && o[(old_pos + 1) as usize] == n[(new_pos + 1) as usize]
        {
            new_pos += 1;
            old_pos += 1;
            common += 1;
        }
        if common > 0 {
            arena.push(Component {
                count: common,
                added: false,
                removed: false,
                previous: path.last,
            });
            path.last = Some(arena.len() - 1);
        }
        path.old_pos = old_pos;
        new_pos
    };
    let add_to_path =
        |arena: &mut Vec<Component>, path: Path, added: bool, removed: bool, inc: isize| -> Path {
            let component = match path.last.map(|i| arena[i]) {
                Some(last) if last.added == added && last.removed == removed => Component {
                    count: last.count + 1,
                    added,
                    removed,
                    previous: last.previous,
                },
                _ => Component {
                    count: 1,
                    added,
                    removed,
                    previous: path.last,
                },
            };
            arena.push(component);
            Path {
                old_pos: path.old_pos + inc,
                last: Some(arena.len() - 1),
            }
        };

    let max_edit = (old_len + new_len) as usize;
    // bestPath is indexed by diagonal, which ranges over [-maxEdit, maxEdit].
    let offset = max_edit as isize + 1;
    let mut best: Vec<Option<Path>> = vec![None; 2 * max_edit + 3];
    let mut first = Path {
        old_pos: -1,
        last: None,
    };
    let new_pos = extract_common(&mut arena, &mut first, 0);
    if first.old_pos + 1 >= old_len && new_pos + 1 >= new_len {
        return build(&arena, first.last, &n, &o);
    }
    best[offset as usize] = Some(first);
    let (mut min_diag, mut max_diag) = (isize::MIN, isize::MAX);
    for edit_length in 1..=max_edit as isize {
        let mut diagonal = min_diag.max(-edit_length);
        while diagonal <= max_diag.min(edit_length) {
            let at = |d: isize| (d + offset) as usize;
            let remove_path = best[at(diagonal - 1)];
            let add_path = best[at(diagonal + 1)];
            if remove_path.is_some() {
                best[at(diagonal - 1)] = None;
            }
            let can_add = add_path.is_some_and(|p| {
                let pos = p.old_pos - diagonal;
                0 <= pos && pos < new_len
            });
            let can_remove = remove_path.is_some_and(|p| p.old_pos + 1 < old_len);
            if !can_add && !can_remove {
                best[at(diagonal)] = None;
                diagonal += 2;
                continue;
            }
            let use_add = match (remove_path, add_path) {
                (Some(r), Some(a)) => !can_remove || (can_add && r.old_pos < a.old_pos),
                (None, _) => true,
                (Some(_), None) => false,
            };
            let mut base = match (use_add, add_path, remove_path) {
                (true, Some(a), _) => add_to_path(&mut arena, a, true, false, 0),
                (false, _, Some(r)) => add_to_path(&mut arena, r, false, true, 1),
                _ => {
                    diagonal += 2;
                    continue;
                }
            };
            let new_pos = extract_common(&mut arena, &mut base, diagonal);
            if base.old_pos + 1 >= old_len && new_pos + 1 >= new_len {
                return build(&arena, base.last, &n, &o);
            }
            best[at(diagonal)] = Some(base);
            if base.old_pos + 1 >= old_len {
                max_diag = max_diag.min(diagonal - 1);
            }
            if new_pos + 1 >= new_len {
                min_diag = min_diag.max(diagonal + 1);
            }
            diagonal += 2;
        }
    }
    // Unreachable: an edit script of length old + new always exists.
    vec![
        Part {
            value: old.to_owned(),
            added: false,
            removed: true,
        },
        Part {
            value: new.to_owned(),
            added: true,
            removed: false,
        },
    ]
}

fn build(arena: &[Component], last: Option<usize>, new: &[&str], old: &[&str]) -> Vec<Part> {
    let mut chain = Vec::new();
    let mut at = last;
    while let Some(i) = at {
        chain.push(arena[i]);
        at = arena[i].previous;
    }
    chain.reverse();
    let (mut new_pos, mut old_pos) = (0, 0);
    chain
        .into_iter()
        .map(|c| {
            let value = if c.removed {
                let v = old[old_pos..old_pos + c.count].concat();
                old_pos += c.count;
                v
            } else {
                let v = new[new_pos..new_pos + c.count].concat();
                new_pos += c.count;
                if !c.added {
                    old_pos += c.count;
                }
                v
            };
            Part {
                value,
                added: c.added,
                removed: c.removed,
            }
        })
        .collect()
}

/// A hunk of a unified patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// First old line (1-based).
    pub old_start: usize,
    /// Old lines covered.
    pub old_lines: usize,
    /// First new line (1-based).
    pub new_start: usize,
    /// New lines covered.
    pub new_lines: usize,
    /// ` `, `-` or `+` prefixed lines, and `\ No newline at end of file` markers.
    pub lines: Vec<String>,
}

/// jsdiff's `splitLines`: lines with their `\n` (no lines for the empty end marker).
fn split_lines(text: &str) -> Vec<String> {
    tokenize(text).into_iter().map(str::to_owned).collect()
}

/// jsdiff's `structuredPatch(...).hunks` with `context` lines.
pub fn structured_patch(old: &str, new: &str, context: usize) -> Vec<Hunk> {
    let mut diff = diff_lines(old, new);
    diff.push(Part {
        value: String::new(),
        added: false,
        removed: false,
    });
    let lines_of: Vec<Vec<String>> = diff.iter().map(|p| split_lines(&p.value)).collect();
    let mut hunks = Vec::new();
    let (mut old_range_start, mut new_range_start) = (0usize, 0usize);
    let mut cur: Vec<String> = Vec::new();
    let (mut old_line, mut new_line) = (1usize, 1usize);
    for (i, part) in diff.iter().enumerate() {
        let lines = &lines_of[i];
        if part.added || part.removed {
            if old_range_start == 0 {
                old_range_start = old_line;
                new_range_start = new_line;
                if i > 0 {
                    let prev = &lines_of[i - 1];
                    let take = prev.len().min(context);
                    cur = prev[prev.len() - take..]
                        .iter()
                        .map(|l| format!(" {l}"))
                        .collect();
                    old_range_start -= cur.len();
                    new_range_start -= cur.len();
                }
            }
            let sign = if part.added { '+' } else { '-' };
            cur.extend(lines.iter().map(|l| format!("{sign}{l}")));
            if part.added {
                new_line += lines.len();
            } else {
                old_line += lines.len();
            }
        } else {
            if old_range_start != 0 {
                if lines.len() <= context * 2 && i + 2 < diff.len() {
                    cur.extend(lines.iter().map(|l| format!(" {l}")));
                } else {
                    let size = lines.len().min(context);
                    cur.extend(lines[..size].iter().map(|l| format!(" {l}")));
                    hunks.push(Hunk {
                        old_start: old_range_start,
                        old_lines: old_line - old_range_start + size,
                        new_start: new_range_start,
                        new_lines: new_line - new_range_start + size,
                        lines: std::mem::take(&mut cur),
                    });
                    old_range_start = 0;
                    new_range_start = 0;
                }
            }
            old_line += lines.len();
            new_line += lines.len();
        }
    }
    for hunk in &mut hunks {
        let mut out = Vec::with_capacity(hunk.lines.len());
        for line in hunk.lines.drain(..) {
            match line.strip_suffix('\n') {
                Some(l) => out.push(l.to_owned()),
                None => {
                    out.push(line);
                    out.push("\\ No newline at end of file".to_owned());
                }
            }
        }
        hunk.lines = out;
    }
    hunks
}

/// jsdiff's `formatPatch` with file headers only.
pub fn format_patch(path: &str, hunks: &[Hunk]) -> String {
    let mut out = vec![format!("--- {path}"), format!("+++ {path}")];
    for h in hunks {
        let old_start = if h.old_lines == 0 {
            h.old_start - 1
        } else {
            h.old_start
        };
        let new_start = if h.new_lines == 0 {
            h.new_start - 1
        } else {
            h.new_start
        };
        out.push(format!(
            "@@ -{old_start},{} +{new_start},{} @@",
            h.old_lines, h.new_lines
        ));
        out.extend(h.lines.iter().cloned());
    }
    out.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_replacement() {
        let parts = diff_lines("a\nb\nc\n", "a\nB\nc\n");
        let shape: Vec<_> = parts
            .iter()
            .map(|p| (p.value.as_str(), p.added, p.removed))
            .collect();
        assert_eq!(
            shape,
            [
                ("a\n", false, false),
                ("b\n", false, true),
                ("B\n", true, false),
                ("c\n", false, false)
            ]
        );
    }

    #[test]
    fn patch_text() {
        let hunks = structured_patch("a\nb\nc", "a\nB\nc", 4);
        assert_eq!(
            format_patch("f.txt", &hunks),
            "--- f.txt\n+++ f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n\\ No newline at end of file\n"
        );
    }
}
