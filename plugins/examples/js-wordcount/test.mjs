// Unit tests of js-wordcount, under Node (with the SDK beside it as ./toolwright.js): `node --test test.mjs`.
import assert from "node:assert/strict";
import test from "node:test";

import { count, plugin } from "./app.js";
import { Context } from "./toolwright.js";

test("counts as the Rust example does", () => {
  assert.deepEqual(count("one two\nthree\n"), { words: 3, lines: 2, characters: 14 });
  assert.deepEqual(count(""), { words: 0, lines: 0, characters: 0 });
  assert.deepEqual(count("naïve café\r\nok"), { words: 3, lines: 2, characters: 14 });
});

test("the tool's text and structured content", async () => {
  const r = plugin.run("js_word_count", { text: "a b" }, await Context.forTests("/"));
  assert.equal(r.text, "2 words, 1 lines, 3 characters");
  assert.deepEqual(r.structured, { words: 2, lines: 1, characters: 3 });
});
