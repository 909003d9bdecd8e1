// Toolwright's codemode prelude: evaluated in a fresh Boa context before the script. It builds the script's
// globals (pi 1.6.0's: `tools`, `ALL_TOOLS`, `text`, `image`, `console`, `exit`, `store`, `load`, `searchTools`,
// `describeTool`, `describeNamespace`) and `__codemode`, through which src/engine.rs runs the script, settles
// what it waits on, and reads how it ended. Three native functions, taken off the global object before the script
// runs, reach the engine: `__tw_emit(kind, text, mimeType)` hands an output item to the host as it is made,
// `__tw_call(id, name, argsJson)` starts a nested tool call at once (pi dispatches on call, not on await), and
// `__tw_global(id, name, argsJson)` asks for a discovery global. Everything crosses as JSON text.
(function (toolsJson, storeJson) {
  "use strict";
  const hostEmit = globalThis.__tw_emit;
  const hostCall = globalThis.__tw_call;
  const hostGlobal = globalThis.__tw_global;
  delete globalThis.__tw_emit;
  delete globalThis.__tw_call;
  delete globalThis.__tw_global;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const RangeErrorCtor = RangeError;
  const promiseThen = Promise.prototype.then;
  const MAX_OUTPUT_CHARS = 16 * 1024 * 1024;
  const MAX_OUTPUT_ITEMS = 100000;
  const MAX_STORE_VALUE_CHARS = 256 * 1024;
  const MAX_STORE_TOTAL_CHARS = 1024 * 1024;
  const IMAGE_EXPECTS =
    'image expects a non-empty image URL string, an object with image_url, or an image block { type: "image", data, mimeType }';
  // Thrown by exit() to unwind the script after it reported success.
  const EXIT = Object.freeze({});
  const state = { done: false, ok: false, value: undefined, error: undefined, writes: undefined };
  const output = [];
  let outputChars = 0;
  const waiting = new Map();
  let nextId = 1;

  function finish(ok, value, error, writes) {
    if (state.done) return;
    state.done = true;
    state.ok = ok;
    state.value = value;
    state.error = error;
    state.writes = writes;
  }

  // `Name: message` for errors (the engine's stack frames are not shown); other thrown values as text.
  function errorHead(error) {
    if (error instanceof ErrorCtor) {
      const name = String(error.name);
      return error.message ? name + ": " + String(error.message) : name;
    }
    return "Error: " + format(error);
  }

  function describe(error) {
    try {
      return errorHead(error);
    } catch (e) {
      return "Error: The script threw a value that cannot be described";
    }
  }

  function format(value) {
    if (typeof value === "string") return value;
    if (value instanceof ErrorCtor) return errorHead(value);
    // JSON turns NaN and Infinity into "null".
    if (typeof value === "number") return String(value);
    try {
      const json = stringify(value);
      return json === undefined ? String(value) : json;
    } catch (e) {
      return String(value);
    }
  }

  // Primitives become their string form, everything else JSON.
  function outputText(value) {
    if (value === undefined || value === null || (typeof value !== "object" && typeof value !== "function")) {
      return String(value);
    }
    const json = stringify(value);
    return json === undefined ? String(value) : json;
  }

  // Past the output limits the script fails: the error is its ending, so catching it does not resume output.
  function emit(kind, text, mimeType) {
    if (state.done) return;
    outputChars += text.length;
    if (outputChars > MAX_OUTPUT_CHARS || output.length + 1 > MAX_OUTPUT_ITEMS) {
      const error = new RangeErrorCtor(
        "script output exceeded the limit of " + MAX_OUTPUT_CHARS + " characters or " + MAX_OUTPUT_ITEMS +
          " text(), image(), and console calls. Print a summary instead, or write large data to a file with a tool.",
      );
      finish(false, undefined, errorHead(error));
      throw error;
    }
    if (kind === "image") output.push({ kind, data: text, mimeType });
    else output.push({ kind, text });
    hostEmit(kind, text, mimeType);
  }

  function text(value) {
    let rendered;
    try {
      rendered = outputText(value);
    } catch (error) {
      throw new TypeErrorCtor(error instanceof ErrorCtor ? error.message : String(error));
    }
    emit("text", rendered);
  }

  function imageUrl(value) {
    if (typeof value === "string") return value;
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw new TypeErrorCtor(IMAGE_EXPECTS);
    if (value.image_url !== undefined) {
      if (typeof value.image_url !== "string") throw new TypeErrorCtor(IMAGE_EXPECTS);
      return value.image_url;
    }
    if (typeof value.type !== "string") throw new TypeErrorCtor(IMAGE_EXPECTS);
    if (value.type !== "image") throw new TypeErrorCtor('image only accepts image blocks, got "' + value.type + '"');
    if (typeof value.data !== "string" || value.data === "") throw new TypeErrorCtor("image expected image block data");
    if (value.data.toLowerCase().startsWith("data:")) return value.data;
    return "data:;base64," + value.data;
  }

  // The base64 of each accepted format's signature (PNG, JPEG but not JPEG-LS, GIF, RIFF....WEBP) is a prefix
  // of the data's base64: the signatures start at byte 0.
  const SIGNATURES = [
    ["image/png", /^iVBORw0KGg/],
    ["image/jpeg", /^[/]9j[/](?!9)/],
    ["image/gif", /^R0lGOD[dl]h/],
    ["image/webp", /^UklG.{8}RUJQ/],
  ];

  function image(value) {
    const url = imageUrl(value);
    if (url === "") throw new TypeErrorCtor(IMAGE_EXPECTS);
    const colon = url.indexOf(":");
    const scheme = colon === -1 ? "" : url.slice(0, colon).toLowerCase();
    if (scheme === "http" || scheme === "https") {
      throw new TypeErrorCtor("remote image URLs are not supported in tool outputs. Pass a base64 data URI instead");
    }
    const comma = url.indexOf(",");
    const header = comma === -1 ? [] : url.slice(colon + 1, comma).split(";");
    if (scheme !== "data" || comma === -1 || header.slice(1).every((part) => part.toLowerCase() !== "base64")) {
      throw new TypeErrorCtor("invalid image output. Pass a base64 data URI instead");
    }
    // Wrapped base64 loses its line breaks; the declared type gives way to the detected one.
    const data = url.slice(comma + 1).replace(/\s+/g, "");
    if (data.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(data)) {
      throw new TypeErrorCtor("invalid image output. The image data is not valid base64 (truncated or corrupted?)");
    }
    const head = data.slice(0, 16);
    const signature = SIGNATURES.find(([, pattern]) => pattern.test(head));
    if (!signature) throw new TypeErrorCtor("invalid image output. The image data is not a PNG, JPEG, GIF, or WebP image");
    emit("image", data, signature[0]);
  }

  const console = {};
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    console[level] = (...args) => emit("console", args.map(format).join(" "));
  }
  Object.freeze(console);

  // store() and load(): synchronous, on a snapshot of the session's store (key -> JSON text); the keys written
  // are reported when the script succeeds. Sizes count key and JSON characters.
  const stored = new Map(Object.entries(parse(storeJson)));
  const writes = new Map();
  let storedChars = 0;
  for (const [key, json] of stored) storedChars += key.length + json.length;
  const STORE_HINT =
    "store() is for small state such as IDs or summaries. Show images with image(), keep large data in variables, or write it to a file with a tool.";

  function checkKey(name, key) {
    if (typeof key !== "string") throw new TypeErrorCtor(name + "() key must be a string");
  }

  function store(key, value) {
    checkKey("store", key);
    const previous = stored.has(key) ? key.length + stored.get(key).length : 0;
    if (value === undefined) {
      stored.delete(key);
      storedChars -= previous;
      writes.set(key, undefined);
      return;
    }
    let json;
    try {
      json = stringify(value);
    } catch (error) {
      throw new TypeErrorCtor("store(" + stringify(key) + ") value is not JSON-serializable: " + format(error));
    }
    if (json === undefined) throw new TypeErrorCtor("store(" + stringify(key) + ") value is not JSON-serializable");
    if (json.length > MAX_STORE_VALUE_CHARS) {
      throw new RangeErrorCtor(
        "store(" + stringify(key) + ") value has " + json.length + " characters of JSON, more than the limit of " +
          MAX_STORE_VALUE_CHARS + ". " + STORE_HINT,
      );
    }
    const next = storedChars - previous + key.length + json.length;
    if (next > MAX_STORE_TOTAL_CHARS) {
      throw new RangeErrorCtor(
        "store is full: stored values would exceed " + MAX_STORE_TOTAL_CHARS +
          " characters of JSON. Delete keys with store(key, undefined). " + STORE_HINT,
      );
    }
    stored.set(key, json);
    storedChars = next;
    writes.set(key, json);
  }

  function load(key) {
    checkKey("load", key);
    const json = stored.get(key);
    return json === undefined ? undefined : parse(json);
  }

  function writtenKeys() {
    const entries = [];
    for (const [key, json] of writes) entries.push(json === undefined ? [key] : [key, json]);
    return stringify(entries);
  }

  function exit() {
    finish(true, undefined, undefined, writtenKeys());
    throw EXIT;
  }

  // A call (or a discovery global) is a promise the engine settles; the host starts a tool call at once.
  function caller(start, name, spread) {
    return (...args) =>
      new Promise((resolve, reject) => {
        let json;
        try {
          const value = spread ? args : args[0];
          json = value === undefined ? undefined : stringify(value);
        } catch (error) {
          reject(error);
          return;
        }
        const id = nextId++;
        waiting.set(id, { resolve, reject });
        start(id, name, json);
      });
  }

  const tools = Object.create(null);
  const allTools = [];
  for (const { name, id, description } of parse(toolsJson)) {
    const fn = caller(hostCall, name, false);
    // The first tool wins when two names make the same identifier.
    if (!(id in tools)) {
      tools[id] = fn;
      allTools.push(Object.freeze({ name: id, description }));
    }
    if (!(name in tools)) tools[name] = fn;
  }
  Object.freeze(tools);
  Object.freeze(allTools);

  // Reading a member that does not exist throws an error naming close matches (pi's wording), instead of a
  // later "not a function"; `in` checks still work.
  const comparable = (name) => name.toLowerCase().replace(/[^a-z0-9]/g, "");
  const names = allTools.map((tool) => tool.name);
  const toolsProxy = new Proxy(tools, {
    get(object, property, receiver) {
      if (typeof property !== "string" || property in object || property in Object.prototype ||
          property === "then" || property === "toJSON") {
        return Reflect.get(object, property, receiver);
      }
      const wanted = comparable(property);
      const exact = names.filter((name) => comparable(name) === wanted);
      const close = exact.length > 0 ? exact
        : names.filter((name) => wanted && (comparable(name).includes(wanted) || wanted.includes(comparable(name))));
      let message = "tools." + property + " does not exist.";
      if (close.length > 0) message += " Did you mean " + close.slice(0, 5).map((name) => "tools." + name).join(", ") + "?";
      else if (names.length <= 20) message += " Available: " + names.join(", ") + ".";
      message += " ALL_TOOLS lists every tool; searchTools(query) finds tools by topic.";
      message += ' Check for a member with "' + property + '" in tools.';
      throw new TypeErrorCtor(message);
    },
  });

  const globals = [
    ["tools", toolsProxy], ["ALL_TOOLS", allTools], ["console", console], ["text", text], ["image", image],
    ["exit", exit], ["store", store], ["load", load],
    ["searchTools", caller(hostGlobal, "searchTools", true)],
    ["describeTool", caller(hostGlobal, "describeTool", true)],
    ["describeNamespace", caller(hostGlobal, "describeNamespace", true)],
  ];
  for (const [name, value] of globals) Object.defineProperty(globalThis, name, { value, enumerable: true });

  function settled(value) {
    if (state.done) return;
    let json;
    try {
      json = value === undefined ? undefined : typeof value === "string" ? value : stringify(value);
      if (json === undefined && value !== undefined) json = String(value);
    } catch (error) {
      finish(false, undefined, describe(error));
      return;
    }
    finish(true, json, undefined, writtenKeys());
  }

  function failed(error) {
    if (error !== EXIT) finish(false, undefined, describe(error));
  }

  Object.defineProperty(globalThis, "__codemode", {
    value: Object.freeze({
      // Compile the script as the body of an async function (top-level `await` and `return` work) and start it.
      start(code) {
        let promise;
        try {
          const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
          promise = new AsyncFunction("tools", "console", code)(toolsProxy, console);
        } catch (error) {
          failed(error);
          return;
        }
        promiseThen.call(promise, settled, failed);
      },
      poll() {
        return stringify({ done: state.done, ok: state.ok, value: state.value, error: state.error,
                           writes: state.writes, waiting: waiting.size });
      },
      settle(id, ok, payload) {
        const entry = waiting.get(id);
        if (!entry) return;
        waiting.delete(id);
        if (!ok) {
          entry.reject(new ErrorCtor(payload));
          return;
        }
        let value;
        try {
          value = payload === undefined ? undefined : parse(payload);
        } catch (error) {
          entry.reject(error);
          return;
        }
        entry.resolve(value);
      },
      output() {
        return stringify(output);
      },
    }),
  });
})
