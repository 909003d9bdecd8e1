"""An MCP server written with the official Python SDK (`mcp` 2.x), for Toolwright's MCP client tests.

`python sdk_server.py` serves on stdio; `python sdk_server.py http PORT` serves streamable HTTP on loopback.
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-probe", instructions="A server made with the official Python SDK.")


@server.tool(description="Add two integers")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Read a file and return its text")
def read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        return f"cannot read: {e}"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
