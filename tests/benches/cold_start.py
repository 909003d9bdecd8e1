#!/usr/bin/env python3
"""`toolwright mcp` started on a cache without compiled code, a handler installed: time to `initialize`, to the first
`tools/list` (and which plugins' tools it lists), and to the first call (which waits for the handler).

    python3 tests/benches/cold_start.py TOOLWRIGHT HANDLER.wasm [PLUGIN.wasm …] [--runs N] [--initialize-only]

Installs every file with `toolwright plugins add` into a HOME of its own, then alternates, N times (default 5), the
cases, each on a fresh `--cache-dir`:

- `empty`: nothing cached (a new machine);
- `described`: the plugins' descriptions cached, no compiled code (`toolwright cache clear`, a new engine);
- `empty, --watch-plugins 0`: nothing cached, every plugin loaded before the server answers (no background
  compiles: what every start paid for a handler before they existed).

The first call is `ls`: it waits for the handler, which is in every call's path. Prints the medians, and for
the first `tools/list` the plugin tools it held (docs/performance.md, "Starts and loads"). `--initialize-only`
runs the `empty` case alone and stops each server at its answer to `initialize` (no compile then runs on, so
rounds do not slow each other).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BUILTINS = {"read", "bash", "edit", "write", "grep", "find", "ls", "powershell", "tool_search", "codemode"}


class Server:
    def __init__(self, argv, env):
        self.started = time.monotonic()
        self.child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)

    def send(self, message):
        self.child.stdin.write(json.dumps(message) + "\n")
        self.child.stdin.flush()

    def response(self, id):
        for line in self.child.stdout:
            message = json.loads(line)
            if message.get("id") == id:
                return message, time.monotonic()
        raise RuntimeError("the server closed its output")

    def close(self):
        self.child.kill()
        self.child.wait()


def one_start(binary, env, root, cache, extra, initialize_only=False):
    server = Server([binary, "mcp", "--cwd", root + "/ws", "--cache-dir", cache] + extra, env)
    server.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    _, initialized = server.response(0)
    if initialize_only:
        server.close()
        return (initialized - server.started, 0, 0, [])
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    asked = time.monotonic()
    server.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    listed, at = server.response(1)
    tools = sorted(t["name"] for t in listed["result"]["tools"] if t["name"] not in BUILTINS)
    called_at = time.monotonic()
    server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ls", "arguments": {}}})
    called, done = server.response(2)
    server.close()
    assert not called["result"].get("isError"), called
    return (initialized - server.started, at - asked, done - called_at, tools)


def main():
    args = sys.argv[1:]
    runs = 5
    initialize_only = "--initialize-only" in args
    if initialize_only:
        args.remove("--initialize-only")
    if "--runs" in args:
        at = args.index("--runs")
        runs = int(args[at + 1])
        del args[at:at + 2]
    binary, plugins = os.path.abspath(args[0]), [os.path.abspath(p) for p in args[1:]]
    root = tempfile.mkdtemp()
    env = dict(os.environ, HOME=root + "/home", XDG_CONFIG_HOME=root + "/home/.config")
    env.pop("TOOLWRIGHT_LOG", None)
    os.makedirs(root + "/ws")
    warm = root + "/warm"
    for plugin in plugins:
        subprocess.run([binary, "plugins", "add", plugin, "--cache-dir", warm], env=env, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    cases = {"empty": [], "described": [], "empty, --watch-plugins 0": []}
    if initialize_only:
        cases = {"empty": []}
    for _ in range(runs):
        for case, rows in cases.items():
            cache = tempfile.mkdtemp()
            if case == "described":
                shutil.copytree(warm + "/described", cache + "/described")
            extra = ["--watch-plugins", "0"] if "watch" in case else []
            rows.append(one_start(binary, env, root, cache, extra, initialize_only))
            shutil.rmtree(cache)
    shutil.rmtree(root)
    for case, rows in cases.items():
        med = lambda i: statistics.median(r[i] for r in rows) * 1000
        if initialize_only:
            print("%s: initialize %.1f ms (median of %d; %s)" % (
                case, med(0), len(rows), ", ".join("%.1f" % (r[0] * 1000) for r in sorted(rows))))
            continue
        listed = sorted({", ".join(r[3]) or "none" for r in rows})
        print("%s: initialize %.1f ms, first tools/list %.1f ms (plugin tools: %s), first call (ls) %.0f ms"
              " (medians of %d)" % (case, med(0), med(1), " | ".join(listed), med(2), len(rows)))


if __name__ == "__main__":
    main()
