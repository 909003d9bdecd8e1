"""Drives `toolwright mcp --http` with the official MCP Python SDK (`mcp` from PyPI), as a 2025-11-25 client
(`initialize`, a session) or a 2026-07-28 one (`server/discover`, stateless). The server runs with `--poll-after 1`:
a session's call still running after a second has its stream closed, and the SDK reconnects for the answer.

Usage: python_http_client.py TOOLWRIGHT WORKSPACE PLUGIN_DIR CACHE_DIR legacy|modern

The plugin directory holds the `word_count` example and the conformance fixtures (`tests/programs/conformance`).
Run by `tests/tests/mcp_python.rs`. Exits non-zero, with the reason on stderr, at the first expectation that does
not hold.
"""

import os
import subprocess
import sys
import warnings

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from python_client import cancel_kills_processes, check
from mcp.client.subscriptions import listen
from mcp.shared.subscriptions import ToolsListChanged

RED_PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

warnings.simplefilter("ignore")  # logging/setLevel is deprecated as of 2026-07-28; 2025-11-25 clients use it.


def start_server(binary, workspace, plugins, cache):
    server = subprocess.Popen(
        [binary, "mcp", "--http", "127.0.0.1:0", "--cwd", workspace, "--no-default-plugins", "--plugins", plugins,
         "--cache-dir", cache, "--expose", "test_simple_text=deferred", "--allow", "+tool_search",
         "--poll-after", "1"],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    check(line.startswith("Listening on http://127.0.0.1:"), f"the server printed {line!r}")
    return server, line.split()[-1]


async def main(binary, workspace, plugins, cache, mode):
    modern = mode == "modern"
    with open(os.path.join(workspace, "a.txt"), "w") as f:
        f.write("one\ntwo\n")
    server, url = start_server(binary, workspace, plugins, cache)
    logs = []

    async def on_log(params):
        logs.append((params.level, params.logger, params.data))

    try:
        async with streamable_http_client(url) as (read, write):
            session_args = {"logging_callback": on_log}
            if modern:
                session_args["log_level"] = "debug"  # 2026-07-28: a level on every request
            async with ClientSession(read, write, **session_args) as session:
                if modern:
                    await session.discover()
                    check(session.protocol_version == "2026-07-28", f"negotiated {session.protocol_version}")
                else:
                    init = await session.initialize()
                    check(init.protocol_version == "2025-11-25", f"negotiated {init.protocol_version}")
                    await session.set_logging_level("debug")

                listed = await session.list_tools()
                tools = {t.name: t for t in listed.tools}
                names = [t.name for t in listed.tools]
                check(names[:7] == ["read", "bash", "edit", "write", "grep", "find", "ls"], f"tools/list: {names}")
                for name in ("word_count", "test_tool_with_logging"):
                    check(name in tools, f"plugin tool {name} listed: {names}")
                check(tools["read"].annotations.read_only_hint is True, "read is read-only")
                check(tools["bash"].annotations.destructive_hint is True, "bash is destructive")
                # A plugin's annotations and label come from its spec.
                hints = tools["test_tool_with_logging"].annotations
                check((hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint)
                      == (True, False, True, False), f"the plugin's annotations: {hints}")
                check(tools["test_log_levels"].title == "Log at every level",
                      f"title is the label: {tools['test_log_levels'].title}")
                check(tools["tool_search"].annotations.read_only_hint is True, "tool_search is read-only")
                schema = tools["read"].output_schema
                if modern:
                    check("anyOf" in schema, f"2026-07-28 gets read's own output schema: {schema}")
                else:
                    check(schema["type"] == "object" and schema["required"] == ["value"]
                          and "anyOf" in schema["properties"]["value"], f"read's schema wrapped: {schema}")

                # read's structured content is a string: as it is for 2026-07-28, wrapped for 2025-11-25.
                result = await session.call_tool("read", {"path": "a.txt"})
                check(not result.is_error and result.content[0].text == "one\ntwo\n", f"read: {result}")
                expected = "one\ntwo\n" if modern else {"value": "one\ntwo\n"}
                check(result.structured_content == expected, f"read's structuredContent {result.structured_content}")

                result = await session.call_tool("bash", {"command": "echo hi; exit 3"})
                check(result.is_error, f"a non-zero exit is an error result: {result}")
                check(result.structured_content["exit_code"] == 3, f"bash's structuredContent {result.structured_content}")

                # A call that outlasts --poll-after: a session's stream is closed after a second and the SDK
                # reconnects with Last-Event-ID for the answer (SEP-1699); a stateless request's is never closed.
                result = await session.call_tool("bash", {"command": "sleep 2; echo polled"})
                check(not result.is_error and result.content[0].text == "polled\n", f"a polled call: {result}")

                # A wasm plugin's tool over HTTP, as over stdio.
                result = await session.call_tool("word_count", {"text": "one two three"})
                check(not result.is_error and result.content[0].text.startswith("3 words"), f"word_count: {result}")
                check(result.structured_content == {"words": 3, "lines": 1, "characters": 13},
                      f"word_count's structuredContent {result.structured_content}")

                # An image block passes as an MCP image, bytes unchanged (a 1x1 PNG is within pi's limits).
                result = await session.call_tool("test_image_content", {})
                image = result.content[0]
                check(image.type == "image" and image.mime_type == "image/png", f"image block: {result}")
                check(image.data == RED_PIXEL_PNG, f"image bytes changed: {image.data}")

                # A plugin's log lines reach the client at the level it chose, named by their tool.
                result = await session.call_tool("test_tool_with_logging", {})
                check(not result.is_error, f"test_tool_with_logging: {result}")
                with anyio.fail_after(5):
                    while len(logs) < 3:
                        await anyio.sleep(0.02)
                check([(str(level), logger, data) for level, logger, data in logs[:3]] == [
                    ("info", "test_tool_with_logging", "Tool execution started"),
                    ("info", "test_tool_with_logging", "Tool processing data"),
                    ("info", "test_tool_with_logging", "Tool execution completed"),
                ], f"log messages: {logs}")

                # Lines below the client's level are not sent: 2025-11-25 sets it with logging/setLevel,
                # 2026-07-28 puts it on each request (a second session asks for warnings only).
                logs.clear()
                if modern:
                    async with streamable_http_client(url) as (quiet_read, quiet_write):
                        async with ClientSession(quiet_read, quiet_write, logging_callback=on_log,
                                                 log_level="warning") as quiet:
                            await quiet.discover()
                            await quiet.call_tool("test_log_levels", {})
                else:
                    await session.set_logging_level("warning")
                    await session.call_tool("test_log_levels", {})
                with anyio.fail_after(5):
                    while len(logs) < 2:
                        await anyio.sleep(0.02)
                await anyio.sleep(0.2)
                check([(str(level), data) for level, _, data in logs] ==
                      [("warning", "a warning line"), ("error", "an error line")], f"at warning: {logs}")
                logs.clear()
                if not modern:
                    await session.set_logging_level("debug")
                await session.call_tool("test_log_levels", {})
                with anyio.fail_after(5):
                    while len(logs) < 4:
                        await anyio.sleep(0.02)
                check([str(level) for level, _, _ in logs] == ["debug", "info", "warning", "error"],
                      f"at debug: {logs}")

                # tools/list_changed when tool_search loads a deferred tool: 2026-07-28 clients hear it on the
                # stream they open with subscriptions/listen (2025-11-25 sessions on their GET stream:
                # tests/tests/mcp_http.rs).
                if modern:
                    async with listen(session, tools_list_changed=True) as subscription:
                        check(subscription.honored.tools_list_changed is True, f"honored: {subscription.honored}")
                        result = await session.call_tool("tool_search", {"query": "simple text response"})
                        check("test_simple_text" in result.content[0].text, f"tool_search: {result}")
                        with anyio.fail_after(5):
                            event = await subscription.__anext__()
                        check(isinstance(event, ToolsListChanged), f"the listen stream got {event}")
                    names = [t.name for t in (await session.list_tools()).tools]
                    check("test_simple_text" in names, f"after tool_search: {names}")

                # A plugin's own progress count.
                progress = []

                async def on_progress(value, total, message):
                    progress.append((value, total))

                result = await session.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
                check(not result.is_error, f"test_tool_with_progress: {result}")
                check(progress == [(0, 100), (50, 100), (100, 100)], f"progress: {progress}")

                # Cancelling a long bash call kills its processes: the SDK sends notifications/cancelled
                # (2025-11-25) or closes the request's stream (2026-07-28).
                await cancel_kills_processes(session, workspace)

                result = await session.call_tool("read", {"path": "a.txt"})
                check(result.content[0].text == "one\ntwo\n", f"after cancel: {result}")
    finally:
        server.terminate()
        server.wait(timeout=10)
    check(server.returncode == 0, f"the server exited with {server.returncode} on SIGTERM")
    print(f"python mcp http client ({mode}): all checks passed")


if __name__ == "__main__":
    try:
        anyio.run(main, *sys.argv[1:6])
    except AssertionError as error:
        print(f"FAILED: {error}", file=sys.stderr)
        sys.exit(1)
