"""The Python and JavaScript examples per call, side by side in one run: batches of 200 and of 1000 sequential
calls of `py_todos` (componentize-py, scanning an empty directory) and of `js_word_count` (componentize-js, three
words), each with a fresh instance per call and with `instance = "reuse"`, N alternating rounds. It prints the
median batch of 200 (the `timing` line `exec --timing` writes: first tool event to last result), that batch per
call, and the marginal cost of a call: (median batch of 1000 - median batch of 200) / 800. The marginal figure
leaves out what a batch pays once (the first call links the component and, with reuse, instantiates it: about
1.5 ms, 8 µs a call of a batch of 200), so it is the steady cost of one more call.

    cargo test -p toolwright-tests --test polyglot   # builds the examples under $CARGO_TARGET_DIR/tmp/polyglot/
    cargo build --release -p toolwright-cli
    python3 tests/benches/polyglot_calls.py 5 target/release/toolwright [OTHER_TOOLWRIGHT ...]

More than one binary runs each case with each binary in turn (before and after a change). The examples are
taken from `$CARGO_TARGET_DIR/tmp/polyglot` (default `target/tmp/polyglot`): to compare two builds of the examples
(an SDK change), copy that directory aside and point `CARGO_TARGET_DIR` at its parent's parent for one run.
Figures go to docs/performance.md.
"""
import json, os, shutil, statistics, subprocess, sys, tempfile

SIZES = (200, 1000)
rounds = int(sys.argv[1])
binaries = [os.path.realpath(b) for b in sys.argv[2:]]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
built = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target")), "tmp", "polyglot")
examples = {
    "py": ("py-todos", os.path.join(built, "py-todos", "py_todos.wasm"), "py_todos", {}),
    "js": ("js-wordcount", os.path.join(built, "js-wordcount", "js_wordcount.wasm"), "js_word_count",
           {"text": "one two three"}),
}
work = tempfile.mkdtemp()
try:
    workspace = os.path.join(work, "ws")
    os.mkdir(workspace)
    cases = []
    for lang, (plugin, wasm, tool, args) in examples.items():
        if not os.path.exists(wasm):
            sys.exit(f"{wasm} is missing: `cargo test -p toolwright-tests --test polyglot` builds it")
        plugins = os.path.join(work, lang)
        os.mkdir(plugins)
        shutil.copy(wasm, plugins)
        batches = {}
        for size in SIZES:
            batches[size] = os.path.join(work, f"{lang}{size}.json")
            with open(batches[size], "w") as f:
                json.dump({"mode": "sequential",
                           "toolCalls": [{"id": f"c{i}", "name": tool, "arguments": args} for i in range(size)]}, f)
        for instance in ("fresh", "reuse"):
            policy = os.path.join(work, f"{lang}-{instance}.toml")
            with open(policy, "w") as f:
                f.write(f'[plugins.{plugin}]\nread = ["."]\n' + ('instance = "reuse"\n' if instance == "reuse" else ""))
            cases.append((f"{lang} {instance}", batches, plugins, policy))
    cache = os.path.join(work, "cache")
    results = {(case[0], b, size): [] for case in cases for b in binaries for size in SIZES}

    def run(binary, batch, calls, plugins, policy):
        p = subprocess.run([binary, "exec", batch, "--json", "--no-default-plugins", "--plugins", plugins,
                            "--policy", policy, "--cwd", workspace, "--cache-dir", cache, "--timing"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ends = [json.loads(l) for l in p.stdout.splitlines() if '"tool_execution_end"' in l]
        timing = [json.loads(l) for l in p.stderr.splitlines() if '"timing"' in l]
        if p.returncode != 0 or len(ends) != calls or any(e.get("isError") for e in ends) or not timing:
            sys.exit(f"FAILED {binary} {batch} {policy}: rc {p.returncode}\n{p.stderr[-800:]}")
        return timing[-1]["batchMs"]

    for name, batches, plugins, policy in cases:  # compile into the cache, untimed
        run(binaries[0], batches[SIZES[0]], SIZES[0], plugins, policy)
    for _ in range(rounds):
        for name, batches, plugins, policy in cases:
            for size in SIZES:
                for binary in binaries:
                    results[(name, binary, size)].append(run(binary, batches[size], size, plugins, policy))
    small, large = SIZES
    print(f"| case | binary | batch of {small} (median, min–max) | per call | marginal call |\n|---|---|---|---|---|")
    for name, *_ in cases:
        for binary in binaries:
            times = results[(name, binary, small)]
            median = statistics.median(times)
            marginal = (statistics.median(results[(name, binary, large)]) - median) / (large - small)
            print(f"| {name} | {binary} | {median:.1f} ms ({min(times):.1f}–{max(times):.1f}) | "
                  f"{median / small * 1000:.0f} µs | {marginal * 1000:.0f} µs |")
finally:
    shutil.rmtree(work)
