//! Normalisation of events before golden comparison: what differs between runs is masked, presence kept.

use serde_json::Value;

/// Mask `durationMs` and `timestamp` values (presence stays visible) and write whole floats as integers, so
/// `3.0` and `3` compare equal as the CLI contract allows.
pub fn event(mut e: Value) -> Value {
    if let Some(d) = e.get_mut("durationMs") {
        *d = Value::String("<ms>".into());
    }
    if let Some(message) = e.get_mut("message") {
        if let Some(d) = message.get_mut("durationMs") {
            *d = Value::String("<ms>".into());
        }
        if let Some(t) = message.get_mut("timestamp") {
            *t = Value::String("<ts>".into());
        }
    }
    integers(e)
}

/// Whole floats as integers, recursively.
pub fn integers(v: Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9e15 => Value::from(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(integers).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, integers(v))).collect()),
        v => v,
    }
}

/// Normalise `toolwright exec` events as `spec/cli-contract.md` §1.6 says (the same rules as
/// `tests/oracle/record-builtins.mjs`): workspace and temp paths replaced, times masked, grep and find results
/// in a fixed order, runs of updates collapsed to their first and last.
pub fn builtin_events(events: Vec<Value>, cwds: &[String]) -> Vec<Value> {
    let mut temps = Vec::new();
    for e in &events {
        collect_temp_paths(e, &mut temps);
    }
    let events: Vec<Value> = events
        .into_iter()
        .map(|e| replace_strings(e, cwds, &temps))
        .filter(|e| e["type"] != "message_start")
        .map(|mut e| {
            if e.get("durationMs").is_some() {
                e["durationMs"] = "<ms>".into();
            }
            if let Some(m) = e.get_mut("message") {
                if m.get("durationMs").is_some() {
                    m["durationMs"] = "<ms>".into();
                }
                m["timestamp"] = "<ts>".into();
            }
            if let Some(w) = e.pointer_mut("/result/structuredContent/wall_time_seconds") {
                *w = "<s>".into();
            }
            digest_long_strings(sort_search_results(integers(e)))
        })
        .collect();
    let is_update_of = |x: Option<&Value>, id: &Value| {
        x.is_some_and(|x| x["type"] == "tool_execution_update" && x["toolCallId"] == *id)
    };
    let mut out = Vec::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        let id = &e["toolCallId"];
        if e["type"] == "tool_execution_update"
            && i > 0
            && is_update_of(events.get(i - 1), id)
            && is_update_of(events.get(i + 1), id)
        {
            continue;
        }
        out.push(e.clone());
    }
    out
}

/// Strings over 2 KiB become their digest, so fixtures stay small while the comparison stays exact.
fn digest_long_strings(v: Value) -> Value {
    use sha2::Digest;
    match v {
        Value::String(s) if s.len() > 2048 => {
            let hash = sha2::Sha256::digest(s.as_bytes());
            let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
            Value::String(format!("<sha256:{hex} bytes={}>", s.len()))
        }
        Value::Array(items) => Value::Array(items.into_iter().map(digest_long_strings).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, x)| (k, digest_long_strings(x)))
                .collect(),
        ),
        v => v,
    }
}

fn collect_temp_paths(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                if (k == "fullOutputPath" || k == "full_output_path")
                    && let Some(s) = x.as_str()
                    && !out.iter().any(|p| p == s)
                {
                    out.push(s.to_owned());
                }
                collect_temp_paths(x, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|x| collect_temp_paths(x, out)),
        _ => {}
    }
}

fn replace_strings(v: Value, cwds: &[String], temps: &[String]) -> Value {
    match v {
        Value::String(mut s) => {
            for c in cwds {
                s = s.replace(c.as_str(), "<CWD>");
            }
            for t in temps {
                s = s.replace(t.as_str(), "<TMPFILE>");
            }
            Value::String(s)
        }
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|x| replace_strings(x, cwds, temps))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, x)| (k, replace_strings(x, cwds, temps)))
                .collect(),
        ),
        v => v,
    }
}

fn sort_text(tool: &str, text: &str) -> String {
    let (body, notice) = match text.find("\n\n[") {
        Some(i) => (&text[..i], &text[i..]),
        None => (text, ""),
    };
    if body == "No matches found" || body == "No files found matching pattern" {
        return text.to_owned();
    }
    let mut lines: Vec<&str> = body.split('\n').collect();
    if tool == "find" {
        lines.sort_unstable();
        return lines.join("\n") + notice;
    }
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    let key_re = regex_lite_key;
    for line in lines {
        let key = key_re(line);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(line),
            None => groups.push((key, vec![line])),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    groups
        .into_iter()
        .flat_map(|(_, g)| g)
        .collect::<Vec<_>>()
        .join("\n")
        + notice
}

/// The file part of a grep line: everything before the first `:N: ` or `-N- `.
fn regex_lite_key(line: &str) -> String {
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b':' || b == b'-' {
            let digits = bytes[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            let after = i + 1 + digits;
            if digits > 0 && bytes.get(after) == Some(&b) && bytes.get(after + 1) == Some(&b' ') {
                return line[..i].to_owned();
            }
        }
    }
    String::new()
}

fn sort_search_results(mut e: Value) -> Value {
    let tool = e
        .get("toolName")
        .or_else(|| e.pointer("/message/toolName"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let tool = tool.to_owned();
    if tool != "grep" && tool != "find" || e["isError"] == true {
        return e;
    }
    let target = if e.get("result").is_some() {
        e.get_mut("result")
    } else {
        e.get_mut("message")
    };
    let Some(target) = target else { return e };
    if target["isError"] == true {
        return e;
    }
    if let Some(Value::Array(blocks)) = target.get_mut("content") {
        for block in blocks {
            if let Some(Value::String(text)) = block.get_mut("text") {
                *text = sort_text(&tool, text);
            }
        }
    }
    if let Some(Value::String(text)) = target.pointer_mut("/details/truncation/content") {
        *text = sort_text(&tool, text);
    }
    e
}
