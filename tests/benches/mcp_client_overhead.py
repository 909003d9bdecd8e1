"""What Toolwright adds to an MCP server's tool call: the official Python SDK's client calls the SDK's own server
(`tests/mcp/sdk_server.py`, tool `add`) directly over stdio, and through `toolwright mcp`, which serves the same
server's tool (`mcp__sdk__add`) through its pipeline and its own MCP client, the server confined in its sandbox
(and once more with `sandbox = "off"`). Calls go one at a time; cases take turns, a round of each at a time, so
that they meet the same machine. It prints the start (spawn to the first answer of `add`) and the median and
10th-90th percentiles of one call's round trip per case, and the difference to the direct call.

    cargo build --release -p toolwright-cli
    python3 -m venv /tmp/sdk && /tmp/sdk/bin/pip install mcp==2.3.0
    /tmp/sdk/bin/python tests/benches/mcp_client_overhead.py 200 target/release/toolwright

The first argument is the number of timed calls per case and round (after 20 untimed ones); 5 rounds. Figures go
to docs/performance.md ("MCP servers as tools").
"""
import os
import shutil
import statistics
import sys
import tempfile
import time
import json

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROUNDS = 5
WARMUP = 20
calls = int(sys.argv[1])
toolwright = os.path.realpath(sys.argv[2])
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


async def run_case(params, tool, n):
    """Start the server, time the start and `n` calls: (start seconds, [call seconds])."""
    started = time.perf_counter()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            first = await session.call_tool(tool, {"a": 1, "b": 2})
            start = time.perf_counter() - started
            if first.is_error:
                sys.exit(f"{tool} failed: {first}")
            for _ in range(WARMUP):
                await session.call_tool(tool, {"a": 1, "b": 2})
            times = []
            for i in range(n):
                t = time.perf_counter()
                result = await session.call_tool(tool, {"a": i, "b": 2})
                times.append(time.perf_counter() - t)
                if result.is_error:
                    sys.exit(f"{tool} failed: {result}")
            return start, times


def main():
    work = tempfile.mkdtemp()
    try:
        server = os.path.join(work, "server", "sdk_server.py")
        os.makedirs(os.path.dirname(server))
        shutil.copy(os.path.join(root, "tests", "mcp", "sdk_server.py"), server)
        ws = os.path.join(work, "ws")
        config = os.path.join(work, "config", "toolwright")
        os.makedirs(ws)
        os.makedirs(config)
        mcp_json = os.path.join(work, "mcp.json")
        with open(mcp_json, "w") as f:
            json.dump({"mcpServers": {"sdk": {"command": sys.executable, "args": [server], "exposure": "direct"}}}, f)
        env = dict(os.environ, HOME=work, XDG_CONFIG_HOME=os.path.join(work, "config"))
        policies = {"confined": "", "unconfined": '[mcp.sdk]\nsandbox = "off"\n'}
        through = ["mcp", "--watch-plugins", "0", "--no-default-plugins", "--no-default-mcp",
                   "--mcp-config", mcp_json, "--cwd", ws]
        cases = {
            "direct (SDK client → SDK server)": (StdioServerParameters(command=sys.executable, args=[server], env=env), "add", None),
            "through toolwright mcp, confined": (StdioServerParameters(command=toolwright, args=through, env=env), "mcp__sdk__add", "confined"),
            "through toolwright mcp, sandbox off": (StdioServerParameters(command=toolwright, args=through, env=env), "mcp__sdk__add", "unconfined"),
        }
        results = {name: ([], []) for name in cases}
        for _ in range(ROUNDS):
            for name, (params, tool, policy) in cases.items():
                if policy is not None:
                    with open(os.path.join(config, "toolwright.toml"), "w") as f:
                        f.write(policies[policy])
                start, times = anyio.run(run_case, params, tool, calls)
                results[name][0].append(start)
                results[name][1].extend(times)
        direct = statistics.median(results[next(iter(cases))][1])
        print(f"{calls} calls x {ROUNDS} rounds per case")
        print("| case | start, median | one call, median (p10–p90) | over direct |")
        print("|---|---|---|---|")
        for name, (starts, times) in results.items():
            times.sort()
            p10, p90 = times[len(times) // 10], times[len(times) * 9 // 10]
            med = statistics.median(times)
            print(f"| {name} | {statistics.median(starts) * 1000:.1f} ms | {med * 1000:.3f} ms "
                  f"({p10 * 1000:.3f}–{p90 * 1000:.3f}) | {(med - direct) * 1000:+.3f} ms |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


main()
