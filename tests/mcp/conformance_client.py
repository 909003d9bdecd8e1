#!/usr/bin/env python3
"""The client command the official MCP conformance suite runs against Toolwright's MCP client.

    conformance client --command "python3 conformance_client.py /path/to/toolwright" --scenario tools_call

The suite starts the scenario's server and runs this command with the server's URL appended, the scenario's name in
MCP_CONFORMANCE_SCENARIO (and, from 0.2, the run's protocol revision in MCP_CONFORMANCE_PROTOCOL_VERSION). This
script does what a user does: it writes an mcpServers file naming the URL, then runs `toolwright exec` with a calls
file calling the scenario's tool (`mcp__s__<tool>`), or `toolwright mcp-servers list` where the scenario only wants
the client to connect. Everything runs with a fresh HOME and XDG_CONFIG_HOME, so the user's files, pins and
lockfile are neither read nor written. Exit status: toolwright's.
"""

import json
import os
import subprocess
import sys
import tempfile

# What each scenario's server offers and expects to be called: (tool, arguments) in order. A scenario that is not
# here, or whose context names no `toolCalls`, only has the client connect and list the tools.
CALLS = {
    "tools_call": [("add_numbers", {"a": 5, "b": 3})],
    "sse-retry": [("test_reconnection", {})],
    "elicitation-sep1034-client-defaults": [("test_client_elicitation_defaults", {})],
    "sep-2322-client-request-state": [
        ("test_mrtr_echo_state", {}),
        ("test_mrtr_unrelated", {}),
        ("test_mrtr_no_state", {}),
        ("test_mrtr_no_result_type", {}),
    ],
    "http-standard-headers": [
        ("test_headers", {}),
        ("my-hyphenated-tool", {}),
        # Toolwright's resource tools: resources/list and resources/read on the wire.
        ("list_mcp_resources", {"server": "s"}),
        ("read_mcp_resource", {"server": "s", "uri": "file:///path/to/file%20name.txt"}),
    ],
    # The valid tool, then each invalid one: Toolwright must not let those reach the wire.
    "http-invalid-tool-headers": [("valid_tool", {"region": "us-west1"})] + [
        (name, {"region": "us-west1"})
        for name in ("invalid_empty_header", "invalid_object_header", "invalid_array_header", "invalid_null_header",
                     "invalid_number_header", "invalid_duplicate_same_case", "invalid_duplicate_diff_case",
                     "invalid_space_in_name", "invalid_colon_in_name", "invalid_non_ascii_name",
                     "invalid_control_char_name")
    ],
}

# Toolwright's own tools, called by their names (the others are the server's: mcp__s__<tool>).
OWN_TOOLS = {"list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource"}


def tool_name(name: str) -> str:
    return name if name in OWN_TOOLS else "mcp__s__" + "".join(c if (c.isascii() and c.isalnum()) or c == "_" else "_" for c in name)


def main() -> int:
    toolwright, url = sys.argv[1], sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    with tempfile.TemporaryDirectory(prefix="tw-conformance-") as root:
        home = os.path.join(root, "home")
        config = os.path.join(home, ".config")
        workspace = os.path.join(root, "ws")
        os.makedirs(os.path.join(config, "toolwright"))
        os.makedirs(workspace)
        open(os.path.join(config, "toolwright", "toolwright.toml"), "w").close()
        mcp = os.path.join(root, "mcp.json")
        with open(mcp, "w") as f:
            json.dump({"mcpServers": {"s": {"url": url, "exposure": "direct"}}}, f)
        env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=config)
        env.pop("TOOLWRIGHT_LOG", None)
        common = ["--no-default-plugins", "--no-default-mcp", "--mcp-config", mcp]

        def run(args):
            print("$ toolwright " + " ".join(args), file=sys.stderr, flush=True)
            return subprocess.run([toolwright, *args, *common], env=env, cwd=workspace, stdin=subprocess.DEVNULL)

        def call(calls):
            path = os.path.join(root, "calls.json")
            with open(path, "w") as f:
                json.dump({"toolCalls": [{"id": f"c{i}", "name": tool_name(name), "arguments": arguments}
                                         for i, (name, arguments) in enumerate(calls)],
                           "mode": "sequential"}, f)
            return run(["exec", path]).returncode

        if scenario == "json-schema-2020-12-preservation":
            # Round-trip the focal tool's schema as Toolwright declares it to the model.
            out = subprocess.run([toolwright, "declarations", *common], env=env, cwd=workspace,
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True)
            sys.stderr.write(out.stderr)
            schema = next((t["parameters"] for t in json.loads(out.stdout)
                           if t.get("name") == "mcp__s__json_schema_2020_12_tool"), None)
            if schema is None:
                print("the focal tool was not declared:\n" + out.stdout, file=sys.stderr)
                return 1
            return call([("json_schema_echo", {"schema": schema})])
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
        calls = [(c["name"], c.get("arguments", {})) for c in context.get("toolCalls", [])] or CALLS.get(scenario)
        if calls:
            return call(calls)
        # initialize, and every other scenario: connect, initialize and list the tools.
        return run(["mcp-servers", "list"]).returncode


if __name__ == "__main__":
    sys.exit(main())
