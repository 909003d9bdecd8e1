// One batch of tool calls through pi 1.6.0's agent loop, timed inside the process (used by bench-vs-pi.mjs).
//
//   node bench-pi-batch.mjs CWD CALLS.json
//
// Writes the events `toolwright exec` writes (tool_execution_*, and message_start / message_end of the tool-result
// messages) to stdout as JSON lines, as exec does, then {"batchMs": …, "calls": …}: from the first tool event to the
// last tool-result message, the way `toolwright exec --timing` measures; Node's start-up and module loading are
// outside it. (Before 2026-12-02 pi wrote no events here while exec wrote four lines per call.)

import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// As the recorders do: no downloads, a scratch agent dir, set before pi's modules load.
process.env.PI_OFFLINE = "1";
process.env.PI_CODING_AGENT_DIR = mkdtempSync(join(tmpdir(), "tw-bench-agent-"));
process.env.LANG = "C.UTF-8";
const { runAgentLoop } = await import("@earendil-works/pi-agent-core");
const { createReadTool, createBashTool, createEditTool, createWriteTool, createGrepTool, createFindTool, createLsTool } =
  await import("@earendil-works/pi-coding-agent");
const { model, scriptedModel } = await import("./common.mjs");

const [cwd, callsPath] = process.argv.slice(2);
const file = JSON.parse(readFileSync(callsPath, "utf8"));
const calls = file.toolCalls.map((c) => ({ type: "toolCall", id: c.id, name: c.name, arguments: c.arguments }));
const tools = [createReadTool, createBashTool, createEditTool, createWriteTool, createGrepTool, createFindTool,
  createLsTool].map((create) => create(cwd));
const streamFn = scriptedModel(calls, "toolUse");
let first;
let last;
let results = 0;
const written = (event) =>
  event.type.startsWith("tool_execution_") ||
  ((event.type === "message_start" || event.type === "message_end") && event.message.role === "toolResult");
const emit = (event) => {
  if (event.type === "tool_execution_start" && first === undefined) first = performance.now();
  if (written(event)) process.stdout.write(`${JSON.stringify(event)}\n`);
  if (event.type === "message_end" && event.message.role === "toolResult") {
    results++;
    last = performance.now();
  }
};
await runAgentLoop([{ role: "user", content: "go", timestamp: 0 }], { messages: [], tools },
  { model, toolExecution: file.mode ?? "parallel", convertToLlm: (ms) => ms.filter((m) => m.role !== "system") },
  emit, undefined, streamFn);
if (results !== calls.length) throw new Error(`expected ${calls.length} results, got ${results}`);
console.log(JSON.stringify({ batchMs: last - first, calls: results }));
