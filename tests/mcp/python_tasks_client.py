"""Drives long calls as tasks on `toolwright mcp --http` with the official MCP Python SDK (`mcp` from PyPI), as a
2026-07-28 client that declares the `io.modelcontextprotocol/tasks` extension: a `bash` call comes back as a task
(the SDK's extension claim for `resultType: "task"`), `tasks/get` shows it working, then its result; a second one is
cancelled with `tasks/cancel` and its processes die; a 2025-11-25 session cannot see or cancel it.

Usage: python_tasks_client.py TOOLWRIGHT WORKSPACE PLUGIN_DIR CACHE_DIR

Run by `tests/tests/mcp_python.rs`. Exits non-zero, with the reason on stderr, at the first expectation that does
not hold. The SDK (2.3.0) has no task API of its own: it offers extension claims (`ResultClaim`) and typed requests
(`send_request`), which is what a client of the extension writes.
"""

import os
import subprocess
import sys
import time
from typing import Any, ClassVar, Literal

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.extension import ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from python_client import check

TASKS = "io.modelcontextprotocol/tasks"
ANY = TypeAdapter(dict[str, Any])


class CreatedTask(types.Result):
    """`CreateTaskResult`: the task a `tools/call` became."""

    result_type: Literal["task"]
    task_id: str
    status: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param: ClassVar[str | None] = "taskId"


async def get(session, task_id):
    return await session.send_request(GetTask(params=TaskParams(task_id=task_id)), ANY)


async def cancel(session, task_id):
    return await session.send_request(CancelTask(params=TaskParams(task_id=task_id)), ANY)


async def settled(session, task_id):
    """Poll until the task is no longer working, at the interval the server asks for."""
    with anyio.fail_after(30):
        while True:
            state = await get(session, task_id)
            if state["status"] != "working":
                return state
            await anyio.sleep(state.get("pollIntervalMs", 500) / 1000)


async def unexpected_resolve(result, ctx):
    raise AssertionError("the test polls its tasks itself")


def tasks_session(read, write):
    claim = ResultClaim(result_type="task", model=CreatedTask, resolve=unexpected_resolve)
    return ClientSession(read, write, extensions={TASKS: {}}, result_claims={TASKS: [claim]})


def start_server(binary, workspace, plugins, cache):
    server = subprocess.Popen(
        [binary, "mcp", "--http", "127.0.0.1:0", "--cwd", workspace, "--no-default-plugins", "--plugins", plugins,
         "--cache-dir", cache],
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    check(line.startswith("Listening on http://127.0.0.1:"), f"the server printed {line!r}")
    return server, line.split()[-1]


def alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "State:\tZ" not in f.read()
    except FileNotFoundError:
        return False


async def main(binary, workspace, plugins, cache):
    server, url = start_server(binary, workspace, plugins, cache)
    try:
        async with streamable_http_client(url) as (read, write):
            async with tasks_session(read, write) as session:
                await session.discover()
                check(session.protocol_version == "2026-07-28", f"negotiated {session.protocol_version}")

                # A finished task: polled while working, then its result.
                task = await session.call_tool("bash", {"command": "sleep 0.5; echo built"}, allow_claimed=True)
                check(isinstance(task, CreatedTask) and task.status == "working", f"bash as a task: {task}")
                check(task.ttl_ms and task.poll_interval_ms, f"the task's ttl and poll interval: {task}")
                state = await get(session, task.task_id)
                check(state["status"] == "working", f"tasks/get while it runs: {state}")
                state = await settled(session, task.task_id)
                check(state["status"] == "completed", f"the finished task: {state}")
                result = types.CallToolResult.model_validate(state["result"])
                check(not result.is_error and result.content[0].text == "built\n", f"the task's result: {result}")

                # A cancelled task: its processes die.
                pidfile = os.path.join(workspace, "task.pid")
                command = f"echo $$ > {pidfile}; sleep 300 & echo $! >> {pidfile}; wait"
                task = await session.call_tool("bash", {"command": command}, allow_claimed=True)
                check(isinstance(task, CreatedTask), f"bash as a task: {task}")
                with anyio.fail_after(20):
                    while True:
                        pids = open(pidfile).read().split() if os.path.exists(pidfile) else []
                        if len(pids) == 2:
                            break
                        await anyio.sleep(0.02)
                check(all(alive(p) for p in pids), f"the task's processes run: {pids}")
                check((await get(session, task.task_id))["status"] == "working", "working before the cancel")

                # A 2025-11-25 session that declared the extension and knows the id cannot see or cancel it (its
                # tasks are its own); a stateless client that guesses an id finds nothing. (Stateless requests
                # share one owner: what keeps their tasks apart is the id, 128 random bits.)
                async with streamable_http_client(url) as (other_read, other_write):
                    async with ClientSession(other_read, other_write, extensions={TASKS: {}}) as other:
                        init = await other.initialize()
                        check(init.protocol_version == "2025-11-25", f"negotiated {init.protocol_version}")
                        for ask, task_id in ((get, task.task_id), (cancel, task.task_id), (get, "0" * 32)):
                            try:
                                await ask(other if task_id == task.task_id else session, task_id)
                                check(False, f"{ask.__name__} of {task_id} reached a task")
                            except MCPError as error:
                                check(error.error.code == -32602 and error.error.message == f"unknown task: {task_id}",
                                      f"{ask.__name__} of {task_id}: {error.error}")
                check((await get(session, task.task_id))["status"] == "working", "still working after the others")
                check(all(alive(p) for p in pids), f"another client's cancel reached the call: {pids}")

                ack = await cancel(session, task.task_id)
                check(ack.get("resultType", "complete") == "complete", f"tasks/cancel: {ack}")
                state = await settled(session, task.task_id)
                check(state["status"] == "cancelled", f"the cancelled task: {state}")
                deadline = time.monotonic() + 10
                while any(alive(p) for p in pids):
                    check(time.monotonic() < deadline, f"the task's processes outlived its cancellation: {pids}")
                    await anyio.sleep(0.02)

                # A quick tool is answered in place.
                with open(os.path.join(workspace, "a.txt"), "w") as f:
                    f.write("one\n")
                result = await session.call_tool("read", {"path": "a.txt"})
                check(result.content[0].text == "one\n", f"read answered in place: {result}")
    finally:
        server.terminate()
        server.wait(timeout=10)
    check(server.returncode == 0, f"the server exited with {server.returncode} on SIGTERM")
    print("python mcp tasks client: all checks passed")


if __name__ == "__main__":
    try:
        anyio.run(main, *sys.argv[1:5])
    except AssertionError as error:
        print(f"FAILED: {error}", file=sys.stderr)
        sys.exit(1)
