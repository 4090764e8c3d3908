"""A streamable HTTP MCP server of the official Python SDK answering in JSON, not SSE."""
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("json-http")


@server.tool()
def sized(n: int) -> str:
    """Text of n bytes."""
    return "x" * n


server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), json_response=True)
