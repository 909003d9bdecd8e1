// A thin SDK for Toolwright plugins in JavaScript, built with componentize-js (worlds `tool-plugin` and
// `handler-plugin` of Toolwright's `wit/plugin.wit`). One plain ES module, no dependencies.
//
// Declare the plugin and its tools; the SDK fills every field the WIT requires with pi's defaults, implements
// the exports, turns a thrown error into an error result (its message for the model, the stack in `details`),
// and gives tools a file API that works inside the sandbox (WASI) and, for tests, under Node:
//
//     // tools.js: what the plugin does (plain JavaScript, testable under Node)
//     import { Plugin, read } from "./toolwright.js";
//     export const plugin = new Plugin({
//       name: "my-tool", version: "0.1.0", description: "Counts words.",
//       capabilities: [read(".", "reads the files it counts")],
//     });
//     plugin.tool({
//       name: "count_words",
//       description: "Count the words of a file.",
//       parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
//     }, (args, ctx) => {
//       const n = ctx.fs.readFileSync(args.path, "utf8").split(/\s+/).filter(Boolean).length;
//       return ctx.result(`${n} words`, { structured: { words: n } });
//     });
//
//     // plugin.js: the component's entry, which hands the SDK the host's imports
//     import * as host from "toolwright:plugin/host@0.2.0";
//     import * as process from "toolwright:plugin/process@0.2.0";
//     import * as preopens from "wasi:filesystem/preopens@0.2.12";
//     import { plugin } from "./tools.js";
//     export const tool = plugin.exports({ host, process, preopens });
//
// It may also offer MCP resources and prompts, which `toolwright mcp` serves (`plugin.resource`,
// `plugin.resourceTemplate`, `plugin.prompt`; build with the world `tool-offers-plugin` and
// `export const offers = plugin.offersExports({ host })`).
//
// A tool function gets the validated arguments and a `Context`, and returns a string, `ctx.result(…)`, or a
// promise of either. A handler plugin declares `plugin.onToolCall((tool, args) => …)` (return nothing to allow,
// `block(reason)` or `rewrite(args)`; a throw blocks, as pi does) and exports `handler = plugin.handlerExports(…)`.
// A throw in a hook (or a returned `fail(message)`) is a failure with pi's text: a thrown `Error`'s message, or
// `Extension failed, blocking execution: <value>` for anything else thrown in `onToolCall` (pi's words); a
// failing `tool_call` blocks the call with it, a failing `tool_result` leaves the result (the host logs it).

/** A capability request: read files below `directory` (relative to the workspace). */
export const read = (directory, reason) => ({ capability: { tag: "read", val: directory }, reason });
/** A capability request: read and write files below `directory`. */
export const write = (directory, reason) => ({ capability: { tag: "write", val: directory }, reason });
/** A capability request: start `program`. */
export const spawn = (program, reason) => ({ capability: { tag: "spawn", val: program }, reason });
/** A capability request: see the environment variable `name`. */
export const env = (name, reason) => ({ capability: { tag: "env", val: name }, reason });
/** A capability request: connect to addresses matching `HOST:PORT`. */
export const network = (pattern, reason) => ({ capability: { tag: "network", val: pattern }, reason });

/** A `tool_call` decision: do not run the call; the model sees `reason`. */
export const block = (reason, { terminate = false } = {}) => ({ kind: "block", reason, terminate });
/** A `tool_call` decision: run the call with these arguments instead (not validated again). */
export const rewrite = (args) => ({ kind: "rewrite", args });
/** A hook's failure (pi's thrown `Error`): a `tool_call` hook's blocks the call, and the model sees `message`. */
export const fail = (message) => ({ kind: "fail", message: String(message) });

/** A question for `Context.ask`: a form the user fills in (`elicitation/create`); `schema` is the JSON Schema of its fields. */
export const form = (key, message, schema) => ({
  key,
  method: "elicitation/create",
  params: { message, requestedSchema: schema },
});
/** A question for `Context.ask`: a message from the client's model (`sampling/createMessage`; `[ask] sampling` must list the plugin). */
export const sample = (key, params) => ({ key, method: "sampling/createMessage", params });
/** A question for `Context.ask`: the client's roots (`roots/list`). */
export const roots = (key) => ({ key, method: "roots/list", params: {} });

/** A tool result: text for the model, and optionally structured content, details, an error flag, and blocks after
 * the text: `images` (`{data, mimeType}`, base64) or `blocks`, any of `image(…)`, `audio(…)`, `embedded(…)`. */
export function result(text, { structured, details, isError = false, images = [], blocks = [] } = {}) {
  return { text, structured, details, isError, images, blocks };
}
const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
/** `data` as base64 text: a string is taken as base64 already; bytes (a `Uint8Array`, an `ArrayBuffer` or
 * another view of one, an array of integers 0–255) are encoded; anything else is a `TypeError`. */
function base64(data) {
  if (typeof data === "string") return data;
  let bytes;
  if (data instanceof Uint8Array) bytes = data;
  else if (data instanceof ArrayBuffer) bytes = new Uint8Array(data);
  else if (ArrayBuffer.isView(data)) bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  else if (Array.isArray(data)) {
    if (!data.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)) {
      throw new RangeError("bytes must be integers from 0 to 255");
    }
    bytes = Uint8Array.from(data);
  } else throw new TypeError("data must be base64 text or bytes");
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const [a, b = 0, c = 0] = [bytes[i], bytes[i + 1], bytes[i + 2]];
    const n = (a << 16) | (b << 8) | c;
    out += BASE64[n >> 18] + BASE64[(n >> 12) & 63];
    out += i + 1 < bytes.length ? BASE64[(n >> 6) & 63] : "=";
    out += i + 2 < bytes.length ? BASE64[n & 63] : "=";
  }
  return out;
}
/** An image block of `data` (base64 text, or bytes). */
export const image = (data, mimeType) => ({ tag: "image", val: { data: base64(data), mimeType } });
/** An audio block of `data` (base64 text, or bytes; `toolwright:plugin@0.2.0`): an MCP client gets it as it is,
 * the model sees `[audio MIME omitted]`. */
export const audio = (data, mimeType) => ({ tag: "audio", val: { data: base64(data), mimeType } });
/** An embedded resource (`toolwright:plugin@0.2.0`): `{text}` or `{blob}` (base64 text, or bytes), with its
 * `mimeType`. */
export const embedded = (uri, { text, blob, mimeType } = {}) => ({
  tag: "resource",
  val: {
    uri,
    mimeType,
    body: blob === undefined ? { tag: "text", val: String(text ?? "") } : { tag: "blob", val: base64(blob) },
  },
});

// ---- paths (pi's resolveToCwd, as plain string work on POSIX paths) ----

function normalize(path) {
  const parts = [];
  for (const segment of path.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === "..") parts.pop();
    else parts.push(segment);
  }
  return `/${parts.join("/")}`;
}

function resolvePath(path, cwd, home) {
  let p = String(path);
  if (home && (p === "~" || p.startsWith("~/"))) p = home + p.slice(1);
  return normalize(p.startsWith("/") ? p : `${cwd}/${p}`);
}

// ---- files inside the sandbox: WASI's filesystem, below the preopened directories of the plugin's grants ----

const NODE_CODES = {
  "no-entry": ["ENOENT", "no such file or directory"],
  access: ["EACCES", "permission denied"],
  "not-permitted": ["EPERM", "operation not permitted"],
  "read-only": ["EROFS", "read-only file system"],
  exist: ["EEXIST", "file already exists"],
  "is-directory": ["EISDIR", "illegal operation on a directory"],
  "not-directory": ["ENOTDIR", "not a directory"],
  "not-empty": ["ENOTEMPTY", "directory not empty"],
  "name-too-long": ["ENAMETOOLONG", "name too long"],
  "insufficient-space": ["ENOSPC", "no space left on device"],
};

function nodeError(code, syscall, path) {
  const [name, text] = NODE_CODES[code] ?? ["EIO", String(code)];
  return Object.assign(new Error(`${name}: ${text}, ${syscall} '${path}'`), { code: name, syscall, path });
}

const REFUSABLE = new Set(["no-entry", "access", "not-permitted", "read-only"]);

const concat = (chunks) => {
  const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  return all;
};

const dispose = (resource) => resource?.[Symbol.dispose]?.();

/** Node's synchronous file functions (the common subset) over WASI, with the host's refusal texts. */
class WasiFs {
  // `workspace` gives the workspace directory; it and the preopens are asked for at the first file operation, so
  // a call that touches no file pays for neither.
  constructor(host, preopens, workspace) {
    this.host = host;
    this.preopens = preopens;
    this.workspace = workspace;
    this.roots = null;
  }

  // The preopen below which `path` lies, and the path relative to it; a refusal when there is none.
  locate(path, write, syscall) {
    const abs = resolvePath(path, this.workspace(), this.host.home());
    this.roots ??= this.preopens.getDirectories().map(([dir, path]) => [dir, normalize(path)]);
    let best = null;
    for (const [dir, root] of this.roots) {
      const inside = root === "/" || abs === root || abs.startsWith(`${root}/`);
      if (inside && (!best || root.length > best[1].length)) best = [dir, root];
    }
    if (!best) throw this.refused(abs, write) ?? nodeError("no-entry", syscall, path);
    const rel = abs.slice(best[1] === "/" ? 1 : best[1].length).replace(/^\/+/, "") || ".";
    return { dir: best[0], rel, abs };
  }

  refused(abs, write) {
    const text = this.host.refusal(abs, write);
    return text == null ? null : Object.assign(new Error(text), { code: "EACCES", path: abs });
  }

  // Run a WASI operation; its error as Node words it, or as the host's refusal when the grants are why.
  attempt(path, write, syscall, op) {
    const at = this.locate(path, write, syscall);
    try {
      return op(at);
    } catch (e) {
      const code = e?.payload ?? e;
      if (typeof code !== "string") throw e;
      throw (REFUSABLE.has(code) && this.refused(at.abs, write)) || nodeError(code, syscall, path);
    }
  }

  readFileSync(path, options) {
    const encoding = typeof options === "string" ? options : options?.encoding;
    const bytes = this.attempt(path, false, "open", ({ dir, rel }) => {
      const file = dir.openAt({ symlinkFollow: true }, rel, {}, { read: true });
      const chunks = [];
      let offset = 0n;
      for (;;) {
        const [chunk, eof] = file.read(65536n, offset);
        chunks.push(chunk);
        offset += BigInt(chunk.length);
        if (eof || chunk.length === 0) break;
      }
      dispose(file);
      return concat(chunks);
    });
    return encoding ? new TextDecoder().decode(bytes) : bytes;
  }

  writeFileSync(path, data) {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    this.attempt(path, true, "open", ({ dir, rel }) => {
      const file = dir.openAt({ symlinkFollow: true }, rel, { create: true, truncate: true }, { write: true });
      let offset = 0;
      while (offset < bytes.length) {
        offset += Number(file.write(bytes.subarray(offset), BigInt(offset)));
      }
      dispose(file);
    });
  }

  readdirSync(path) {
    return this.attempt(path, false, "scandir", ({ dir, rel }) => {
      const opened = rel === "." ? dir : dir.openAt({ symlinkFollow: true }, rel, { directory: true }, { read: true });
      const stream = opened.readDirectory();
      const names = [];
      for (let entry = stream.readDirectoryEntry(); entry; entry = stream.readDirectoryEntry()) names.push(entry.name);
      dispose(stream);
      if (opened !== dir) dispose(opened);
      return names;
    });
  }

  statSync(path) {
    const stat = this.attempt(path, false, "stat", ({ dir, rel }) =>
      rel === "." ? dir.stat() : dir.statAt({ symlinkFollow: true }, rel),
    );
    return {
      size: Number(stat.size),
      isFile: () => stat.type === "regular-file",
      isDirectory: () => stat.type === "directory",
      isSymbolicLink: () => stat.type === "symbolic-link",
    };
  }

  existsSync(path) {
    try {
      this.statSync(path);
      return true;
    } catch {
      return false;
    }
  }

  mkdirSync(path, { recursive = false } = {}) {
    const abs = resolvePath(path, this.workspace(), this.host.home());
    if (recursive && abs !== "/" && !this.existsSync(abs)) {
      this.mkdirSync(abs.slice(0, abs.lastIndexOf("/")) || "/", { recursive });
    } else if (recursive) {
      return;
    }
    this.attempt(abs, true, "mkdir", ({ dir, rel }) => dir.createDirectoryAt(rel));
  }
}

/** Node's own `fs`, resolving relative paths against `cwd` (unit tests outside the sandbox). */
function nodeFs(fs, cwd) {
  const at = (path) => resolvePath(path, cwd, null);
  return {
    readFileSync: (path, options) => fs.readFileSync(at(path), options),
    writeFileSync: (path, data) => fs.writeFileSync(at(path), data),
    readdirSync: (path) => fs.readdirSync(at(path)),
    statSync: (path) => fs.statSync(at(path)),
    existsSync: (path) => fs.existsSync(at(path)),
    mkdirSync: (path, options) => fs.mkdirSync(at(path), options),
  };
}

// ---- what a running tool reaches of the host ----

const LEVELS = new Set(["debug", "info", "warn", "error"]);

/** What a running tool reaches of the host: the workspace, files, logs, progress, nested calls, processes. */
export class Context {
  // The workspace: a string, or a function asked once, at first use, so that a call that never needs it makes
  // no host call for it (4 µs of a reused instance's call).
  #workspace;

  constructor({ host = null, process = null, fs, cwd }) {
    this.host = host;
    this.process = process;
    this.#workspace = cwd;
    /** Node-style synchronous file functions: `readFileSync`, `writeFileSync`, `readdirSync`, `statSync`,
     * `existsSync`, `mkdirSync`. Relative paths resolve against the workspace. */
    this.fs = fs;
  }

  /** The workspace directory (absolute). */
  get cwd() {
    if (typeof this.#workspace === "function") this.#workspace = this.#workspace();
    return this.#workspace;
  }

  /** A context for unit tests under Node: files through `node:fs` below `cwd`, logs and updates go nowhere. */
  static async forTests(cwd) {
    const fs = await import("node:fs");
    return new Context({ fs: nodeFs(fs, cwd), cwd });
  }

  /** `path` as the model meant it: relative to the workspace, `~` for home, made absolute. */
  resolve(path) {
    return resolvePath(path, this.cwd, this.host?.home());
  }

  /** Write a line to the host's log (an MCP client hears it as `notifications/message`). */
  log(message, level = "info") {
    this.host?.log(LEVELS.has(level) ? level : "info", String(message));
  }

  /** Report a partial result (progress) while the call runs. */
  update(text) {
    this.host?.update(toWit(result(String(text))));
  }

  /** Whether the call was cancelled; long-running tools check it often. */
  isCancelled() {
    return Boolean(this.host?.isCancelled());
  }

  /** Call another tool through the host's full pipeline (pi's `ctx.executeTool`): its text and error flag. */
  callTool(name, args) {
    if (!this.host) throw new Error("callTool needs the host");
    const outcome = this.host.callTool(name, JSON.stringify(args));
    const text = outcome.result.content
      .filter((c) => c.tag === "text")
      .map((c) => c.val)
      .join("\n");
    return { text, isError: outcome.isError, details: parseOrNull(outcome.result.details) };
  }

  /**
   * Ask the MCP client that made the call (`form`, `sample`, `roots` make the questions): the answers, the client's
   * results parsed (`{action: "accept", content: {...}}` for a form), in the questions' order. Throws an `Error`
   * with the host's reason when nobody can answer. A 2026-07-28 client answers with the call's next round: the
   * call stops at its first unanswered question and runs again from the start with every answer so far, so ask
   * before changing anything.
   */
  ask(...questions) {
    if (!this.host) throw new Error("ask needs the host");
    const requests = questions.map((q) => ({ key: q.key, method: q.method, params: JSON.stringify(q.params ?? {}) }));
    let answers;
    try {
      answers = this.host.ask(requests);
    } catch (error) {
      // The host's reason, as the component model's error payload.
      throw new Error(error?.payload ?? String(error));
    }
    return answers.map((a) => JSON.parse(a));
  }

  /**
   * The methods `ask` can put to the client (`elicitation/create`, `sampling/createMessage`, `roots/list`): those
   * it declared and this plugin may use; empty when there is nobody to ask.
   */
  clientAnswers() {
    return this.host ? this.host.clientAnswers() : [];
  }

  /**
   * The tools `callTool` can reach now (pi's `ctx.tools`), in registry order: `{name, description, exposure,
   * namespace, promptGuidelines, parameters, outputSchema}` (`namespace` a name or null; schemas parsed, or null).
   */
  tools() {
    if (!this.host) return [];
    return this.host.callableTools().map((t) => ({
      name: t.name,
      description: t.description,
      exposure: t.exposure,
      namespace: t.namespace?.name ?? null,
      promptGuidelines: t.promptGuidelines,
      parameters: parseOrNull(t.parameters),
      outputSchema: parseOrNull(t.outputSchema),
    }));
  }

  /** Run a program the plugin was granted, to its end: its output (stdout and stderr, interleaved) and status. */
  run(program, args = [], { cwd, env = {}, timeoutMs = 60000 } = {}) {
    if (!this.process) throw new Error("run needs the host's process import");
    const child = this.process.spawn({ program, args, cwd: cwd ?? this.cwd, env: Object.entries(env) });
    const chunks = [];
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.isCancelled() || Date.now() > deadline) {
        child.kill();
        throw new Error(this.isCancelled() ? "Operation aborted" : `${program} timed out after ${timeoutMs} ms`);
      }
      const event = child.next(100);
      if (event.tag === "output") chunks.push(event.val);
      else if (event.tag === "exited") {
        dispose(child);
        return { output: new TextDecoder().decode(concat(chunks)), code: event.val.code, signal: event.val.signal };
      }
    }
  }

  /** A result with structured content (matching the tool's output schema), details or an error flag. */
  result(text, options) {
    return result(text, options);
  }
}

function parseOrNull(text) {
  if (text == null) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

const json = (value) => (value === undefined || value === null ? undefined : JSON.stringify(value));

function toWit(r) {
  const content = [{ tag: "text", val: r.text }];
  for (const image of r.images ?? []) content.push({ tag: "image", val: { data: image.data, mimeType: image.mimeType } });
  content.push(...(r.blocks ?? []));
  return {
    content,
    details: json(r.details),
    structuredContent: json(r.structured),
    isError: r.isError ? true : undefined,
  };
}

// An error (or anything thrown) as the model should read it: its message, and the stack in `details`.
function failure(error) {
  if (error instanceof Error) {
    const name = error.name && error.name !== "Error" ? `${error.name}: ` : "";
    return result(`${name}${error.message}`, { details: { stack: String(error.stack ?? "") }, isError: true });
  }
  return result(typeof error === "string" ? error : JSON.stringify(error) ?? String(error), { isError: true });
}

const normalizeResult = (out) => (typeof out === "string" ? result(out) : out ?? result(""));

/** A plugin: its metadata, the capabilities it asks for, its tools and its `tool_call` hook. */
export class Plugin {
  constructor({ name, version = "0.1.0", description = "", capabilities = [] }) {
    Object.assign(this, { name, version, description, capabilities });
    this.tools = new Map();
    this.toolCall = null;
    this.toolResult = null;
  }

  /** Declare a tool: `declaration` has `name`, `description`, `parameters` (a JSON Schema) and optionally
   * `label`, `outputSchema`, `promptSnippet`, `promptGuidelines`, `executionMode` ("parallel" | "sequential"),
   * `exposure`, `annotations` ({readOnly, destructive, idempotent, openWorld}), `longRunning` (true: an MCP client
   * that accepts tasks gets a task for its calls; false: the result at once; unset: the host decides), pi's `renderCall(args)` and
   * `renderResult(result, {expanded, partial})` (lines of text for people, or nothing for the default
   * rendering), and `warmUp`, arguments to run it with once as the component is built (see `warmUp()`);
   * `run(args, ctx)` does it. */
  tool(declaration, run) {
    if (!declaration?.name || !declaration.description || !declaration.parameters) {
      throw new Error("a tool needs a name, a description and parameters");
    }
    this.tools.set(declaration.name, { declaration, run });
    return this;
  }

  /** Offer the MCP resource `declaration.uri` (with `name`, and optionally `description`, `mimeType`, `title`):
   * `read(uri)` returns a string (text) or a `Uint8Array`; a throw is a failed read, its message the client's.
   * `read(uri, ctx)` may ask the client that reads it, as a prompt's `fill` may. `toolwright mcp` serves it (build
   * with the world `tool-offers-plugin` and export `offers`). */
  resource(declaration, read) {
    if (!declaration?.uri || !declaration.name) throw new Error("a resource needs a uri and a name");
    (this.resources ??= new Map()).set(declaration.uri, { declaration, read });
    return this;
  }

  /** Offer every URI matching `declaration.uriTemplate` (RFC 6570: `{id}` one path segment, `{+path}` any text):
   * `read(uri, variables, ctx)` returns a string, a `Uint8Array`, or nothing for no such resource. */
  resourceTemplate(declaration, read) {
    if (!declaration?.uriTemplate || !declaration.name) throw new Error("a template needs a uriTemplate and a name");
    (this.templates ??= []).push({ declaration, read, pattern: templatePattern(declaration.uriTemplate) });
    return this;
  }

  /** Offer the MCP prompt `declaration.name` (with `description`, `title`, `arguments`: [{name, description,
   * required}]): `fill(args, ctx)` returns a string (one user message) or a list of messages, each a string (the
   * user's text) or `{role: "user" | "assistant", content: {MCP content block}}`. `ctx` asks the client that
   * wants the prompt (`ctx.ask(form(...))`, `ctx.clientAnswers()`) when the offers were exported with the host
   * (`offersExports({ host })`); a 2026-07-28 client answers with its next round, the prompt filled in again. */
  prompt(declaration, fill) {
    if (!declaration?.name) throw new Error("a prompt needs a name");
    (this.prompts ??= new Map()).set(declaration.name, { declaration, fill });
    return this;
  }

  /** Read an offered resource (the export, and unit tests): `{mimeType, contents}`, or `null` when nothing here
   * has `uri`. `ctx`: what the reading function (its last argument: `read(uri, ctx)`, `read(uri, variables, ctx)`)
   * may ask the client that reads it through, as a prompt's may. */
  readResource(uri, ctx = null) {
    // Only a function that declares the parameter gets it (`read(uri, opts = {})` is left as it was).
    const withCtx = (read, declared) => (ctx && read.length >= declared ? [ctx] : []);
    const offered = this.resources?.get(uri);
    if (offered) {
      return { mimeType: offered.declaration.mimeType, contents: offered.read(uri, ...withCtx(offered.read, 2)) };
    }
    for (const template of this.templates ?? []) {
      const match = template.pattern.exec(uri);
      if (!match) continue;
      const contents = template.read(uri, { ...match.groups }, ...withCtx(template.read, 3));
      if (contents != null) return { mimeType: template.declaration.mimeType, contents };
    }
    return null;
  }

  /** Fill in an offered prompt (the export, and unit tests): its messages `[{role, content}]`, or `null`. `ctx`:
   * what the prompt may ask the client through (a `Context`). */
  getPrompt(name, args, ctx = null) {
    const prompt = this.prompts?.get(name);
    if (!prompt) return null;
    const out = prompt.fill(args, ctx);
    return (typeof out === "string" ? [out] : out).map((m) =>
      typeof m === "string" ? { role: "user", content: { type: "text", text: m } } : m,
    );
  }

  /** The object to export as `offers` (world `tool-offers-plugin`); with the `host` import, prompts and resource
   * reads may ask the client that wants them. */
  offersExports({ host = null } = {}) {
    const plugin = this;
    const info = (d, uri) => ({
      uri,
      name: d.name,
      title: d.title,
      description: d.description,
      mimeType: d.mimeType,
      size: undefined,
    });
    const failed = (error) => ({ tag: "failed", val: error instanceof Error ? error.message : String(error) });
    return {
      listResources: () => [...(plugin.resources?.values() ?? [])].map((r) => info(r.declaration, r.declaration.uri)),
      listResourceTemplates: () => (plugin.templates ?? []).map((t) => info(t.declaration, t.declaration.uriTemplate)),
      readResource(uri) {
        let found;
        try {
          const ctx = host ? new Context({ host, fs: null, cwd: () => host.cwd() }) : null;
          found = plugin.readResource(uri, ctx);
        } catch (error) {
          throw failed(error);
        }
        if (!found) throw { tag: "not-found" };
        const contents =
          found.contents instanceof Uint8Array
            ? { tag: "blob", val: found.contents }
            : { tag: "text", val: String(found.contents) };
        return [{ uri, mimeType: found.mimeType, contents }];
      },
      listPrompts: () =>
        [...(plugin.prompts?.values() ?? [])].map(({ declaration: d }) => ({
          name: d.name,
          title: d.title,
          description: d.description,
          arguments: (d.arguments ?? []).map((a) => ({
            name: a.name,
            description: a.description,
            required: Boolean(a.required),
          })),
        })),
      getPrompt(name, args) {
        let messages;
        try {
          const ctx = host ? new Context({ host, fs: null, cwd: () => host.cwd() }) : null;
          messages = plugin.getPrompt(name, Object.fromEntries(args), ctx);
        } catch (error) {
          throw failed(error);
        }
        if (!messages) throw { tag: "not-found" };
        return {
          description: plugin.prompts.get(name).declaration.description,
          messages: messages.map((m) => ({ role: m.role, content: JSON.stringify(m.content) })),
        };
      },
      complete: () => [],
    };
  }

  /** Declare the plugin's `tool_call` hook `(tool, args) => undefined | block(…) | rewrite(…)`. */
  onToolCall(decide) {
    this.toolCall = decide;
    return this;
  }

  /** Declare the plugin's `tool_result` hook `(tool, args, result) => undefined | string | result(…)`: `result`
   * has the call's `text`, `details`, `isError` and its other `blocks` (images, audio, embedded resources); return
   * nothing to keep it, or a replacement (`result(text, {blocks: result.blocks})` keeps the blocks). A throw keeps
   * the result unchanged (and is logged). */
  onToolResult(change) {
    this.toolResult = change;
    return this;
  }

  /** Run a tool (the export, and unit tests): its result, a throw becoming an error result. */
  run(name, args, ctx) {
    const entry = this.tools.get(name);
    if (!entry) return result(`${this.name} has no tool ${name}`, { isError: true });
    try {
      const out = entry.run(args, ctx);
      if (out && typeof out.then === "function") return out.then(normalizeResult, failure);
      return normalizeResult(out);
    } catch (error) {
      return failure(error);
    }
  }

  /**
   * Run each tool once with each of its declaration's `warmUp` arguments, as the component is built.
   * componentize-js runs the component's modules once at build time and every instance starts from the memory
   * they left; SpiderMonkey compiles a function, a regular expression, a property access path when it first
   * meets it. What a warm-up call compiles is there from the start in every fresh instance instead of compiled
   * again in each (a quarter of `js_word_count`'s fresh call; docs/performance.md). The call has no host: the
   * workspace is `/`, files, processes and nested calls are unavailable (using them is an error result, which
   * is ignored), and what it leaves in the module's own variables every instance starts with.
   */
  warmUp() {
    for (const { declaration } of this.tools.values()) {
      for (const args of declaration.warmUp ?? []) {
        const out = this.run(declaration.name, args, new Context({ host: null, fs: null, cwd: "/" }));
        if (out && typeof out.then === "function") out.then(toWit, () => {});
        else toWit(out);
      }
    }
  }

  /** Run the `tool_call` hook (the export, and unit tests): its decision, a throw becoming `fail(…)` with pi's
   * text (`_beforeToolCall`: an `Error`'s message, anything else thrown in pi's wrapping words). */
  decide(name, args) {
    try {
      return this.toolCall ? this.toolCall(name, args) ?? null : null;
    } catch (error) {
      return fail(error instanceof Error ? error.message : `Extension failed, blocking execution: ${String(error)}`);
    }
  }

  /** Run the `tool_result` hook (the export, and unit tests): nothing, a string or a `result(…)`, a throw
   * becoming `fail(…)` with pi's text (the runner's `emitToolResult`: the message, or the value as a string). */
  change(name, args, seen) {
    try {
      return this.toolResult ? this.toolResult(name, args, seen) ?? null : null;
    } catch (error) {
      console.error(`${this.name}: the tool_result hook failed: ${error?.stack ?? error}`);
      return fail(error instanceof Error ? error.message : String(error));
    }
  }

  metadata() {
    return { name: this.name, version: this.version, description: this.description, capabilities: this.capabilities };
  }

  spec({ declaration: d }) {
    const hints = d.annotations;
    return {
      name: d.name,
      label: d.label ?? d.name,
      description: d.description,
      parameters: JSON.stringify(d.parameters),
      outputSchema: json(d.outputSchema),
      promptSnippet: d.promptSnippet,
      promptGuidelines: d.promptGuidelines ?? [],
      executionMode: d.executionMode,
      exposure: d.exposure ?? "direct",
      annotations: hints && {
        readOnly: hints.readOnly,
        destructive: hints.destructive,
        idempotent: hints.idempotent,
        openWorld: hints.openWorld,
      },
      rendersOwnFrame: false,
      preparesArguments: false,
      mutatesFiles: false,
      preparesLoadout: false,
      longRunning: d.longRunning,
    };
  }

  /** The object to export as `tool` (world `tool-plugin`), given the host's imports `{host, process,
   * preopens}` (process and preopens may be left out by plugins that do not use them). */
  exports({ host, process = null, preopens = null }) {
    const plugin = this;
    const context = () => {
      const ctx = new Context({ host, process, fs: null, cwd: () => host.cwd() });
      if (preopens) ctx.fs = new WasiFs(host, preopens, () => ctx.cwd);
      return ctx;
    };
    // An error result is the model's to read, not a fault of the host: detail for the log, with its message
    // (SpiderMonkey's stack has only the frames).
    const finish = (ctx, r, name) => {
      if (r.isError && r.details?.stack) ctx.log(`${name} failed: ${r.text}\n${r.details.stack}`, "debug");
      return toWit(r);
    };
    plugin.warmUp();
    return {
      metadata: () => plugin.metadata(),
      listTools: () => [...plugin.tools.values()].map((entry) => plugin.spec(entry)),
      execute(name, _callId, argumentsJson) {
        const ctx = context();
        const out = plugin.run(name, JSON.parse(argumentsJson), ctx);
        return out && typeof out.then === "function" ? out.then((r) => finish(ctx, r, name)) : finish(ctx, out, name);
      },
      prepareArguments: () => undefined,
      mutatedPath: () => undefined,
      prepareLoadout: () => undefined,
      // pi's renderCall / renderResult: the declaration's own, when it has them (a throw leaves it to the UI).
      renderCall(name, argumentsJson) {
        const render = plugin.tools.get(name)?.declaration.renderCall;
        if (!render) return undefined;
        try {
          return render(JSON.parse(argumentsJson)) ?? undefined;
        } catch (error) {
          console.error(`${plugin.name}: renderCall of ${name} failed: ${error?.stack ?? error}`);
          return undefined;
        }
      },
      renderResult(name, r, expanded, partial) {
        const render = plugin.tools.get(name)?.declaration.renderResult;
        if (!render) return undefined;
        const text = r.content
          .filter((c) => c.tag === "text")
          .map((c) => c.val)
          .join("\n");
        const seen = result(text, {
          structured: parseOrNull(r.structuredContent),
          details: parseOrNull(r.details),
          isError: Boolean(r.isError),
        });
        try {
          return render(seen, { expanded, partial }) ?? undefined;
        } catch (error) {
          console.error(`${plugin.name}: renderResult of ${name} failed: ${error?.stack ?? error}`);
          return undefined;
        }
      },
    };
  }

  /** The object to export as `handler` (world `handler-plugin`). */
  handlerExports() {
    const plugin = this;
    return {
      metadata: () => plugin.metadata(),
      toolCall(event) {
        const decision = plugin.decide(event.toolName, JSON.parse(event.input));
        // componentize-js returns a thrown string as the export's `err`.
        if (decision?.kind === "fail") throw decision.message;
        if (decision?.kind === "block") {
          return { tag: "block", val: { reason: decision.reason, terminate: Boolean(decision.terminate) } };
        }
        if (decision?.kind === "rewrite") return { tag: "rewrite", val: JSON.stringify(decision.args) };
        return { tag: "allow" };
      },
      toolResult(event) {
        if (!plugin.toolResult) return undefined;
        const text = event.content
          .filter((c) => c.tag === "text")
          .map((c) => c.val)
          .join("\n");
        const details = parseOrNull(event.details);
        // The other blocks (images, audio, embedded resources), as `image(…)`, `audio(…)`, `embedded(…)` make them.
        const blocks = event.content.filter((c) => c.tag !== "text");
        const changed = plugin.change(event.toolName, JSON.parse(event.input), {
          text,
          details,
          isError: event.isError,
          blocks,
        });
        if (changed?.kind === "fail") throw changed.message;
        if (changed == null) return undefined;
        const r = typeof changed === "string" ? result(changed, { details, isError: event.isError }) : changed;
        return {
          content: toWit(r).content,
          details: json(r.details),
          isError: Boolean(r.isError),
        };
      },
    };
  }
}

/** The regular expression of an RFC 6570 template: `{x}` one path segment, `{+x}` any text, as named groups. */
function templatePattern(template) {
  let source = "";
  let at = 0;
  for (const found of template.matchAll(/\{(\+?)([A-Za-z0-9_]+)\}/g)) {
    source += template.slice(at, found.index).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    source += `(?<${found[2]}>${found[1] ? ".+" : "[^/]+"})`;
    at = found.index + found[0].length;
  }
  source += template.slice(at).replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`^${source}$`);
}
