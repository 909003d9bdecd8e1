use super::*;

#[test]
fn tokens_split_identifiers_drop_stop_words_and_stem() {
    assert_eq!(
        tokenize("getHTTPServer lists the open_issues, searches boxes and class"),
        [
            "get", "http", "server", "list", "open", "issue", "search", "box", "class"
        ]
    );
    assert_eq!(tokenize("Ünïcode Wörter"), ["ünïcode", "wörter"]);
    // Text without spaces goes through ICU's dictionary word breaks, like Intl.Segmenter.
    #[cfg(feature = "icu-search")]
    assert_eq!(tokenize("こんにちは世界"), ["こんにちは", "世界"]);
    #[cfg(not(feature = "icu-search"))]
    assert_eq!(tokenize("こんにちは世界"), ["こんにちは世界"]);
}

#[test]
fn documents_read_descriptions_and_property_names_through_local_refs() {
    let schema = json!({
        "type": "object",
        "properties": {"city": {"$ref": "#/$defs/City"}, "units": {"description": "metric or imperial"}},
        "$defs": {"City": {"description": "A city name", "type": "string"}}
    });
    let document = SearchDocument::new("weather", "Get the weather", &schema, None);
    assert_eq!(
        document.text,
        "Get the weather city A city name units metric or imperial"
    );
    assert_eq!(
        resolve_ref("#/%24defs/City", &schema),
        schema.pointer("/$defs/City")
    );
    assert_eq!(resolve_ref("#/%E0%A4%A", &schema), None);
}

#[test]
fn names_beat_descriptions_and_exact_names_come_first() {
    let docs = vec![
        SearchDocument::new(
            "mention",
            "Mentions the weather and the weather again",
            &json!({}),
            None,
        ),
        SearchDocument::new("weather", "Forecasts", &json!({}), None),
        SearchDocument::new("mcp__srv__weather_now", "Now", &json!({}), None),
        SearchDocument::new("unrelated", "Nothing here", &json!({}), None),
    ];
    let names: Vec<String> = rank("weather", &docs, 8).into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["weather", "mcp__srv__weather_now", "mention"]);
    let names: Vec<String> = rank("weather_now", &docs, 1)
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["mcp__srv__weather_now"]);
    assert!(rank("the and", &docs, 8).is_empty());
}
