//! Matching and applying edits (pi's `edit-diff.ts`): exact first, then fuzzy (NFKC, trailing whitespace,
//! quotes, dashes, spaces), the error texts, and writing back with the original line endings.

use toolwright_sdk::ToolError;
use unicode_normalization::UnicodeNormalization;

/// One requested replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// The text to find.
    pub old_text: String,
    /// Its replacement.
    pub new_text: String,
}

/// A replacement located in the content: byte offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    /// Where the replaced range starts.
    pub index: usize,
    /// Its length.
    pub length: usize,
    /// What replaces it.
    pub new_text: String,
}

/// CRLF and lone CR to LF.
pub fn normalize_to_lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// JavaScript's `trimEnd`: Unicode white space and the BOM.
fn trim_end_js(line: &str) -> &str {
    line.trim_end_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
}

/// pi's `normalizeForFuzzyMatch`.
pub fn normalize_for_fuzzy(text: &str) -> String {
    let nfkc: String = text.nfkc().collect();
    let trimmed: Vec<&str> = nfkc.split('\n').map(trim_end_js).collect();
    trimmed
        .join("\n")
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

struct Found {
    index: usize,
    length: usize,
    fuzzy: bool,
}

/// pi's `fuzzyFindText`.
fn fuzzy_find(content: &str, old_text: &str) -> Option<Found> {
    if let Some(index) = content.find(old_text) {
        return Some(Found {
            index,
            length: old_text.len(),
            fuzzy: false,
        });
    }
    let fuzzy_old = normalize_for_fuzzy(old_text);
    normalize_for_fuzzy(content).find(&fuzzy_old).map(|index| Found {
        index,
        length: fuzzy_old.len(),
        fuzzy: true,
    })
}

/// The outcome of applying edits to LF-normalised content.
#[derive(Debug)]
pub struct Applied {
    /// The LF-normalised content with the replacements applied.
    pub new_content: String,
    /// The replacements, in content order, against the LF-normalised original.
    pub replacements: Vec<Replacement>,
}

/// pi's `applyEditsToNormalizedContent`.
pub fn apply_edits(content: &str, edits: &[Edit], path: &str) -> Result<Applied, ToolError> {
    let edits: Vec<Edit> = edits
        .iter()
        .map(|e| Edit {
            old_text: normalize_to_lf(&e.old_text),
            new_text: normalize_to_lf(&e.new_text),
        })
        .collect();
    let single = edits.len() == 1;
    for (i, edit) in edits.iter().enumerate() {
        if edit.old_text.is_empty() {
            return Err(ToolError::new(if single {
                format!("oldText must not be empty in {path}.")
            } else {
                format!("edits[{i}].oldText must not be empty in {path}.")
            }));
        }
    }
    let fuzzy = edits
        .iter()
        .any(|e| fuzzy_find(content, &e.old_text).is_some_and(|f| f.fuzzy));
    let base = if fuzzy {
        normalize_for_fuzzy(content)
    } else {
        content.to_owned()
    };
    let fuzzy_base = normalize_for_fuzzy(&base);
    let mut matched: Vec<(usize, Replacement)> = Vec::with_capacity(edits.len());
    for (i, edit) in edits.iter().enumerate() {
        let Some(found) = fuzzy_find(&base, &edit.old_text) else {
            return Err(ToolError::new(if single {
                format!(
                    "Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
                )
            } else {
                format!(
                    "Could not find edits[{i}] in {path}. The oldText must match exactly including all whitespace and newlines."
                )
            }));
        };
        let occurrences = fuzzy_base
            .matches(normalize_for_fuzzy(&edit.old_text).as_str())
            .count();
        if occurrences > 1 {
            return Err(ToolError::new(if single {
                format!(
                    "Found {occurrences} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique."
                )
            } else {
                format!(
                    "Found {occurrences} occurrences of edits[{i}] in {path}. Each oldText must be unique. Please provide more context to make it unique."
                )
            }));
        }
        matched.push((
            i,
            Replacement {
                index: found.index,
                length: found.length,
                new_text: edit.new_text.clone(),
            },
        ));
    }
    matched.sort_by_key(|(_, r)| r.index);
    for pair in matched.windows(2) {
        let ((a, prev), (b, cur)) = (&pair[0], &pair[1]);
        if prev.index + prev.length > cur.index {
            return Err(ToolError::new(format!(
                "edits[{a}] and edits[{b}] overlap in {path}. Merge them into one edit or target disjoint regions."
            )));
        }
    }
    let matched: Vec<Replacement> = matched.into_iter().map(|(_, r)| r).collect();
    let replacements = if fuzzy {
        widen_to_lines(content, &base, &matched)?
    } else {
        matched
    };
    let new_content = apply(content, &replacements, 0);
    if new_content == content {
        return Err(ToolError::new(if single {
            format!(
                "No changes made to {path}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."
            )
        } else {
            format!("No changes made to {path}. The replacements produced identical content.")
        }));
    }
    Ok(Applied {
        new_content,
        replacements,
    })
}

/// `content` with sorted, disjoint replacements applied (offsets relative to `offset`).
fn apply(content: &str, replacements: &[Replacement], offset: usize) -> String {
    let mut result = content.to_owned();
    for r in replacements.iter().rev() {
        let at = r.index - offset;
        result.replace_range(at..at + r.length, &r.new_text);
    }
    result
}

/// Byte spans of lines, each with its `\n`.
fn line_spans(content: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    for (i, b) in content.bytes().enumerate() {
        if b == b'\n' {
            spans.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < content.len() {
        spans.push((start, content.len()));
    }
    spans
}

/// pi's `widenReplacementsToLines`: fuzzy replacements widened to the whole lines they touch, rewritten from the
/// normalised text; every other line keeps its original bytes.
fn widen_to_lines(
    original: &str,
    base: &str,
    replacements: &[Replacement],
) -> Result<Vec<Replacement>, ToolError> {
    let original_lines = line_spans(original);
    let base_lines = line_spans(base);
    if original_lines.len() != base_lines.len() {
        return Err(ToolError::new(
            "Cannot preserve unchanged lines because the base content has a different line count.",
        ));
    }
    let outside = || ToolError::new("Replacement range is outside the base content.");
    let mut groups: Vec<(usize, usize, Vec<Replacement>)> = Vec::new();
    for r in replacements {
        let start = base_lines
            .iter()
            .position(|&(s, e)| r.index >= s && r.index < e)
            .ok_or_else(outside)?;
        let mut end = start;
        while end < base_lines.len() && base_lines[end].1 < r.index + r.length {
            end += 1;
        }
        if end >= base_lines.len() {
            return Err(outside());
        }
        match groups.last_mut() {
            Some(group) if start < group.1 => {
                group.1 = group.1.max(end + 1);
                group.2.push(r.clone());
            }
            _ => groups.push((start, end + 1, vec![r.clone()])),
        }
    }
    Ok(groups
        .into_iter()
        .map(|(start, end, rs)| {
            let (from, to) = (base_lines[start].0, base_lines[end - 1].1);
            let original_start = original_lines[start].0;
            Replacement {
                index: original_start,
                length: original_lines[end - 1].1 - original_start,
                new_text: apply(&base[from..to], &rs, from),
            }
        })
        .collect())
}

/// pi's `applyReplacementsToOriginal`: replacements matched in the LF-normalised text applied to the original,
/// whose untouched bytes and line endings stay; new line breaks take the ending of the line they start on.
pub fn apply_to_original(original: &str, replacements: &[Replacement]) -> String {
    let crlfs: Vec<usize> = original.match_indices("\r\n").map(|(i, _)| i).collect();
    // Normalised offset -> original offset: one extra byte for every CRLF before it.
    let to_original = |offset: usize| -> usize {
        let mut before = 0;
        while before < crlfs.len() && crlfs[before] - before < offset {
            before += 1;
        }
        offset + before
    };
    let mut out = String::with_capacity(original.len());
    let mut ends_with_cr = false;
    let mut push = |part: &str, out: &mut String| {
        if part.is_empty() {
            return;
        }
        if ends_with_cr && part.starts_with('\n') {
            out.push('\n');
        }
        out.push_str(part);
        ends_with_cr = part.ends_with('\r');
    };
    let mut position = 0;
    for r in replacements {
        let start = to_original(r.index);
        push(&original[position..start], &mut out);
        let ending = line_ending_at(original, start);
        if ending == "\n" {
            push(&r.new_text, &mut out);
        } else {
            push(&r.new_text.replace('\n', ending), &mut out);
        }
        position = to_original(r.index + r.length);
    }
    push(&original[position..], &mut out);
    out
}

/// The line ending of the line containing `offset` (pi's `getLineEndingAt`).
fn line_ending_at(content: &str, offset: usize) -> &'static str {
    let line_feed = content[offset..]
        .find('\n')
        .map(|i| i + offset)
        .or_else(|| content[..offset.min(content.len())].rfind('\n'));
    match line_feed {
        None if content.contains('\r') => "\r",
        None => "\n",
        Some(i) if i > 0 && content.as_bytes()[i - 1] == b'\r' => "\r\n",
        Some(_) => "\n",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str) -> Edit {
        Edit {
            old_text: old.into(),
            new_text: new.into(),
        }
    }

    #[test]
    fn fuzzy_match_rewrites_only_touched_lines() {
        let content = "say “hi”   \nother “quote”\n";
        let applied = apply_edits(content, &[edit("say \"hi\"", "say 'yo'")], "f").unwrap();
        assert_eq!(applied.new_content, "say 'yo'\nother “quote”\n");
    }

    #[test]
    fn crlf_files_keep_crlf_everywhere() {
        let original = "a\r\nb\r\nc\r\n";
        let normalized = normalize_to_lf(original);
        let applied = apply_edits(&normalized, &[edit("b\n", "x\ny\n")], "f").unwrap();
        assert_eq!(
            apply_to_original(original, &applied.replacements),
            "a\r\nx\r\ny\r\nc\r\n"
        );
    }

    #[test]
    fn error_texts() {
        let e = |edits: &[Edit]| {
            apply_edits("aa\nb\n", edits, "f.txt")
                .unwrap_err()
                .message()
                .to_owned()
        };
        assert_eq!(
            e(&[edit("zz", "y")]),
            "Could not find the exact text in f.txt. The old text must match exactly including all whitespace and newlines."
        );
        assert_eq!(
            e(&[edit("a", "y")]),
            "Found 2 occurrences of the text in f.txt. The text must be unique. Please provide more context to make it unique."
        );
        assert_eq!(e(&[edit("", "y")]), "oldText must not be empty in f.txt.");
        assert_eq!(
            e(&[edit("aa\n", "x"), edit("a\nb", "y")]),
            "edits[0] and edits[1] overlap in f.txt. Merge them into one edit or target disjoint regions."
        );
        assert_eq!(
            e(&[edit("b", "b")]),
            "No changes made to f.txt. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."
        );
    }
}
