"""A plugin's questions for the client (`ask`), answered by the official MCP Python SDK (`mcp` from PyPI) over
`toolwright mcp --http`: as a 2025-11-25 client (a session: the server sends `elicitation/create`,
`sampling/createMessage` and `roots/list` while the call waits) and as a 2026-07-28 one (stateless: the SDK's
multi-round-trip driver answers each `input_required` result with the same callbacks and calls again).

Usage: python_ask_client.py TOOLWRIGHT WORKSPACE PLUGIN_DIR CACHE_DIR legacy|modern

The plugin directory holds the conformance fixtures (`tests/programs/conformance`); the user's policy lists them in
`[ask] sampling`. Run by `tests/tests/mcp_python.rs`. Exits non-zero, with the reason on stderr, at the first
expectation that does not hold.
"""

import os
import subprocess
import sys

import anyio
import mcp_types as types
from mcp.client import Client

from python_client import check

PLUGIN = "toolwright-test-conformance"


def start_server(binary, workspace, plugins, cache):
    policy = os.path.join(workspace, "ask-policy.toml")
    with open(policy, "w") as f:
        f.write(f'[ask]\nsampling = ["{PLUGIN}"]\n')
    server = subprocess.Popen(
        [binary, "mcp", "--http", "127.0.0.1:0", "--cwd", workspace, "--no-default-plugins", "--plugins", plugins,
         "--cache-dir", cache, "--policy", policy],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    check(line.startswith("Listening on http://127.0.0.1:"), f"the server printed {line!r}")
    return server, line.split()[-1]


async def main(binary, workspace, plugins, cache, mode):
    server, url = start_server(binary, workspace, plugins, cache)
    asked = []

    async def on_elicit(context, params):
        asked.append(("elicitation/create", params.message))
        field = next(iter(params.requested_schema["properties"]))
        return types.ElicitResult(action="accept", content={field: "Alice" if field == "name" else "teal"})

    async def on_sample(context, params):
        asked.append(("sampling/createMessage", params.messages[0].content.text))
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="Hi"),
                                         model="test-model", stop_reason="endTurn")

    async def on_roots(context):
        asked.append(("roots/list", None))
        return types.ListRootsResult(roots=[types.Root(uri="file:///projects/x", name="x")])

    try:
        async with Client(url, mode="legacy" if mode == "legacy" else "2026-07-28",
                          elicitation_callback=on_elicit, sampling_callback=on_sample,
                          list_roots_callback=on_roots) as client:
            # Three questions at once: one round (2026-07-28), three requests of the session (2025-11-25).
            result = await client.call_tool("test_input_required_result_multiple_inputs", {})
            text = result.content[0].text
            check(not result.is_error and text == "Hi Alice; roots: file:///projects/x (x)", f"{mode}: {text!r}")
            # A session is asked in the plugin's order; the SDK's driver answers a round's questions in its own.
            methods = [m for m, _ in asked]
            if mode == "modern":
                methods.sort()
            check(methods == ["elicitation/create", "roots/list", "sampling/createMessage"] if mode == "modern"
                  else methods == ["elicitation/create", "sampling/createMessage", "roots/list"], f"{mode}: {asked}")
            form = next(message for m, message in asked if m == "elicitation/create")
            check(form == f"The plugin {PLUGIN} asks: What is your name?", f"{mode}: {form!r}")
            # A question after an answer: a second round.
            asked.clear()
            result = await client.call_tool("test_input_required_result_multi_round", {})
            text = result.content[0].text
            check(text == "Alice's favourite colour is teal", f"{mode}: {text!r}")
            check(len(asked) == 2, f"{mode}: asked {asked}")
    finally:
        server.terminate()
        server.wait(timeout=10)
    print("all checks passed")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    anyio.run(main, *sys.argv[1:6])
