"""py-guard: the `guard` example (plugins/examples/guard) in Python, with Toolwright's Python SDK.

A handler plugin in the call path of every tool (pi's `tool_call` hook), deciding as the Rust example does:

- `bash` commands containing `rm -rf` are blocked, with a reason the model sees;
- a leading `sudo ` is dropped from `bash` commands (the arguments are rewritten).

Arguments containing `__guard_trap__` make it raise, which shows how the host treats a failing handler: the call is
blocked. It asks for no capability: a handler sees the calls whatever it is granted. Build (tests/tests/polyglot.rs
does):

    componentize-py -d wit -w handler-plugin componentize app -p . -p sdk/python -o py_guard.wasm
"""

import json

from toolwright_plugin import Block, Plugin, Rewrite

plugin = Plugin("py-guard", "0.1.0", "Blocks recursive deletes and drops sudo (the guard example, in Python).")


@plugin.on_tool_call
def guard(tool, args):
    if "__guard_trap__" in json.dumps(args):
        raise RuntimeError("guard asked to fail")
    if tool != "bash":
        return None
    command = args.get("command", "")
    if "rm -rf" in command:
        return Block("guard: recursive deletes are not allowed")
    if command.startswith("sudo "):
        return Rewrite({**args, "command": command[len("sudo "):]})
    return None


try:
    Handler = plugin.export_handler()
except ImportError:
    pass  # imported outside a componentize-py build (the unit tests)
