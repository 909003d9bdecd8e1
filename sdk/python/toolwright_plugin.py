"""A thin SDK for Toolwright tool plugins in Python, built with componentize-py (world `tool-plugin` of
Toolwright's `wit/plugin.wit`).

Declare the plugin and its tools; the SDK fills every field the WIT requires with pi's defaults, implements the
eight exports, turns an exception into an error result (its message for the model, the traceback in `details`),
and resolves paths against the workspace::

    from toolwright_plugin import Plugin, Read

    plugin = Plugin("my-tool", "0.1.0", "Counts words.", capabilities=[Read(".", "reads the files it counts")])

    @plugin.tool(description="Count the words of a file.",
                 parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    def count_words(args, ctx):
        with open(ctx.resolve(args["path"])) as f:
            n = len(f.read().split())
        return ctx.result(f"{n} words", structured={"words": n})

    Tool = plugin.export()   # componentize-py looks for the class `Tool` in the app module

A tool function gets the validated arguments (a dict) and a `Context`, and returns a string, or `ctx.result(…)`
for structured content, details or an error flag. Outside a componentize-py build (unit tests) the module imports
without `wit_world`: call the tool functions with `Context.for_tests(cwd)`.

It may also offer MCP resources and prompts, which `toolwright mcp` serves (build with the world
`tool-offers-plugin`)::

    @plugin.resource("notes://today", mime_type="text/markdown")
    def today(uri):
        return "# Today"

    @plugin.prompt(description="Summarise a topic.", arguments=[("topic", "what to summarise", True)])
    def summarise(args):
        return f"Summarise {args['topic']}."

    Offers = plugin.export_offers()

A handler plugin (world `handler-plugin`, pi's `tool_call` hook) declares one function instead::

    @plugin.on_tool_call
    def guard(tool, args):
        if tool == "bash" and "rm -rf" in args.get("command", ""):
            return Block("recursive deletes are not allowed")
        return None          # allow; Rewrite({...}) runs the call with other arguments

    Handler = plugin.export_handler()

A handler that raises blocks the call as pi blocks one whose handler throws: the model sees the exception's message
(`str(error)`, or its type's name when that is empty), exactly; returning `Fail(message)` does the same. A
`tool_result` hook that raises (or returns `Fail`) leaves the result as it was; the host logs the message.

The component runs CPython 3.14, which has only the modules imported while componentize-py built it: `export()` and
`export_handler()` import at build time every module the app's own files import (inside functions too) and every
codec, and stop the build with a `BuildError` naming a module that cannot be imported. `Component(wasm).run(…)`
runs a call in the built component under `toolwright exec`, for tests.
"""

import errno
import functools
import json
import os
import sys
import traceback

__all__ = ["Plugin", "Context", "Result", "Image", "Audio", "Embedded", "Block", "Rewrite", "Fail", "Read", "Write", "Spawn", "Env", "Network",
           "BuildError", "Component", "form", "sample", "roots"]


@functools.cache
def _types():
    """The bindings of `toolwright:plugin/types`: componentize-py names the module after the package when another
    interface of the world (WASI's `wasi:filesystem/types`) is called `types` too. Looked up once: an import
    statement at every call is a few microseconds of the interpreter's time."""
    try:
        from wit_world.imports import toolwright_plugin_types as types
    except ImportError:  # a WIT without WASI in its worlds
        from wit_world.imports import types
    return types


class BuildError(RuntimeError):
    """A plugin that would fail in its component: raised while componentize-py builds it, which then stops and shows
    this message (a build shows nothing the app prints)."""


def _import_guarded(node):
    """Whether a `try` statement catches `ImportError` (or everything): an import inside it is optional."""
    for handler in node.handlers:
        names = []
        if handler.type is None:
            return True
        for kind in handler.type.elts if type(handler.type).__name__ == "Tuple" else [handler.type]:
            names.append(getattr(kind, "id", getattr(kind, "attr", "")))
        if {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"} & set(names):
            return True
    return False


def _imports(source, package):
    """The modules a source file imports anywhere (inside functions too): `(module, line, optional, member)`,
    `optional` when the import sits in a `try` that catches `ImportError` or under `if TYPE_CHECKING`. `from m import
    n` gives `m`, and `m.n` with `member` set: a submodule or a name of `m`, as the caller finds out."""
    import ast
    import importlib.util

    found = []

    def visit(node, optional):
        kind = type(node).__name__
        if kind == "Try" or kind == "TryStar":
            for child in node.body:
                visit(child, optional or _import_guarded(node))
            for child in node.handlers + node.orelse + node.finalbody:
                visit(child, optional)
            return
        if kind == "If" and "TYPE_CHECKING" in ast.dump(node.test):
            optional = True
        if kind == "Import":
            found.extend((alias.name, node.lineno, optional, False) for alias in node.names)
        elif kind == "ImportFrom":
            try:
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package or None)
            except ImportError:
                base = None  # a relative import outside a package fails at run time as it would natively
            if base and base != "__future__":
                found.append((base, node.lineno, optional, False))
                found.extend((f"{base}.{alias.name}", node.lineno, optional, True)
                             for alias in node.names if alias.name != "*")
        for child in ast.iter_child_nodes(node):
            visit(child, optional)

    visit(ast.parse(source), False)
    return found


# What componentize-py cannot see in a plugin's source: codecs looked up by name (`open(…, encoding="utf-8-sig")`,
# `str.encode("idna")`, which `socket.create_connection` does), and `_strptime`, which `datetime.strptime` and
# `time.strptime` import from C. Every plugin gets them (docs/performance.md: 1.5 MB of its ~21 MB).
_ALWAYS = ("encodings", "_strptime")


def _bundle(app_file):
    """Make the component hold every module the plugin's own files import, wherever they import it. componentize-py
    keeps in a component only the modules imported while it builds (at build time, the app's top level runs), so a
    module imported inside a function would be missing at run time (`ModuleNotFoundError`). This imports them now:
    the standard library modules, codecs (`_ALWAYS`), and the plugin's own modules and what they import, found in
    the source files beside `app_file`. One that cannot be imported and is not optional (in a `try` that catches
    `ImportError`) stops the build with a `BuildError` naming it."""
    import importlib
    import pkgutil
    import sys

    for name in _ALWAYS:
        importlib.import_module(name)
    import encodings

    for codec in pkgutil.iter_modules(encodings.__path__):
        try:
            importlib.import_module(f"encodings.{codec.name}")
        except ImportError:
            pass  # a codec of another platform (mbcs, oem: Windows)
    root = os.path.dirname(os.path.abspath(app_file)) + os.sep
    scanned = set()
    while True:
        # This SDK's own imports are known (and some exist only in one world): the app's modules are scanned.
        own = [m for m in list(sys.modules.values())
               if (getattr(m, "__file__", None) or "").startswith(root) and m.__name__ not in scanned
               and m.__name__ != __name__]
        if not own:
            return
        for module in own:
            scanned.add(module.__name__)
            with open(module.__file__, encoding="utf-8") as f:
                source = f.read()
            for name, line, optional, member in _imports(source, module.__package__):
                if name in sys.modules:
                    continue
                try:
                    importlib.import_module(name)
                except Exception as error:  # noqa: BLE001 - any failure to import is the author's to read
                    if optional or (member and isinstance(error, ModuleNotFoundError) and error.name == name):
                        continue  # optional, or `from m import n` where `n` is a name of `m`, not a submodule
                    where = os.path.relpath(module.__file__, root)
                    raise BuildError(
                        f"{where}:{line} imports `{name}`, which cannot be imported while componentize-py builds "
                        f"the component ({type(error).__name__}: {error}), so the component would not have it. "
                        "componentize-py keeps only the modules imported during its build: make the module "
                        "importable from the build's Python path (-p), or make the import optional "
                        "(`try: import … except ImportError: …`)."
                    ) from error


class Result:
    """A tool result: text for the model, and optionally structured content, details, an error flag, and blocks
    after the text (`Image`, `Audio`, `Embedded`)."""

    def __init__(self, text, structured=None, details=None, is_error=False, blocks=()):
        self.text = text
        self.structured = structured
        self.details = details
        self.is_error = is_error
        self.blocks = list(blocks)


def _base64(data):
    import base64
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


class Image:
    """An image block: its bytes (or base64 text) and MIME type."""

    def __init__(self, data, mime_type):
        self.data, self.mime_type = _base64(data), mime_type


class Audio:
    """An audio block (`toolwright:plugin@0.2.0`): its bytes (or base64 text) and MIME type. An MCP client gets it
    as it is; the model sees `[audio MIME omitted]`."""

    def __init__(self, data, mime_type):
        self.data, self.mime_type = _base64(data), mime_type


class Embedded:
    """An embedded resource (`toolwright:plugin@0.2.0`): `text`, or `blob` bytes (or base64 text)."""

    def __init__(self, uri, text=None, blob=None, mime_type=None):
        self.uri, self.mime_type = uri, mime_type
        self.text, self.blob = text, None if blob is None else _base64(blob)


class Block:
    """A `tool_call` decision: do not run the call; the model sees `reason`."""

    def __init__(self, reason=None, terminate=False):
        self.reason, self.terminate = reason, terminate


class Rewrite:
    """A `tool_call` decision: run the call with these arguments instead (not validated again)."""

    def __init__(self, arguments):
        self.arguments = arguments


class Fail:
    """A handler's failure (pi's thrown `Error`): a `tool_call` hook's blocks the call, and the model sees `message`
    exactly; a `tool_result` hook's leaves the result as it was. Raising an exception is the same as returning
    `Fail` with its message."""

    def __init__(self, message):
        self.message = message

    @staticmethod
    def of(error):
        """The failure an exception raised in a hook is: its message, or its type's name when it has none."""
        return Fail(str(error) or type(error).__name__)


class _Request:
    def __init__(self, kind, target, reason):
        self.kind, self.target, self.reason = kind, target, reason


def form(key, message, schema):
    """A question for `Context.ask`: a form the user fills in (`elicitation/create`), `schema` the JSON Schema of
    its fields (an object of flat properties)."""
    return {"key": key, "method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}}


def sample(key, params):
    """A question for `Context.ask`: a message from the client's model (`sampling/createMessage`, MCP's `params`:
    `messages`, `maxTokens`, ...). The user's policy must list the plugin in `[ask] sampling`."""
    return {"key": key, "method": "sampling/createMessage", "params": params}


def roots(key):
    """A question for `Context.ask`: the client's roots (`roots/list`)."""
    return {"key": key, "method": "roots/list", "params": {}}


def Read(directory, reason):
    """Ask to read files below `directory` (relative to the workspace)."""
    return _Request("read", directory, reason)


def Write(directory, reason):
    """Ask to read and write files below `directory`."""
    return _Request("write", directory, reason)


def Spawn(program, reason):
    """Ask to start `program`."""
    return _Request("spawn", program, reason)


def Env(variable, reason):
    """Ask to see the environment variable `variable`."""
    return _Request("env", variable, reason)


def Network(pattern, reason):
    """Ask to connect to addresses matching `HOST:PORT`."""
    return _Request("network", pattern, reason)


class Context:
    """What a running tool reaches of the host."""

    def __init__(self, host=None, cwd=None):
        self._host = host
        self.cwd = cwd if cwd is not None else (host.cwd() if host else os.getcwd())

    @staticmethod
    def for_tests(cwd):
        """A context for unit tests outside the sandbox: paths resolve against `cwd`, logs and updates go nowhere."""
        return Context(None, cwd)

    def resolve(self, path):
        """`path` as the model meant it: relative to the workspace, `~` for home, made absolute (the sandbox sees
        the workspace at its real absolute path)."""
        if path.startswith("~/") or path == "~":
            home = self._host.home() if self._host else os.path.expanduser("~")
            if home:
                path = os.path.join(home, path[2:])
        return os.path.normpath(os.path.join(self.cwd, path))

    def log(self, message, level="info"):
        """Write a line to the host's log (an MCP client hears it as `notifications/message`)."""
        if self._host:
            self._host.log(getattr(_types().LogLevel, level.upper()), str(message))

    def update(self, text):
        """Report a partial result (progress) while the call runs."""
        if self._host:
            self._host.update(_to_wit(Result(text)))

    def is_cancelled(self):
        """Whether the call was cancelled; long-running tools check it often."""
        return bool(self._host and self._host.is_cancelled())

    def refusal(self, path, write=False):
        """Why the plugin may not read (or write) `path`: the host's refusal, naming the grant that would allow
        it; `None` when a grant covers it (or outside the sandbox)."""
        return self._host.refusal(self.resolve(path), write) if self._host else None

    def call_tool(self, name, args):
        """Call another tool through the host's full pipeline (pi's `ctx.executeTool`): its text and error flag,
        as `(text, is_error)`."""
        if not self._host:
            raise RuntimeError("call_tool needs the host")
        outcome = self._host.call_tool(name, json.dumps(args))
        text = "\n".join(c.value for c in outcome.result.content if type(c).__name__ == "Content_Text")
        return text, outcome.is_error

    def ask(self, *questions):
        """Ask the MCP client that made the call (`form`, `sample`, `roots` make the questions): the answers, the
        client's results parsed (`{"action": "accept", "content": {...}}` for a form), in the questions' order.
        Raises `RuntimeError` with the host's reason when nobody can answer. A 2026-07-28 client answers with the
        call's next round: the call stops at its first unanswered question and runs again from the start with
        every answer so far, so ask before changing anything."""
        if not self._host:
            raise RuntimeError("ask needs the host")
        types = _types()
        requests = [types.InputRequest(q["key"], q["method"], json.dumps(q.get("params", {}))) for q in questions]
        try:
            answers = self._host.ask(requests)
        except Exception as error:  # componentize-py raises its `Err` with the host's reason as `value`
            raise RuntimeError(getattr(error, "value", str(error))) from None
        return [json.loads(a) for a in answers]

    def client_answers(self):
        """The methods `ask` can put to the client (`elicitation/create`, `sampling/createMessage`, `roots/list`):
        those it declared and this plugin may use; empty when there is nobody to ask."""
        return list(self._host.client_answers()) if self._host else []

    def tools(self):
        """The tools `call_tool` can reach now (pi's `ctx.tools`), in registry order: dicts with `name`,
        `description`, `exposure` (`"direct"`, `"codemode"`, ...), `namespace` (a name or None),
        `prompt_guidelines`, and the JSON Schemas `parameters` and `output_schema` (None when absent)."""
        if not self._host:
            return []
        def schema(text):
            return json.loads(text) if text is not None else None

        out = []
        for t in self._host.callable_tools():
            out.append({
                "name": t.name,
                "description": t.description,
                "exposure": t.exposure.name.lower().replace("_", "-"),
                "namespace": t.namespace.name if t.namespace is not None else None,
                "prompt_guidelines": list(t.prompt_guidelines),
                "parameters": schema(t.parameters),
                "output_schema": schema(t.output_schema),
            })
        return out

    def run(self, program, args=(), cwd=None, env=None, timeout_ms=60000):
        """Run a program the plugin was granted, to its end: `(output, exit_code)`, stdout and stderr
        interleaved in `output`."""
        if not self._host:
            raise RuntimeError("run needs the host")
        from wit_world.imports import process

        child = process.spawn(process.Command(program, list(args), cwd or self.cwd, list((env or {}).items())))
        chunks, waited = [], 0
        while True:
            if self.is_cancelled() or waited > timeout_ms:
                child.kill()
                raise RuntimeError("Operation aborted" if self.is_cancelled() else f"{program} timed out")
            event = child.next(100)
            name = type(event).__name__
            if name == "ProcessEvent_Output":
                chunks.append(bytes(event.value))
            elif name == "ProcessEvent_Exited":
                return b"".join(chunks).decode("utf-8", "replace"), event.value.code
            else:
                waited += 100

    def explain(self, error):
        """An `OSError` as the model should read it: outside the plugin's grants a path does not exist in its
        filesystem (WASI says "no such file", or "not permitted" for a write below a read-only grant), so a
        refused path gets the host's refusal instead; anything else keeps its own words."""
        path = getattr(error, "filename", None)
        if self._host and isinstance(path, str):
            refusable = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EROFS, getattr(errno, "ENOTCAPABLE", -1)}
            if error.errno in refusable:
                text = self.refusal(path, False)
                if text is None and error.errno != errno.ENOENT:
                    text = self.refusal(path, True)
                if text is not None:
                    return text
        return f"{type(error).__name__}: {error}"

    @staticmethod
    def result(text, structured=None, details=None, is_error=False):
        """A result with structured content (matching the tool's output schema), details or an error flag."""
        return Result(text, structured, details, is_error)


def _to_wit(result):
    t = _types()
    Content_Text, ToolResult = t.Content_Text, t.ToolResult

    if isinstance(result, str):
        result = Result(result)
    dump = lambda value: None if value is None else json.dumps(value)  # noqa: E731

    def block(b):
        if isinstance(b, Image):
            return t.Content_Image(t.Image(data=b.data, mime_type=b.mime_type))
        if isinstance(b, Audio):
            return t.Content_Audio(t.Audio(data=b.data, mime_type=b.mime_type))
        if isinstance(b, Embedded):
            body = t.ResourceBody_Text(b.text or "") if b.blob is None else t.ResourceBody_Blob(b.blob)
            return t.Content_Resource(t.EmbeddedResource(uri=b.uri, mime_type=b.mime_type, body=body))
        raise TypeError(f"a result's blocks are Image, Audio or Embedded, not {type(b).__name__}")

    return ToolResult(
        content=[Content_Text(result.text)] + [block(b) for b in getattr(result, "blocks", ())],
        details=dump(result.details),
        structured_content=dump(result.structured),
        usage=None,
        is_error=True if result.is_error else None,
        terminate=None,
    )


def _blocks_from_wit(content):
    """A result's blocks other than text, as the SDK's `Image`, `Audio` and `Embedded`."""
    blocks = []
    for c in content:
        kind = type(c).__name__
        if kind == "Content_Image":
            blocks.append(Image(c.value.data, c.value.mime_type))
        elif kind == "Content_Audio":
            blocks.append(Audio(c.value.data, c.value.mime_type))
        elif kind == "Content_Resource":
            body = c.value.body
            is_text = type(body).__name__ == "ResourceBody_Text"
            blocks.append(Embedded(c.value.uri, text=body.value if is_text else None,
                                   blob=None if is_text else body.value, mime_type=c.value.mime_type))
    return blocks


class _ToolDecl:
    def __init__(self, function, name, description, parameters, output_schema, annotations, snippet,
                 render_call=None, render_result=None, label=None, long_running=None):
        self.function = function
        self.long_running = long_running
        self.label = label
        self.render_call = render_call
        self.render_result = render_result
        self.name = name
        self.description = description
        self.parameters = parameters
        self.output_schema = output_schema
        self.annotations = annotations
        self.snippet = snippet


class _Offered:
    def __init__(self, function, uri, name, description, mime_type, title):
        self.function, self.uri, self.name = function, uri, name
        self.description, self.mime_type, self.title = description, mime_type, title


class _Prompt:
    def __init__(self, function, name, description, arguments, title):
        self.function, self.name, self.description = function, name, description
        self.arguments, self.title = arguments, title


def _match_template(template, uri):
    """The variables of `uri` under the RFC 6570 `template` (`{x}`: one path segment, `{+x}`: any text), or `None`
    when it does not match."""
    import re

    pattern, names, at = "", [], 0
    for found in re.finditer(r"\{(\+?)([A-Za-z0-9_]+)\}", template):
        pattern += re.escape(template[at:found.start()])
        pattern += f"(?P<{found.group(2)}>" + (".+" if found.group(1) else "[^/]+") + ")"
        names.append(found.group(2))
        at = found.end()
    pattern += re.escape(template[at:])
    match = re.fullmatch(pattern, uri)
    return None if match is None else match.groupdict()


class Plugin:
    """A plugin: its metadata, the capabilities it asks for, and its tools."""

    @classmethod
    def from_project(cls, capabilities=(), path=None):
        """A plugin named, versioned and described by the `[project]` table of `pyproject.toml` (beside the module
        that calls this, unless `path`). componentize-py imports the app at build time, so the file is read then
        and the component carries the values."""
        if path is None:
            caller = sys._getframe(1).f_globals.get("__file__") or "."
            path = os.path.join(os.path.dirname(os.path.abspath(caller)), "pyproject.toml")
        try:
            import tomllib
        except ImportError as error:  # Python before 3.11 (componentize-py bundles 3.14)
            raise RuntimeError("Plugin.from_project needs Python 3.11 or later (tomllib)") from error
        with open(path, "rb") as f:
            project = tomllib.load(f).get("project", {})
        missing = [key for key in ("name", "version") if key not in project]
        if missing:
            raise ValueError(f"{path}: [project] has no {' or '.join(missing)}")
        return cls(project["name"], project["version"], project.get("description", ""), capabilities)

    def __init__(self, name, version, description, capabilities=()):
        self.name, self.version, self.description = name, version, description
        self.capabilities = list(capabilities)
        self.tools = {}
        self.tool_call = None
        self.tool_result = None
        self.resources = {}
        self.templates = []
        self.prompts = {}

    def tool(self, description, parameters, name=None, output_schema=None, annotations=None, snippet=None,
             render_call=None, render_result=None, label=None, long_running=None):
        """Declare the decorated function `f(args, ctx)` as a tool (named after the function unless `name`).
        `label` is its name for people (pi's `label`, an MCP client's `title`; the name unless given).
        `annotations` are MCP's hints: a dict of `read_only`, `destructive`, `idempotent`, `open_world`.
        `render_call(args)` and `render_result(result, expanded, partial)` are pi's `renderCall` / `renderResult`:
        lines of text for people (`toolwright exec` on a terminal), or `None` for the default rendering.
        `long_running` says whether a call may run for minutes (an MCP client that accepts tasks gets a task for
        it: `True`; the result at once: `False`); `None` leaves it to the host."""

        def declare(function):
            decl = _ToolDecl(function, name or function.__name__, description, parameters, output_schema,
                             annotations, snippet, render_call, render_result, label, long_running)
            self.tools[decl.name] = decl
            return function

        return declare

    def on_tool_result(self, function):
        """Declare the decorated `f(tool, args, result)` as the plugin's `tool_result` hook (pi's): `result` is a
        `Result` (its `text`, `details`, `is_error`, and its other `blocks`: `Image`, `Audio`, `Embedded`); return
        `None` to keep it, or a `Result` to replace it (its text and blocks as the content, its details and error
        flag: keep `result.blocks` to keep them). A raise (or `Fail(message)`) keeps the result unchanged; the
        host logs the message."""
        self.tool_result = function
        return function

    def on_tool_call(self, function):
        """Declare the decorated `f(tool, args)` as the plugin's `tool_call` hook: it returns `None` to allow,
        `Block(reason)` or `Rewrite(arguments)`; a raise (or `Fail(message)`) blocks the call with the message."""
        self.tool_call = function
        return function

    def decide(self, tool, args):
        """Run the `tool_call` hook natively (tests, and the export): its decision, a raise becoming `Fail`."""
        try:
            return self.tool_call(tool, args) if self.tool_call else None
        except Exception as error:  # noqa: BLE001 - pi blocks a call whose handler throws, with its message
            return Fail.of(error)

    def change(self, tool, args, result):
        """Run the `tool_result` hook natively (tests, and the export): `None`, a `Result` or a `str`, a raise
        becoming `Fail`."""
        try:
            return self.tool_result(tool, args, result) if self.tool_result else None
        except Exception as error:  # noqa: BLE001 - pi reports a throwing result handler and goes on
            traceback.print_exc()
            return Fail.of(error)

    def _metadata(self, t):
        kinds = {
            "read": t.Capability_Read,
            "write": t.Capability_Write,
            "spawn": t.Capability_Spawn,
            "env": t.Capability_Env,
            "network": t.Capability_Network,
        }
        return t.PluginMetadata(
            name=self.name,
            version=self.version,
            description=self.description,
            capabilities=[t.CapabilityRequest(kinds[c.kind](c.target), c.reason) for c in self.capabilities],
        )

    def export_handler(self):
        """The class componentize-py exports for the `handler-plugin` world (assign it to `Handler`)."""
        from wit_world import exports
        _bundle(sys._getframe(1).f_globals.get("__file__") or "app.py")
        from wit_world.exports import handler as h
        t = _types()

        plugin = self

        class Handler(exports.Handler):
            def metadata(self):
                return plugin._metadata(t)

            def tool_call(self, event):
                decision = plugin.decide(event.tool_name, json.loads(event.input))
                if isinstance(decision, Fail):
                    from componentize_py_types import Err

                    raise Err(decision.message)
                if isinstance(decision, Block):
                    return h.ToolCallDecision_Block(h.Block(decision.reason, decision.terminate))
                if isinstance(decision, Rewrite):
                    return h.ToolCallDecision_Rewrite(json.dumps(decision.arguments))
                return h.ToolCallDecision_Allow()

            def tool_result(self, event):
                if not plugin.tool_result:
                    return None
                text = "\n".join(c.value for c in event.content if type(c).__name__ == "Content_Text")
                details = None if event.details is None else json.loads(event.details)
                seen = Result(text, details=details, is_error=event.is_error, blocks=_blocks_from_wit(event.content))
                changed = plugin.change(event.tool_name, json.loads(event.input), seen)
                if isinstance(changed, Fail):
                    from componentize_py_types import Err

                    raise Err(changed.message)
                if changed is None:
                    return None
                if isinstance(changed, str):
                    changed = Result(changed, details=details, is_error=event.is_error)
                return h.ToolResultChanges(
                    content=_to_wit(changed).content,
                    details=None if changed.details is None else json.dumps(changed.details),
                    structured_content=None,
                    is_error=bool(changed.is_error),
                    usage=None,
                )

        return Handler

    def run(self, tool, args, ctx):
        """Run `tool` natively (tests): its `Result`, an exception becoming an error result."""
        try:
            result = self.tools[tool].function(args, ctx)
            return Result(result) if isinstance(result, str) else result
        except OSError as error:
            return Result(ctx.explain(error), details={"traceback": traceback.format_exc()}, is_error=True)
        except Exception as error:  # noqa: BLE001 - every failure is the model's to read
            return Result(f"{type(error).__name__}: {error}", details={"traceback": traceback.format_exc()},
                          is_error=True)

    def resource(self, uri, name=None, description=None, mime_type=None, title=None):
        """Offer the decorated function `f(uri)` as the MCP resource `uri` (`toolwright mcp` serves it): it returns
        `str` (text) or `bytes`; raising is a failed read, its message the client's. A function `f(uri, ctx)` may
        ask the client that reads it (`ctx.ask(form(...))`), as a prompt's may."""

        def declare(function):
            self.resources[uri] = _Offered(function, uri, name or function.__name__, description, mime_type, title)
            return function

        return declare

    def resource_template(self, uri_template, name=None, description=None, mime_type=None, title=None):
        """Offer the decorated function `f(uri, **variables)` for every URI that matches `uri_template` (RFC 6570:
        `{id}` is one path segment, `{+path}` any text): it returns `str` or `bytes`, or `None` for no such
        resource."""

        def declare(function):
            self.templates.append(_Offered(function, uri_template, name or function.__name__, description,
                                           mime_type, title))
            return function

        return declare

    def prompt(self, description=None, arguments=(), name=None, title=None):
        """Offer the decorated function `f(args)` as an MCP prompt; `arguments` are `(name, description,
        required)`. It returns a `str` (one user message) or a list of messages: each a `str` (the user's text) or
        `{"role": "user" | "assistant", "content": {MCP content block}}`. A function `f(args, ctx)` may ask the
        client that wants the prompt (`ctx.ask(form(...))`, `ctx.client_answers()`); a 2026-07-28 client answers
        with its next round, the prompt filled in again from the start."""

        def declare(function):
            key = name or function.__name__
            self.prompts[key] = _Prompt(function, key, description, list(arguments), title)
            return function

        return declare

    def read_resource(self, uri, ctx=None):
        """Read an offered resource (the export, and unit tests): `(mime_type, str | bytes)`, or `None` when
        nothing here has `uri`. A reading function with a `ctx` parameter gets `ctx`, to ask the client that reads
        it through, as a prompt's may."""

        def extra(function, variables=()):
            import inspect

            try:
                names = inspect.signature(function).parameters
            except (TypeError, ValueError):
                return {}
            # A template variable named `ctx` is the variable.
            if "ctx" not in names or "ctx" in variables:
                return {}
            return {"ctx": ctx if ctx is not None else Context.for_tests(os.getcwd())}

        offered = self.resources.get(uri)
        if offered is not None:
            return offered.mime_type, offered.function(uri, **extra(offered.function))
        for template in self.templates:
            variables = _match_template(template.uri, uri)
            if variables is not None:
                contents = template.function(uri, **variables, **extra(template.function, variables))
                if contents is not None:
                    return template.mime_type, contents
        return None

    def get_prompt(self, name, args, ctx=None):
        """Fill in an offered prompt (the export, and unit tests): its messages as `(role, content)`, or `None`
        when there is no such prompt. `ctx`: what a prompt that takes it may ask the client through."""
        prompt = self.prompts.get(name)
        if prompt is None:
            return None
        function = prompt.function
        takes_ctx = getattr(getattr(function, "__code__", None), "co_argcount", 1) >= 2
        out = function(dict(args), ctx if ctx is not None else Context.for_tests(os.getcwd())) if takes_ctx \
            else function(dict(args))
        messages = [out] if isinstance(out, str) else list(out)
        filled = []
        for message in messages:
            if isinstance(message, str):
                filled.append(("user", {"type": "text", "text": message}))
            else:
                filled.append((message["role"], message["content"]))
        return filled

    def export_offers(self):
        """The class componentize-py exports for the `offers` interface (assign it to `Offers` in the app module;
        build with the world `tool-offers-plugin`)."""
        from wit_world import exports
        from wit_world.exports import offers as o

        plugin = self

        def info(offered):
            return o.ResourceInfo(uri=offered.uri, name=offered.name, title=offered.title,
                                  description=offered.description, mime_type=offered.mime_type, size=None)

        def error(value):
            from componentize_py_types import Err

            return Err(value)

        class Offers(exports.Offers):
            def list_resources(self):
                return [info(r) for r in plugin.resources.values()]

            def list_resource_templates(self):
                return [info(t) for t in plugin.templates]

            def read_resource(self, uri):
                from wit_world.imports import host

                try:
                    found = plugin.read_resource(uri, Context(host))
                except Exception as failure:  # noqa: BLE001 - a failed read is the client's to read
                    raise error(o.OfferError_Failed(f"{type(failure).__name__}: {failure}")) from None
                if found is None:
                    raise error(o.OfferError_NotFound())
                mime_type, contents = found
                body = o.Contents_Blob(bytes(contents)) if isinstance(contents, (bytes, bytearray)) \
                    else o.Contents_Text(str(contents))
                return [o.ResourceContents(uri=uri, mime_type=mime_type, contents=body)]

            def list_prompts(self):
                return [o.Prompt(name=p.name, title=p.title, description=p.description,
                                 arguments=[o.PromptArgument(name=a[0], description=a[1] if len(a) > 1 else None,
                                                             required=bool(a[2]) if len(a) > 2 else False)
                                            for a in p.arguments])
                        for p in plugin.prompts.values()]

            def get_prompt(self, name, arguments):
                from wit_world.imports import host

                try:
                    filled = plugin.get_prompt(name, arguments, Context(host))
                except Exception as failure:  # noqa: BLE001 - a failed prompt is the client's to read
                    raise error(o.OfferError_Failed(f"{type(failure).__name__}: {failure}")) from None
                if filled is None:
                    raise error(o.OfferError_NotFound())
                return o.PromptResult(description=plugin.prompts[name].description,
                                      messages=[o.PromptMessage(role=role, content=json.dumps(content))
                                                for role, content in filled])

            def complete(self, kind, name, argument, value):
                return []

        return Offers

    def export(self):
        """The class componentize-py exports (assign it to `Tool` in the app module). Called while componentize-py
        builds, it first puts in the component every module the app's files import, even inside functions, and
        stops the build (`BuildError`) on one that cannot be imported, naming it."""
        from wit_world import exports
        _bundle(sys._getframe(1).f_globals.get("__file__") or "app.py")
        from wit_world.imports import host
        t = _types()

        plugin = self

        def spec(decl):
            hints = decl.annotations
            return t.ToolSpec(
                name=decl.name,
                label=decl.label or decl.name,
                description=decl.description,
                parameters=json.dumps(decl.parameters),
                output_schema=None if decl.output_schema is None else json.dumps(decl.output_schema),
                prompt_snippet=decl.snippet,
                prompt_guidelines=[],
                constrained_sampling=None,
                execution_mode=None,
                exposure=t.Exposure.DIRECT,
                annotations=None if hints is None else t.Annotations(
                    read_only=hints.get("read_only"),
                    destructive=hints.get("destructive"),
                    idempotent=hints.get("idempotent"),
                    open_world=hints.get("open_world"),
                ),
                namespace=None,
                default_active=None,
                renders_own_frame=False,
                prepares_arguments=False,
                mutates_files=False,
                prepares_loadout=False,
                long_running=decl.long_running,
            )

        class Tool(exports.Tool):
            def metadata(self):
                return plugin._metadata(t)

            def list_tools(self):
                return [spec(decl) for decl in plugin.tools.values()]

            def execute(self, tool, call_id, arguments):
                if tool not in plugin.tools:
                    from componentize_py_types import Err

                    raise Err(f"{plugin.name} has no tool {tool}")
                ctx = Context(host)
                # Relative paths given to open() resolve against the workspace, as they do natively (without a
                # grant of it the plugin cannot enter it, and they stay relative to `/`, where nothing is). A
                # reused instance already there is left alone: wasi-libc's `chdir` asks the host twice, and
                # `getcwd` reads its own copy.
                try:
                    if os.getcwd() != ctx.cwd:
                        os.chdir(ctx.cwd)
                except OSError:
                    pass
                result = plugin.run(tool, json.loads(arguments), ctx)
                if result.is_error and result.details and "traceback" in result.details:
                    # An error result is the model's to read, not a fault of the host: detail for the log.
                    ctx.log(f"{tool} failed: {result.text}\n{result.details['traceback']}", "debug")
                return _to_wit(result)

            def prepare_arguments(self, tool, arguments):
                return None

            def mutated_path(self, tool, arguments):
                return None

            def prepare_loadout(self, tool, loadout):
                return None

            def render_call(self, tool, arguments):
                decl = plugin.tools.get(tool)
                if decl is None or decl.render_call is None:
                    return None
                try:
                    return decl.render_call(json.loads(arguments))
                except Exception:  # noqa: BLE001 - a failing renderer leaves the rendering to the UI
                    traceback.print_exc()
                    return None

            def render_result(self, tool, result, expanded, partial):
                decl = plugin.tools.get(tool)
                if decl is None or decl.render_result is None:
                    return None
                load = lambda text: None if text is None else json.loads(text)  # noqa: E731
                seen = Result("\n".join(c.value for c in result.content if type(c).__name__ == "Content_Text"),
                              structured=load(result.structured_content), details=load(result.details),
                              is_error=bool(result.is_error))
                try:
                    return decl.render_result(seen, expanded, partial)
                except Exception:  # noqa: BLE001 - a failing renderer leaves the rendering to the UI
                    traceback.print_exc()
                    return None

        return Tool


class Component:
    """The built component, run by `toolwright exec` (tests): the calls a native test makes, made to the component
    the host loads (CPython 3.14 inside, the modules it was built with, the sandbox and the grants of `policy`).
    `toolwright` is `$TOOLWRIGHT`, or found on `PATH`; compiled code is cached as for any run.

        component = Component("my_tool.wasm")          # fails when missing, or older than the app's sources
        result = component.run("count_words", {"path": "a.txt"}, workspace)
    """

    def __init__(self, wasm, policy="toolwright.toml"):
        self.wasm = os.path.abspath(wasm)
        self.policy = os.path.abspath(policy) if policy else None
        directory = os.path.dirname(self.wasm)
        if not os.path.exists(self.wasm):
            raise FileNotFoundError(f"{wasm} is not built: run ./build.sh first")
        built = os.path.getmtime(self.wasm)
        changed = sorted(f for f in os.listdir(directory) if f.endswith(".py") and not f.startswith("test")
                         and os.path.getmtime(os.path.join(directory, f)) > built)
        if changed:
            raise RuntimeError(f"{', '.join(changed)} changed since {wasm} was built: run ./build.sh again")

    def run(self, tool, args, cwd):
        """One call of `tool` with `args` in the workspace `cwd`, through the host's whole pipeline: its
        `Result` (text, structured content, details, error flag), or a refusal as the model would see it."""
        import shutil
        import subprocess

        toolwright = os.environ.get("TOOLWRIGHT") or shutil.which("toolwright")
        if not toolwright:
            raise RuntimeError("toolwright is not on PATH: install it, or set TOOLWRIGHT to its path")
        command = [toolwright, "exec", "-", "--json", "--no-default-plugins", "--plugins",
                   os.path.dirname(self.wasm), "--cwd", os.path.abspath(cwd)]
        if self.policy:
            command += ["--policy", self.policy]
        calls = {"toolCalls": [{"id": "1", "name": tool, "arguments": args}]}
        out = subprocess.run(command, input=json.dumps(calls), capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"toolwright exec failed ({out.returncode}): {out.stderr}")
        for line in out.stdout.splitlines():
            event = json.loads(line)
            if event.get("type") == "tool_execution_end":
                result = event["result"]
                text = "\n".join(c["text"] for c in result.get("content", []) if c.get("type") == "text")
                return Result(text, result.get("structuredContent"), result.get("details"), bool(event["isError"]))
        raise RuntimeError(f"toolwright exec gave no result for {tool}: {out.stdout}{out.stderr}")
