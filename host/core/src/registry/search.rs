//! Tool search (pi 1.6.0's `extensions/tool-search`): a BM25 ranker over tool metadata and the `tool_search` tool,
//! which activates the `codemode` and `deferred` tools that match a query.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};
use toolwright_sdk::uri::resolve_ref;
use toolwright_sdk::{Exposure, ToolNamespace};

use super::WeakRegistry;
use crate::definition::{ToolContext, ToolDefinition, ToolSource};
use crate::tool::{ToolError, ToolExecution};
use crate::types::ToolResult;

/// The tool's name (`TOOL_SEARCH_TOOL_NAME`).
pub const TOOL_SEARCH_TOOL_NAME: &str = "tool_search";
/// How many tools a search loads when the call gives no limit.
pub const DEFAULT_TOOL_SEARCH_LIMIT: usize = 8;
/// The tool's description (`TOOL_SEARCH_DESCRIPTION`): constant, so it stays the same while tools come and go.
pub const TOOL_SEARCH_DESCRIPTION: &str = "# Tool discovery\n\nSearches over deferred tool metadata with BM25 and exposes matching tools for the next model call.\n\nSome of the tools, such as tools of MCP servers, may not have been provided to you upfront, and you should use this tool (`tool_search`) to search for the required tools. For MCP tool discovery, always use `tool_search`.";

const STOP_WORDS: [&str; 21] = [
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on", "or",
    "that", "the", "this", "to", "with",
];

/// Naive singular form, so `issues` matches `issue` and `searches` matches `search`.
fn stem(term: &str) -> String {
    let n = term.len();
    if n > 4 && term.ends_with("ies") {
        return format!("{}y", &term[..n - 3]);
    }
    if n > 4
        && ["ches", "shes", "sses", "xes", "zes"]
            .iter()
            .any(|s| term.ends_with(s))
    {
        return term[..n - 2].to_owned();
    }
    if n > 3 && term.ends_with('s') && !term.ends_with("ss") {
        return term[..n - 1].to_owned();
    }
    term.to_owned()
}

/// pi's `tokenize`: NFC, camelCase split, lower case, runs of non-letters/marks/numbers as spaces, words (ICU word
/// segmentation for text that is not plain ASCII), no stop words, naive singular forms of ASCII words.
pub fn tokenize(text: &str) -> Vec<String> {
    static CAMEL: LazyLock<Regex> = LazyLock::new(|| Regex::new("([a-z0-9])([A-Z])").expect("valid"));
    static ACRONYM: LazyLock<Regex> = LazyLock::new(|| Regex::new("([A-Z]+)([A-Z][a-z])").expect("valid"));
    static SEPARATORS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[^\p{L}\p{M}\p{N}]+").expect("valid"));
    let nfc = nfc(text);
    let split = CAMEL.replace_all(&nfc, "$1 $2");
    let split = ACRONYM.replace_all(&split, "$1 $2");
    let lower = split.to_lowercase();
    let normalized = SEPARATORS.replace_all(&lower, " ");
    let plain = normalized
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b' ');
    let words: Vec<&str> = if plain {
        normalized.split(' ').collect()
    } else {
        segment_words(&normalized)
    };
    words
        .into_iter()
        .filter(|w| !w.is_empty() && !STOP_WORDS.contains(w))
        .map(|w| {
            if w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
                stem(w)
            } else {
                w.to_owned()
            }
        })
        .collect()
}

/// `text` in Unicode normalization form C.
#[cfg(feature = "icu-search")]
fn nfc(text: &str) -> std::borrow::Cow<'_, str> {
    icu_normalizer::ComposingNormalizerBorrowed::new_nfc().normalize(text)
}

/// `text` in Unicode normalization form C.
#[cfg(not(feature = "icu-search"))]
fn nfc(text: &str) -> std::borrow::Cow<'_, str> {
    use unicode_normalization::UnicodeNormalization;
    std::borrow::Cow::Owned(text.nfc().collect())
}

/// Without ICU: the runs of letters, marks and numbers of `text` (which has only spaces between them by now).
/// The same words as ICU's for text with spaces; a run of Chinese or Thai stays one word.
#[cfg(not(feature = "icu-search"))]
fn segment_words(text: &str) -> Vec<&str> {
    text.split(' ').collect()
}

/// The word-like segments of `text`, as `Intl.Segmenter` with word granularity finds them.
#[cfg(feature = "icu-search")]
fn segment_words(text: &str) -> Vec<&str> {
    use icu_segmenter::WordSegmenter;
    use icu_segmenter::options::WordBreakInvariantOptions;
    static SEGMENTER: LazyLock<icu_segmenter::WordSegmenterBorrowed<'static>> =
        LazyLock::new(|| WordSegmenter::new_dictionary(WordBreakInvariantOptions::default()));
    let mut words = Vec::new();
    let mut start = 0;
    for (end, kind) in SEGMENTER.segment_str(text).iter_with_word_type() {
        if end > start && kind.is_word_like() {
            words.push(&text[start..end]);
        }
        start = end;
    }
    words
}

/// What the ranker reads of one tool (pi's `createToolSearchDocument`).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchDocument {
    /// The tool's name.
    pub name: String,
    /// The description, then every schema description and property name.
    pub text: String,
    /// The namespace's name, description and instructions.
    pub namespace_text: String,
}

impl SearchDocument {
    /// The document of a tool.
    pub fn new(name: &str, description: &str, parameters: &Value, namespace: Option<&ToolNamespace>) -> Self {
        let mut parts = vec![description.to_owned()];
        let mut seen: Vec<*const Value> = vec![parameters as *const Value];
        schema_text(parameters, parameters, &mut parts, &mut seen);
        let namespace_text = namespace.map_or_else(String::new, |n| {
            [
                n.name.as_str(),
                n.description.as_deref().unwrap_or(""),
                n.instructions.as_deref().unwrap_or(""),
            ]
            .join(" ")
        });
        SearchDocument {
            name: name.to_owned(),
            text: parts
                .into_iter()
                .filter(|p| !p.trim().is_empty())
                .collect::<Vec<_>>()
                .join(" "),
            namespace_text,
        }
    }
}

/// Schema descriptions and property names, recursively, following local `$ref`s once.
fn schema_text<'a>(
    schema: &'a Value,
    root: &'a Value,
    parts: &mut Vec<String>,
    seen: &mut Vec<*const Value>,
) {
    let Some(object) = schema.as_object() else {
        return;
    };
    if let Some(target) = object
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve_ref(r, root))
        && target.is_object()
        && !seen.contains(&(target as *const Value))
    {
        seen.push(target as *const Value);
        schema_text(target, root, parts, seen);
    }
    if let Some(description) = object.get("description").and_then(Value::as_str) {
        parts.push(description.to_owned());
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            parts.push(name.clone());
            schema_text(property, root, parts, seen);
        }
    }
    if let Some(items) = object.get("items") {
        schema_text(items, root, parts, seen);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(variants) = object.get(key).and_then(Value::as_array) {
            for variant in variants {
                schema_text(variant, root, parts, seen);
            }
        }
    }
}

struct Indexed {
    name: String,
    name_terms: Vec<String>,
    local_name_terms: Vec<String>,
    text_counts: Vec<(String, usize)>,
    text_length: usize,
    namespace_terms: Vec<String>,
}

fn index(document: &SearchDocument) -> Indexed {
    let mut text_counts: Vec<(String, usize)> = Vec::new();
    for term in tokenize(&document.text) {
        match text_counts.iter_mut().find(|(t, _)| *t == term) {
            Some((_, n)) => *n += 1,
            None => text_counts.push((term, 1)),
        }
    }
    let local = document.name.rsplit("__").next().unwrap_or("");
    Indexed {
        name: document.name.clone(),
        name_terms: tokenize(&document.name),
        local_name_terms: dedupe(tokenize(local)),
        text_length: text_counts.iter().map(|(_, n)| n).sum(),
        text_counts,
        namespace_terms: tokenize(&document.namespace_text),
    }
}

/// The words in first-seen order, each once (in linear time: a query may be long).
fn dedupe(words: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    words.into_iter().filter(|w| seen.insert(w.clone())).collect()
}

/// pi's `normalizeName`: lower case, characters invalid in script identifiers as `_`.
fn normalize_name(name: &str) -> String {
    name.trim()
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A match of [`rank`]: the tool's name and its score.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// The tool's name.
    pub name: String,
    /// Its BM25 score with the name, namespace and full-name bonuses.
    pub score: f64,
}

/// pi's `Bm25Ranker.rank` (`k1 = 1.2`, `b = 0.75`): exact-name matches first, then more query terms covered, then
/// higher scores; ties keep document order.
pub fn rank(query: &str, documents: &[SearchDocument], limit: usize) -> Vec<Ranked> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    const NAME_WEIGHT: f64 = 3.0;
    const NAMESPACE_WEIGHT: f64 = 0.5;
    let terms = dedupe(tokenize(query));
    if terms.is_empty() || documents.is_empty() || limit == 0 {
        return Vec::new();
    }
    let indexed: Vec<Indexed> = documents.iter().map(index).collect();
    let total: usize = indexed.iter().map(|d| d.text_length).sum();
    let average = match total as f64 / indexed.len() as f64 {
        a if a == 0.0 || a.is_nan() => 1.0,
        a => a,
    };
    let count = |d: &Indexed, term: &str| {
        d.text_counts
            .iter()
            .find(|(t, _)| t == term)
            .map_or(0, |(_, n)| *n)
    };
    let idf: Vec<f64> = terms
        .iter()
        .map(|term| {
            let frequency = indexed
                .iter()
                .filter(|d| {
                    d.name_terms.contains(term) || count(d, term) > 0 || d.namespace_terms.contains(term)
                })
                .count() as f64;
            (1.0 + (indexed.len() as f64 - frequency + 0.5) / (frequency + 0.5)).ln()
        })
        .collect();
    let full_name_bonus: f64 = idf.iter().sum();
    let exact_query = normalize_name(query);
    let mut matches = Vec::new();
    for document in &indexed {
        let norm = K1 * (1.0 - B + (B * document.text_length as f64) / average);
        let (mut score, mut covered) = (0.0, 0);
        for (term, idf) in terms.iter().zip(&idf) {
            let n = count(document, term) as f64;
            let weight = (if document.name_terms.contains(term) {
                NAME_WEIGHT
            } else {
                0.0
            }) + (if document.namespace_terms.contains(term) {
                NAMESPACE_WEIGHT
            } else {
                0.0
            }) + (n * (K1 + 1.0)) / (n + norm);
            if weight > 0.0 {
                covered += 1;
            }
            score += idf * weight;
        }
        if score == 0.0 {
            continue;
        }
        let local = &document.local_name_terms;
        if !local.is_empty() && local.iter().all(|t| terms.contains(t)) {
            score += full_name_bonus;
        }
        let normalized = normalize_name(&document.name);
        let exact = normalized == exact_query || normalized.ends_with(&format!("__{exact_query}"));
        matches.push((
            exact,
            covered,
            Ranked {
                name: document.name.clone(),
                score,
            },
        ));
    }
    matches.sort_by(|a, b| {
        b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(
            b.2.score
                .partial_cmp(&a.2.score)
                .unwrap_or(std::cmp::Ordering::Equal),
        )
    });
    matches.into_iter().take(limit).map(|(_, _, r)| r).collect()
}

/// The `tool_search` tool of `registry`, as pi registers it (`model-only`, inactive until named).
pub fn tool_search_definition(registry: WeakRegistry) -> ToolDefinition {
    let execute = move |run: ToolExecution, _ctx: Option<ToolContext>| {
        let registry = registry.clone();
        async move {
            let query = run
                .params
                .get("query")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if query
                .trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}')
                .is_empty()
            {
                return Err(ToolError::new("query must not be empty"));
            }
            let limit = match run.params.get("limit") {
                None | Some(Value::Null) => DEFAULT_TOOL_SEARCH_LIMIT as f64,
                Some(v) => v.as_f64().unwrap_or(f64::NAN),
            };
            if !(limit.is_finite() && limit.fract() == 0.0 && limit > 0.0) {
                return Err(ToolError::new("limit must be a positive integer"));
            }
            let loaded = match registry.upgrade() {
                Some(registry) => {
                    registry.update(|r| r.search_and_load(query, limit.min(usize::MAX as f64) as usize))
                }
                None => Vec::new(),
            };
            let text = if loaded.is_empty() {
                "No matching tools found.".to_owned()
            } else {
                let lines: Vec<String> = loaded
                    .iter()
                    .map(|(name, description)| {
                        let first = description.trim().split('\n').next().unwrap_or("");
                        format!("- {name}: {}", first.strip_suffix('\r').unwrap_or(first))
                    })
                    .collect();
                format!(
                    "Loaded {} tool{}. They are available from your next call:\n{}",
                    loaded.len(),
                    if loaded.len() == 1 { "" } else { "s" },
                    lines.join("\n")
                )
            };
            let names: Vec<&String> = loaded.iter().map(|(n, _)| n).collect();
            Ok(ToolResult::text(text).with_details(json!({ "loaded": names })))
        }
    };
    let mut definition = ToolDefinition::new(
        TOOL_SEARCH_TOOL_NAME,
        TOOL_SEARCH_DESCRIPTION,
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Search query for deferred tools."},
                "limit": {"type": "number", "description": format!("Maximum number of tools to return. Defaults to {DEFAULT_TOOL_SEARCH_LIMIT}.")}
            },
            "required": ["query"]
        }),
        execute,
    );
    definition.prompt_snippet = Some("Search for tools that are not loaded yet and load the matches".into());
    definition.exposure = Exposure::ModelOnly;
    definition.default_active = Some(false);
    definition.reaches_tools = Some(std::sync::Arc::new(|_: &Value| {
        crate::definition::ReachedTools::All
    }));
    definition.source = ToolSource::Builtin;
    // MCP hints: it reads tool metadata and changes only which tools the session declares (the same query loads
    // the same tools); nothing outside the session.
    definition.annotations = Some(toolwright_sdk::ToolAnnotations::hints(true, false, true, false));
    definition
}

/// Whether `tool_search` can load a tool of this exposure.
pub(super) fn is_searchable(exposure: Exposure) -> bool {
    matches!(exposure, Exposure::Codemode | Exposure::Deferred)
}

#[cfg(test)]
mod tests;
