// Build the component: `node build.mjs` with componentize-js in node_modules and the WIT in ./wit.
import { componentize } from "@bytecodealliance/componentize-js";
import { writeFile } from "node:fs/promises";

const { component } = await componentize({
  sourcePath: "component.js",
  witPath: "wit",
  worldName: "tool-plugin",
  // componentize-js includes wasi:http and a fetch-event handler by default; the host offers neither.
  disableFeatures: ["http", "fetch-event"],
});
await writeFile("js_wordcount.wasm", component);
