// js-wordcount: the `wordcount` example (plugins/examples/wordcount) in JavaScript, with Toolwright's JavaScript
// SDK. `js_word_count` counts the words, lines and characters of a text, exactly as the Rust example's
// `word_count` does; it needs no file, process or variable, so it asks for nothing. `component.js` is the
// component's entry; `node build.mjs` builds it (with the SDK as ./toolwright.js, as `toolwright new --lang js`
// lays a project out: tests/tests/polyglot.rs does that).
import { Plugin } from "./toolwright.js";

export const plugin = new Plugin({
  name: "js-wordcount",
  version: "0.1.0",
  description: "Counts words, lines and characters (the wordcount example, in JavaScript).",
});

/** Words (runs of non-whitespace), lines (as Rust's `str::lines`) and characters (code points) of `text`. */
export function count(text) {
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return {
    words: text.split(/\s+/u).filter(Boolean).length,
    lines: lines.length,
    characters: [...text].length,
  };
}

plugin.tool(
  {
    name: "js_word_count",
    label: "word count",
    description: "Count the words, lines and characters of a text.",
    parameters: {
      type: "object",
      properties: { text: { type: "string", description: "The text to count" } },
      required: ["text"],
    },
    outputSchema: {
      type: "object",
      properties: { words: { type: "integer" }, lines: { type: "integer" }, characters: { type: "integer" } },
      required: ["words", "lines", "characters"],
    },
    promptSnippet: "Count words, lines and characters",
    // Run once as the component is built: its regular expression and code are compiled in every instance's
    // starting memory instead of at each fresh instance's call.
    warmUp: [{ text: "warm up\nthe counter" }],
  },
  (args, ctx) => {
    const c = count(args.text);
    return ctx.result(`${c.words} words, ${c.lines} lines, ${c.characters} characters`, { structured: c });
  },
);
