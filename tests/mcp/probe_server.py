#!/usr/bin/env python3
"""A small MCP server on stdio, with no dependency, for Toolwright's MCP client tests.

Its tools exercise what the client must carry: text, images, errors, progress, a large result, a read of any
file it is given (to try the sandbox), an exit in the middle of a call, and a change of its tools' descriptions
(`PROBE_DESCRIBE` in its environment, or a file `describe.txt` beside this script, replaces `echo`'s).
"""

import base64
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def echo_description():
    path = os.path.join(HERE, "describe.txt")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    return os.environ.get("PROBE_DESCRIBE", "Echo the text")


def tools():
    return [
        {
            "name": "echo",
            "description": echo_description(),
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "annotations": {"readOnlyHint": True, "title": "Echo"},
        },
        {"name": "err", "title": "Err title", "inputSchema": {"type": "object"}},
        {"name": "big", "inputSchema": {"type": "object", "properties": {}}},
        {
            "name": "read_file",
            "description": "Read a file",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
        {"name": "progress", "description": "Report progress", "inputSchema": {"type": "object"}},
        {"name": "die", "description": "Exit at once", "inputSchema": {"type": "object"}},
        {
            "name": "typed",
            "description": "Typed search.",
            "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
            "outputSchema": {"type": "object", "properties": {"hits": {"type": "array"}}},
        },
        {"name": "image", "description": "A picture", "inputSchema": {"type": "object"}},
        {"name": "env", "description": "Its environment's names", "inputSchema": {"type": "object"}},
        {
            "name": "connect",
            "description": "Open a TCP connection",
            "inputSchema": {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}},
        },
        {
            "name": "write_file",
            "description": "Write a file",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}},
        },
    ]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(id_, value):
    send({"jsonrpc": "2.0", "id": id_, "result": value})


def text(t, **extra):
    return dict({"content": [{"type": "text", "text": t}]}, **extra)


def call(id_, params):
    name = params.get("name")
    args = params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    if name == "echo":
        return result(id_, text("echo: " + str(args.get("text"))))
    if name == "err":
        return result(id_, {"content": [], "isError": True})
    if name == "big":
        return result(id_, text("\n".join(["A" * 6253] * 4) + "A"))
    if name == "read_file":
        try:
            with open(args.get("path", ""), encoding="utf-8", errors="replace") as f:
                return result(id_, text(f.read()))
        except OSError as e:
            return result(id_, text(f"cannot read: {e}", isError=True))
    if name == "progress":
        for i in range(1, 4):
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": i, "total": 3}})
            time.sleep(0.05)
        return result(id_, text("done"))
    if name == "die":
        sys.stderr.write("dying on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    if name == "typed":
        return result(id_, {"content": [], "structuredContent": {"hits": [1, 2]}})
    if name == "image":
        png = base64.b64encode(bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
            "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")).decode()
        return result(id_, {"content": [{"type": "image", "data": png, "mimeType": "image/png"},
                                        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]})
    if name == "connect":
        import socket
        try:
            socket.create_connection((args.get("host"), int(args.get("port"))), timeout=2).close()
            return result(id_, text("connected"))
        except OSError as e:
            return result(id_, text(f"cannot connect: {e}", isError=True))
    if name == "write_file":
        try:
            with open(args.get("path", ""), "w", encoding="utf-8") as f:
                f.write(args.get("text", ""))
            return result(id_, text("written"))
        except OSError as e:
            return result(id_, text(f"cannot write: {e}", isError=True))
    if name == "env":
        return result(id_, text(" ".join(sorted(os.environ))))
    send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})


def main():
    sys.stderr.write("probe server started\n")
    sys.stderr.flush()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        message = json.loads(line)
        method = message.get("method")
        id_ = message.get("id")
        if method == "initialize":
            result(id_, {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": True}, "resources": {}},
                "serverInfo": {"name": "probe", "version": "1.0.0"},
                "instructions": os.environ.get("PROBE_INSTRUCTIONS", "Probe server for tests.\nSecond line."),
            })
        elif method == "tools/list":
            result(id_, {"tools": tools()})
        elif method == "tools/call":
            call(id_, message.get("params") or {})
        elif method == "resources/list":
            result(id_, {"resources": [{"name": "one", "uri": "file:///r/one.txt", "mimeType": "text/plain"}]})
        elif method == "resources/templates/list":
            result(id_, {"resourceTemplates": [{"uriTemplate": "file:///r/{name}", "name": "byname"}]})
        elif method == "resources/read":
            uri = (message.get("params") or {}).get("uri")
            if uri == "file:///r/one.txt":
                result(id_, {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "the first"}]})
            else:
                send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32002, "message": f"Resource not found: {uri}"}})
        elif method == "ping":
            result(id_, {})
        elif id_ is not None:
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": f"Method not found: {method}"}})


if __name__ == "__main__":
    main()
