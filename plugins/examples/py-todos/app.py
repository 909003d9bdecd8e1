"""py-todos: the `todos` example (plugins/examples/todos) in Python, with Toolwright's Python SDK.

A tool plugin that needs a grant: `py_todos` lists the `TODO` lines of the workspace's files, as
`path:line: text`, sorted, skipping dot-files and files over 1 MiB, exactly as the Rust example does. It requests
read access to the workspace (`.`), with a reason; until a policy grants it, every call fails with the host's
refusal, which names the grant:

    [plugins.py-todos]
    read = ["."]

It walks the tree with Python's own `os.scandir` and `open`. Build (tests/tests/polyglot.rs does):

    componentize-py -d wit -w tool-plugin componentize app -p . -p sdk/python -o py_todos.wasm
"""

import os

from toolwright_plugin import Plugin, Read

plugin = Plugin(
    "py-todos",
    "0.1.0",
    "Lists the TODO comments of the workspace (the todos example, in Python).",
    capabilities=[Read(".", "reads the workspace's files to find their TODO comments")],
)

MAX_FILE = 1 << 20


def todos(root, is_cancelled=lambda: False):
    """The `path:line: text` of every TODO below `root`, sorted."""
    found, stack = [], [root]
    while stack:
        if is_cancelled():
            raise RuntimeError("Operation aborted")
        directory = stack.pop()
        with os.scandir(directory) as entries:
            names = sorted(e.name for e in entries)
        for name in names:
            if name.startswith("."):
                continue
            path = os.path.join(directory, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            if os.path.isdir(path):
                stack.append(path)
            elif os.path.isfile(path) and info.st_size <= MAX_FILE:
                try:
                    with open(path, "rb") as f:
                        text = f.read().decode("utf-8", "replace")
                except OSError:
                    continue
                lines = text.split("\n")
                if lines[-1] == "":
                    lines.pop()  # as Rust's `str::lines`: no empty line after the last newline
                for number, line in enumerate(lines, 1):
                    at = line.find("TODO")
                    if at >= 0:
                        found.append(f"{os.path.relpath(path, root)}:{number}: {line[at:].strip()}")
    return sorted(found)


@plugin.tool(
    name="py_todos",
    description="List the TODO comments of the workspace, as path:line: text.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Directory to scan (default: the workspace)"}},
    },
)
def py_todos(args, ctx):
    found = todos(ctx.resolve(args.get("path", ".")), ctx.is_cancelled)
    return "\n".join(found) if found else "No TODOs found"


try:
    Tool = plugin.export()
except ImportError:
    pass  # imported outside a componentize-py build (the unit tests)
