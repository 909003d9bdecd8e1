"""The workspace as MCP resources: `toolwright mcp` on stdio lists a workspace of 10 000 files (100 directories of
100), page by page (500 a page, 20 pages), as a client pages through `resources/list`. Each binary given takes its
turn in every round, so that all meet the same machine; it prints, per binary, the median and 10th-90th
percentiles of the first page and of the whole listing.

    cargo build --release -p toolwright-cli
    python3 tests/benches/mcp_resources_list.py 20 target/release/toolwright [OLD_BINARY …]

The first argument is the number of rounds (after one untimed). Figures go to docs/performance.md ("MCP
transports").
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

rounds = int(sys.argv[1])
binaries = [os.path.realpath(b) for b in sys.argv[2:]]

workspace = tempfile.mkdtemp(prefix="tw-resources-")
for d in range(100):
    os.makedirs(os.path.join(workspace, f"d{d:03}"))
    for f in range(100):
        with open(os.path.join(workspace, f"d{d:03}", f"f{f:03}.txt"), "w") as out:
            out.write("x")


def listing(binary):
    """(first page, whole listing) in seconds, for one server started with `binary`."""
    server = subprocess.Popen(
        [binary, "mcp", "--no-default-plugins", "--no-default-mcp", "--cwd", workspace],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def ask(number, method, params):
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}) + "\n")
        server.stdin.flush()
        while True:
            message = json.loads(server.stdout.readline())
            if message.get("id") == number:
                return message["result"]

    ask(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "bench", "version": "1"}})
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    started = time.perf_counter()
    cursor, number, listed, first = None, 0, 0, None
    while True:
        number += 1
        page = ask(number, "resources/list", {"cursor": cursor} if cursor else {})
        listed += len(page["resources"])
        first = first or time.perf_counter() - started
        cursor = page.get("nextCursor")
        if not cursor:
            break
    whole = time.perf_counter() - started
    server.kill()
    server.wait()
    assert listed == 10_000, listed
    return first, whole


try:
    for binary in binaries:
        listing(binary)
    times = {binary: [] for binary in binaries}
    for _ in range(rounds):
        for binary in binaries:
            times[binary].append(listing(binary))

    def summary(values):
        values = sorted(values)
        cut = max(1, len(values) // 10)
        return f"{statistics.median(values) * 1000:.1f} ms ({values[cut - 1] * 1000:.1f}-{values[-cut] * 1000:.1f})"

    print("| binary | first page | 20 pages (10 000 files) |")
    print("|---|---|---|")
    for binary in binaries:
        firsts = [t[0] for t in times[binary]]
        wholes = [t[1] for t in times[binary]]
        print(f"| {binary} | {summary(firsts)} | {summary(wholes)} |")
finally:
    shutil.rmtree(workspace)
