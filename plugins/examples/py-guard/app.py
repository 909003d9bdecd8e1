"""py-guard: the `guard` and `redact` examples (plugins/examples/guard, plugins/examples/redact) in Python, with
Toolwright's Python SDK.

A handler plugin in the call path of every tool (pi's `tool_call` and `tool_result` hooks), deciding as the Rust
examples do:

- `bash` commands containing `rm -rf` are blocked, with a reason the model sees;
- a leading `sudo ` is dropped from `bash` commands (the arguments are rewritten);
- in every result, `SECRET=value` becomes `SECRET=[redacted]` and AWS key ids (`AKIA` and 16 more upper-case
  letters or digits) become `[redacted]`.

Arguments containing `__guard_fail__` make it raise `RuntimeError("guard asked to fail")`, which shows how the host
treats a failing handler: the call is blocked, and the model sees the message, as pi shows a throwing extension's.
It asks for no capability: a handler sees the calls whatever it is granted. Build (tests/tests/polyglot.rs
does):

    componentize-py -d wit -w handler-plugin componentize app -p . -p sdk/python -o py_guard.wasm
"""

import json

from toolwright_plugin import Block, Plugin, Rewrite

plugin = Plugin("py-guard", "0.1.0", "Blocks recursive deletes and drops sudo (the guard example, in Python).")


@plugin.on_tool_call
def guard(tool, args):
    if "__guard_fail__" in json.dumps(args):
        raise RuntimeError("guard asked to fail")
    if tool != "bash":
        return None
    command = args.get("command", "")
    if "rm -rf" in command:
        return Block("guard: recursive deletes are not allowed")
    if command.startswith("sudo "):
        return Rewrite({**args, "command": command[len("sudo "):]})
    return None


def redact(text):
    """`SECRET=value` (to the end of the word) as `SECRET=[redacted]`; `AKIA…` key ids as `[redacted]`."""
    out, rest = [], text
    while (i := rest.find("SECRET=")) >= 0:
        out.append(rest[: i + 7] + "[redacted]")
        after = rest[i + 7:]
        end = next((j for j, c in enumerate(after) if c.isspace()), len(after))
        rest = after[end:]
    out.append(rest)
    rest, result = "".join(out), []
    while (i := rest.find("AKIA")) >= 0:
        key = rest[i:i + 20]
        if len(key) == 20 and all(c.isascii() and (c.isupper() or c.isdigit()) for c in key):
            result.append(rest[:i] + "[redacted]")
            rest = rest[i + 20:]
        else:
            result.append(rest[: i + 4])
            rest = rest[i + 4:]
    result.append(rest)
    return "".join(result)


@plugin.on_tool_result
def redact_result(tool, args, result):
    clean = redact(result.text)
    return None if clean == result.text else clean


try:
    Handler = plugin.export_handler()
except ImportError:
    pass  # imported outside a componentize-py build (the unit tests)
