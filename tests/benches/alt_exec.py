"""Side by side: run each `toolwright exec ... --timing` command in turn, N rounds, and print the median batch
time (the `timing` line on stderr: first tool event to last result) and whole-process time of each.

    python3 tests/benches/alt_exec.py 5 "CMD A" "CMD B" ...

Figures go to docs/performance.md with the commands.
"""
import json, subprocess, sys, time, statistics
n = int(sys.argv[1]); cmds = sys.argv[2:]
res = {c: ([], []) for c in cmds}
for _ in range(n):
    for c in cmds:
        t = time.perf_counter()
        p = subprocess.run(c, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        whole = (time.perf_counter() - t) * 1000
        batch = None
        for line in p.stderr.splitlines():
            try:
                e = json.loads(line)
                if e.get("type") == "timing": batch = e["batchMs"]
            except Exception: pass
        if p.returncode != 0 or batch is None:
            print("FAILED", c, p.returncode, p.stderr[-500:]); sys.exit(1)
        res[c][0].append(batch); res[c][1].append(whole)
for c in cmds:
    b, w = res[c]
    print(f"batch median {statistics.median(b):8.1f} ms (min {min(b):.1f} max {max(b):.1f}) | process {statistics.median(w):7.0f} ms | {c}")
