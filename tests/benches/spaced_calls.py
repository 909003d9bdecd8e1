"""The latency of one call that finds the host idle, as an MCP client sees it: `toolwright mcp` on stdio serves
`tools/call` requests sent one at a time, each GAP_MS after the answer to the last (a model's turn is far longer),
and the script times each request to its answer. Cases: `py_todos` (componentize-py) and `js_word_count`
(componentize-js), a fresh instance per call, and the wasm built-in `ls` (`--builtins wasm`) with the native `ls`
beside it. It prints, per case and binary, the median and the 10th-90th percentiles of the round trip, and the
difference to the native `ls` of the same binary (what the sandbox adds over the MCP round trip).

    cargo test -p toolwright-tests --test polyglot   # builds the examples under $CARGO_TARGET_DIR/tmp/polyglot/
    cargo build --release -p toolwright-cli
    python3 tests/benches/spaced_calls.py 200 target/release/toolwright [OTHER_TOOLWRIGHT ...]

The first argument is the number of timed calls per case (after 20 untimed ones); binaries take turns, a case at a
time, so that they meet the same machine. Figures go to docs/performance.md.
"""
import json, os, shutil, statistics, subprocess, sys, tempfile, time

GAP_MS = 20
WARMUP = 20
calls_per_case = int(sys.argv[1])
binaries = [os.path.realpath(b) for b in sys.argv[2:]]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
built = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target")), "tmp", "polyglot")


class Server:
    """`toolwright mcp` on stdio, initialized."""

    def __init__(self, binary, args):
        self.proc = subprocess.Popen([binary, "mcp", "--watch-plugins", "0", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.next = 0
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "spaced_calls", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                sys.exit(f"the server ended while {method} waited")
            message = json.loads(line)
            if message.get("id") == self.next:
                if "error" in message or message["result"].get("isError"):
                    sys.exit(f"{method} failed: {message}")
                return message

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


work = tempfile.mkdtemp()
try:
    ws = os.path.join(work, "ws")
    os.makedirs(os.path.join(ws, "empty"))
    cache = os.path.join(work, "cache")
    cases = [("ls, native", [], "ls", {"path": "empty"}), ("ls, wasm", ["--builtins", "wasm"], "ls", {"path": "empty"})]
    for lang, plugin, wasm, tool, args in [
        ("py", "py-todos", "py_todos.wasm", "py_todos", {"path": "empty"}),
        ("js", "js-wordcount", "js_wordcount.wasm", "js_word_count", {"text": "one two three"}),
    ]:
        source = os.path.join(built, plugin, wasm)
        if not os.path.exists(source):
            sys.exit(f"{source} is missing: `cargo test -p toolwright-tests --test polyglot` builds it")
        plugins = os.path.join(work, lang)
        os.mkdir(plugins)
        shutil.copy(source, plugins)
        policy = os.path.join(work, f"{lang}.toml")
        with open(policy, "w") as f:
            f.write(f'[plugins.{plugin}]\nread = ["."]\n')
        cases.append((f"{tool}, fresh", ["--plugins", plugins, "--policy", policy], tool, args))
    times = {}
    for name, args, tool, arguments in cases:
        for binary in binaries:
            server = Server(binary, ["--no-default-plugins", "--cwd", ws, "--cache-dir", cache, *args])
            took = []
            for i in range(WARMUP + calls_per_case):
                time.sleep(GAP_MS / 1000)
                start = time.perf_counter()
                server.request("tools/call", {"name": tool, "arguments": arguments})
                if i >= WARMUP:
                    took.append((time.perf_counter() - start) * 1e6)
            server.close()
            times[(name, binary)] = took
    print("| case | binary | median round trip | p10–p90 | over native `ls` |\n|---|---|---|---|---|")
    for name, *_ in cases:
        for binary in binaries:
            took = sorted(times[(name, binary)])
            median = statistics.median(took)
            native = statistics.median(times[("ls, native", binary)])
            p10, p90 = took[len(took) // 10], took[len(took) * 9 // 10]
            print(f"| {name} | {binary} | {median:.0f} µs | {p10:.0f}–{p90:.0f} µs | {median - native:+.0f} µs |")
finally:
    shutil.rmtree(work)
