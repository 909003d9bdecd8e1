"""Side by side like alt_exec.py, with the CPU time of each run: `perf stat -x, -e task-clock` around each
command; prints the median batch time and CPU time.

    python3 tests/benches/cpu_exec.py 11 "CMD A" "CMD B" ...
"""
import subprocess, sys, statistics, re, json, os
n=int(sys.argv[1]); cmds=sys.argv[2:]
res={c:([],[]) for c in cmds}
for _ in range(n):
    for c in cmds:
        p=subprocess.run("perf stat -x, -e task-clock "+c, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        b=None; cpu=None
        for l in p.stderr.splitlines():
            if '"timing"' in l: b=json.loads(l)["batchMs"]
            elif 'task-clock' in l: cpu=float(l.split(',')[0])
        res[c][0].append(b); res[c][1].append(cpu)
for c in cmds:
    b,cpu=res[c]
    print(f"batch {statistics.median(b):7.1f} ms  cpu {statistics.median(cpu):7.1f} ms (max {max(cpu):.0f}) | {c}")
