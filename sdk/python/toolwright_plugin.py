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

A handler plugin (world `handler-plugin`, pi's `tool_call` hook) declares one function instead::

    @plugin.on_tool_call
    def guard(tool, args):
        if tool == "bash" and "rm -rf" in args.get("command", ""):
            return Block("recursive deletes are not allowed")
        return None          # allow; Rewrite({...}) runs the call with other arguments

    Handler = plugin.export_handler()

A handler that raises blocks the call (as pi does), with the error as the reason.
"""

import json
import os
import traceback

__all__ = ["Plugin", "Context", "Result", "Block", "Rewrite", "Read", "Write", "Spawn", "Env", "Network"]


class Result:
    """A tool result: text for the model, and optionally structured content, details and an error flag."""

    def __init__(self, text, structured=None, details=None, is_error=False):
        self.text = text
        self.structured = structured
        self.details = details
        self.is_error = is_error


class Block:
    """A `tool_call` decision: do not run the call; the model sees `reason`."""

    def __init__(self, reason=None, terminate=False):
        self.reason, self.terminate = reason, terminate


class Rewrite:
    """A `tool_call` decision: run the call with these arguments instead (not validated again)."""

    def __init__(self, arguments):
        self.arguments = arguments


class _Request:
    def __init__(self, kind, target, reason):
        self.kind, self.target, self.reason = kind, target, reason


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
            from wit_world.imports.types import LogLevel

            self._host.log(getattr(LogLevel, level.upper()), str(message))

    def update(self, text):
        """Report a partial result (progress) while the call runs."""
        if self._host:
            self._host.update(_to_wit(Result(text)))

    def is_cancelled(self):
        """Whether the call was cancelled; long-running tools check it often."""
        return bool(self._host and self._host.is_cancelled())

    @staticmethod
    def result(text, structured=None, details=None, is_error=False):
        """A result with structured content (matching the tool's output schema), details or an error flag."""
        return Result(text, structured, details, is_error)


def _to_wit(result):
    from wit_world.imports.types import Content_Text, ToolResult

    if isinstance(result, str):
        result = Result(result)
    dump = lambda value: None if value is None else json.dumps(value)  # noqa: E731
    return ToolResult(
        content=[Content_Text(result.text)],
        details=dump(result.details),
        structured_content=dump(result.structured),
        usage=None,
        is_error=True if result.is_error else None,
        terminate=None,
    )


class _ToolDecl:
    def __init__(self, function, name, description, parameters, output_schema, annotations, snippet):
        self.function = function
        self.name = name
        self.description = description
        self.parameters = parameters
        self.output_schema = output_schema
        self.annotations = annotations
        self.snippet = snippet


class Plugin:
    """A plugin: its metadata, the capabilities it asks for, and its tools."""

    def __init__(self, name, version, description, capabilities=()):
        self.name, self.version, self.description = name, version, description
        self.capabilities = list(capabilities)
        self.tools = {}
        self.tool_call = None

    def tool(self, description, parameters, name=None, output_schema=None, annotations=None, snippet=None):
        """Declare the decorated function `f(args, ctx)` as a tool (named after the function unless `name`).
        `annotations` are MCP's hints: a dict of `read_only`, `destructive`, `idempotent`, `open_world`."""

        def declare(function):
            decl = _ToolDecl(function, name or function.__name__, description, parameters, output_schema,
                             annotations, snippet)
            self.tools[decl.name] = decl
            return function

        return declare

    def on_tool_call(self, function):
        """Declare the decorated `f(tool, args)` as the plugin's `tool_call` hook: it returns `None` to allow,
        `Block(reason)` or `Rewrite(arguments)`."""
        self.tool_call = function
        return function

    def decide(self, tool, args):
        """Run the `tool_call` hook natively (tests, and the export): a raise blocks, with the error as reason."""
        try:
            return self.tool_call(tool, args) if self.tool_call else None
        except Exception as error:  # noqa: BLE001 - pi blocks a call whose handler fails
            return Block(f"{self.name} failed: {type(error).__name__}: {error}")

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
        from wit_world.exports import handler as h
        from wit_world.imports import types as t

        plugin = self

        class Handler(exports.Handler):
            def metadata(self):
                return plugin._metadata(t)

            def tool_call(self, event):
                decision = plugin.decide(event.tool_name, json.loads(event.input))
                if isinstance(decision, Block):
                    return h.ToolCallDecision_Block(h.Block(decision.reason, decision.terminate))
                if isinstance(decision, Rewrite):
                    return h.ToolCallDecision_Rewrite(json.dumps(decision.arguments))
                return h.ToolCallDecision_Allow()

            def tool_result(self, event):
                return None

        return Handler

    def run(self, tool, args, ctx):
        """Run `tool` natively (tests): its `Result`, an exception becoming an error result."""
        try:
            result = self.tools[tool].function(args, ctx)
            return Result(result) if isinstance(result, str) else result
        except Exception as error:  # noqa: BLE001 - every failure is the model's to read
            return Result(f"{type(error).__name__}: {error}", details={"traceback": traceback.format_exc()},
                          is_error=True)

    def export(self):
        """The class componentize-py exports (assign it to `Tool` in the app module)."""
        from wit_world import exports
        from wit_world.imports import host
        from wit_world.imports import types as t

        plugin = self

        def spec(decl):
            hints = decl.annotations
            return t.ToolSpec(
                name=decl.name,
                label=decl.name,
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
                result = plugin.run(tool, json.loads(arguments), ctx)
                if result.is_error and result.details and "traceback" in result.details:
                    ctx.log(result.details["traceback"], "error")
                return _to_wit(result)

            def prepare_arguments(self, tool, arguments):
                return None

            def mutated_path(self, tool, arguments):
                return None

            def prepare_loadout(self, tool, loadout):
                return None

            def render_call(self, tool, arguments):
                return None

            def render_result(self, tool, result, expanded, partial):
                return None

        return Tool
