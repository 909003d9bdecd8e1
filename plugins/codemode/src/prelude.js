// Toolwright's codemode prelude: evaluated in a fresh Boa context before the script. It builds the script's
// globals (`tools`, `ALL_TOOLS`, `text`, `console`, `exit`) and `__codemode`, through which the host side
// (src/engine.rs) runs the script, collects the tool calls it waits on, settles them, and reads the output.
// Everything crosses as JSON text; the host never touches script objects.
(function (toolsJson) {
  "use strict";
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const MAX_OUTPUT_CHARS = 16 * 1024 * 1024;
  const MAX_OUTPUT_ITEMS = 100000;
  const EXIT = Object.freeze({});
  const state = { done: false, ok: false, value: undefined, error: undefined };
  const output = [];
  let outputChars = 0;
  let pending = [];
  const waiting = new Map();
  let nextId = 1;

  function finish(ok, value, error) {
    if (state.done) return;
    state.done = true;
    state.ok = ok;
    state.value = value;
    state.error = error;
  }

  // `Name: message` for errors; other thrown values as text.
  function errorHead(error) {
    if (error instanceof ErrorCtor) {
      const name = String(error.name);
      return error.message ? name + ": " + String(error.message) : name;
    }
    return "Error: " + format(error);
  }

  function format(value) {
    if (typeof value === "string") return value;
    if (value instanceof ErrorCtor) return errorHead(value);
    if (typeof value === "number") return String(value);
    try {
      const json = stringify(value);
      return json === undefined ? String(value) : json;
    } catch (e) {
      return String(value);
    }
  }

  function outputText(value) {
    if (value === undefined || value === null || (typeof value !== "object" && typeof value !== "function")) {
      return String(value);
    }
    const json = stringify(value);
    return json === undefined ? String(value) : json;
  }

  function emit(kind, text) {
    if (state.done) return;
    outputChars += text.length;
    if (outputChars > MAX_OUTPUT_CHARS || output.length + 1 > MAX_OUTPUT_ITEMS) {
      const error = new RangeError(
        "script output exceeded the limit of " + MAX_OUTPUT_CHARS + " characters or " + MAX_OUTPUT_ITEMS +
          " text(), image(), and console calls. Print a summary instead, or write large data to a file with a tool.",
      );
      finish(false, undefined, errorHead(error));
      throw error;
    }
    output.push({ kind, text });
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

  const console = {};
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    console[level] = (...args) => emit("console", args.map(format).join(" "));
  }
  Object.freeze(console);

  function exit() {
    finish(true, undefined, undefined);
    throw EXIT;
  }

  function caller(name) {
    return (args) =>
      new Promise((resolve, reject) => {
        let json;
        try {
          json = args === undefined ? "{}" : stringify(args);
        } catch (error) {
          reject(error);
          return;
        }
        const id = nextId++;
        waiting.set(id, { resolve, reject });
        pending.push({ id, name, args: json === undefined ? "{}" : json });
      });
  }

  const tools = Object.create(null);
  const allTools = [];
  for (const { name, id, description } of parse(toolsJson)) {
    const fn = caller(name);
    if (!(id in tools)) {
      tools[id] = fn;
      allTools.push(Object.freeze({ name: id, description }));
    }
    if (!(name in tools)) tools[name] = fn;
  }
  Object.freeze(tools);
  Object.freeze(allTools);

  // A missing member throws an error naming close matches (pi's wording).
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
      message += " ALL_TOOLS lists every tool.";
      message += ' Check for a member with "' + property + '" in tools.';
      throw new TypeErrorCtor(message);
    },
  });

  for (const [name, value] of [["tools", toolsProxy], ["ALL_TOOLS", allTools], ["console", console],
                               ["text", text], ["exit", exit]]) {
    Object.defineProperty(globalThis, name, { value, enumerable: true });
  }

  function settled(value) {
    if (state.done) return;
    let json;
    try {
      json = value === undefined ? undefined : typeof value === "string" ? value : stringify(value);
      if (json === undefined && value !== undefined) json = String(value);
    } catch (error) {
      finish(false, undefined, errorHead(error));
      return;
    }
    finish(true, json, undefined);
  }

  function failed(error) {
    if (error !== EXIT) finish(false, undefined, errorHead(error));
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
        promise.then(settled, failed);
      },
      fail(message) {
        finish(false, undefined, message);
      },
      poll() {
        const calls = pending;
        pending = [];
        return stringify({ done: state.done, ok: state.ok, value: state.value, error: state.error, calls,
                           waiting: waiting.size });
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
          value = parse(payload);
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
