#!/usr/bin/env python3
"""A start with an installed plugin that is not in the cache, side by side: time to the first result and to exit.

    python3 tests/benches/background_compile.py TOOLWRIGHT PLUGIN.wasm [RUNS]

Installs PLUGIN.wasm with `toolwright plugins add` into a HOME of its own, then alternates, RUNS times (default 5),
a batch of one `ls` with a fresh `--cache-dir` each run: A with the plugin's `toolwright.lock` entry (it compiles
in the background), B with the lockfile removed (it is compiled before the batch, as every plugin was before
background compiles). Prints the medians of the first result, the end of stdout and the exit (docs/performance.md,
"Starts and loads").
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    binary, plugin = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    root = tempfile.mkdtemp()
    env = dict(os.environ, HOME=root + "/home", XDG_CONFIG_HOME=root + "/home/.config")
    os.makedirs(root + "/ws")
    with open(root + "/ls.json", "w") as f:
        f.write('{"toolCalls":[{"id":"1","name":"ls","arguments":{}}]}')
    subprocess.run([binary, "plugins", "add", plugin, "--cache-dir", root + "/warm"], env=env, check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    lock = root + "/home/.config/toolwright/toolwright.lock"
    approved = open(lock).read()
    found = {"A": [], "B": []}
    for _ in range(runs):
        for variant in ("A", "B"):
            if variant == "A":
                with open(lock, "w") as f:
                    f.write(approved)
            else:
                os.remove(lock)
            cache = tempfile.mkdtemp()
            started = time.monotonic()
            child = subprocess.Popen([binary, "exec", root + "/ls.json", "--json", "--cwd", root + "/ws",
                                      "--cache-dir", cache], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, env=env, text=True)
            first = None
            for line in child.stdout:
                if first is None and "tool_execution_end" in line:
                    first = time.monotonic() - started
            ended = time.monotonic() - started
            child.wait()
            found[variant].append((first, time.monotonic() - started, ended))
            shutil.rmtree(cache)
    shutil.rmtree(root)
    for variant, label in (("A", "installed, compiled in the background"), ("B", "no lock entry, compiled first")):
        rows = found[variant]
        print("%s (%s): first result %.1f ms, end of stdout %.1f ms, whole process %.1f ms (medians of %d)" % (
            variant, label, statistics.median(r[0] for r in rows) * 1000,
            statistics.median(r[2] for r in rows) * 1000, statistics.median(r[1] for r in rows) * 1000, len(rows)))


if __name__ == "__main__":
    main()
