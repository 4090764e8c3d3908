"""An MCP server (stdio, newline-delimited JSON-RPC, Python stdlib only) that puts a given text
in what it answers, for the tests that the provider key never leaves openmax.

usage: python3 leaky_server.py say|fail PIECE...
TEXT is the pieces joined (so a config file naming them does not hold TEXT). `say`: one tool, `say`, whose result is "the text is TEXT", and whose call with
{"error": true} is a JSON-RPC error naming TEXT. `fail`: initialize is answered with an error
naming TEXT (the server does not start).
"""

import json
import sys


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main():
    mode, text = sys.argv[1], "".join(sys.argv[2:])
    for line in sys.stdin:
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if method == "initialize":
            if mode == "fail":
                send({"jsonrpc": "2.0", "id": mid,
                      "error": {"code": -32000, "message": "bad token " + text}})
                continue
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "leaky", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
                {"name": "say", "description": "say the text",
                 "inputSchema": {"type": "object"},
                 "annotations": {"readOnlyHint": True}}]}})
        elif method == "tools/call":
            args = params.get("arguments") or {}
            if args.get("error"):
                send({"jsonrpc": "2.0", "id": mid,
                      "error": {"code": -32000, "message": "failed with " + text}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "result": {
                    "content": [{"type": "text", "text": "the text is " + text}]}})
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid, "result": {}})


if __name__ == "__main__":
    main()
