"""Drives `toolwright mcp` with the official MCP Python SDK (`mcp` from PyPI), end to end.

Usage: python_client.py TOOLWRIGHT WORKSPACE PLUGIN_DIR CACHE_DIR

Run by `host/tests/mcp_python.rs`, which makes a virtual environment with the pinned SDK. Exits non-zero, with
the reason on stderr, at the first expectation that does not hold.
"""

import os
import sys
import time

import anyio
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def method_of(message):
    for candidate in (message, getattr(message, "root", None)):
        method = getattr(candidate, "method", None)
        if method:
            return method
    return None


def alive(pid):
    return os.path.exists(f"/proc/{pid}") and "State:\tZ" not in open(f"/proc/{pid}/status").read()


async def cancel_kills_processes(session, workspace):
    """A long bash call the client gives up on (1.5 s timeout) leaves neither its shell nor its child alive."""
    command = "echo $$ > shell.pid; sleep 60 & echo $! > child.pid; wait"
    started = time.monotonic()
    try:
        await session.call_tool("bash", {"command": command}, read_timeout_seconds=1.5)
        check(False, "the long call must time out")
    except (MCPError, TimeoutError):
        pass
    pids = [int(open(os.path.join(workspace, f)).read()) for f in ("shell.pid", "child.pid")]
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    check(not any(alive(p) for p in pids), f"processes left behind after cancel: {pids}")
    check(time.monotonic() - started < 8, "the cancel took too long")


async def main(binary, workspace, plugins, cache):
    with open(os.path.join(workspace, "a.txt"), "w") as f:
        f.write("one\ntwo\n")
    server = StdioServerParameters(
        command=binary,
        args=["mcp", "--cwd", workspace, "--no-default-plugins", "--plugins", plugins, "--cache-dir", cache,
              "--expose", "word_count=deferred", "--allow", "+tool_search"],
    )
    notifications = []

    async def on_message(message):
        if not isinstance(message, Exception):
            notifications.append(method_of(message))

    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            check(init.server_info.name == "toolwright", f"server name {init.server_info}")

            listed = await session.list_tools()
            names = [t.name for t in listed.tools]
            check(names == ["read", "bash", "edit", "write", "grep", "find", "ls", "tool_search", "todos"],
                  f"tools/list: {names}")
            read = next(t for t in listed.tools if t.name == "read")
            check(read.description.startswith("Read the contents of a file."), read.description)
            # Every built-in carries MCP's four hints, as the README's table gives them.
            hints = {
                "read": (True, False, True, False), "grep": (True, False, True, False),
                "find": (True, False, True, False), "ls": (True, False, True, False),
                "write": (False, True, True, False), "edit": (False, True, False, False),
                "bash": (False, True, False, True), "tool_search": (True, False, True, False),
            }
            for tool in listed.tools:
                if tool.name not in hints:
                    check(tool.name == "todos", f"{tool.name} is a built-in without expected hints")
                    continue
                a = tool.annotations
                check(a is not None, f"{tool.name} has no annotations")
                got = (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)
                check(got == hints[tool.name], f"{tool.name}'s annotations: {got}")
                check(tool.title == tool.name, f"{tool.name}'s title: {tool.title}")
            check(read.input_schema["required"] == ["path"], f"read's input schema {read.input_schema}")

            # A built-in, with pi's coercion: "1" becomes the number 1.
            result = await session.call_tool("read", {"path": "a.txt", "limit": "1"})
            check(not result.is_error, f"read failed: {result}")
            check(result.content[0].text == "one\n\n[2 more lines in file. Use offset=2 to continue.]",
                  repr(result.content[0].text))

            # A validation failure is a tool error with pi's text, not a protocol error.
            result = await session.call_tool("read", {"offset": 1})
            check(result.is_error, "a call without its required argument is an error result")
            check(result.content[0].text.startswith('Validation failed for tool "read":'), result.content[0].text)

            # An unknown tool is a protocol error.
            try:
                await session.call_tool("nope", {})
                check(False, "calling an unknown tool must fail")
            except MCPError as error:
                check("Tool nope not found" in str(error), str(error))

            # tool_search activates the deferred wasm tool and the server says the list changed.
            result = await session.call_tool("tool_search", {"query": "count words"})
            check(result.content[0].text.startswith("Loaded 1 tool. They are available from your next call:\n"
                                                    "- word_count:"), result.content[0].text)
            with anyio.fail_after(5):
                while "notifications/tools/list_changed" not in notifications:
                    await anyio.sleep(0.05)
            names = [t.name for t in (await session.list_tools()).tools]
            check("word_count" in names, f"after tool_search: {names}")

            # A tool from a wasm plugin.
            result = await session.call_tool("word_count", {"text": "one two three"})
            check(not result.is_error and "3" in result.content[0].text, f"word_count: {result}")

            # Progress from a long bash call.
            progress = []

            async def on_progress(value, total, message):
                progress.append((value, message))

            result = await session.call_tool(
                "bash", {"command": "for i in 1 2 3 4; do echo line$i; sleep 0.3; done"}, progress_callback=on_progress)
            check(not result.is_error, f"bash: {result}")
            check(result.structured_content["exit_code"] == 0, f"structuredContent {result.structured_content}")
            check(len(progress) >= 2, f"progress notifications: {progress}")
            check([v for v, _ in progress] == sorted(v for v, _ in progress), f"progress increases: {progress}")
            check(any(m and m.startswith("line") for _, m in progress), f"progress messages: {progress}")

            # Cancelling a long bash call (the SDK sends notifications/cancelled on timeout) kills its processes.
            await cancel_kills_processes(session, workspace)

            # The server answers the next call.
            result = await session.call_tool("read", {"path": "a.txt"})
            check(result.content[0].text == "one\ntwo\n", f"after cancel: {result}")
    print("python mcp client: all checks passed")


if __name__ == "__main__":
    try:
        anyio.run(main, *sys.argv[1:5])
    except AssertionError as error:
        print(f"FAILED: {error}", file=sys.stderr)
        sys.exit(1)
