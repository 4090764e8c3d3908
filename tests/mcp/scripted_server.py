"""A scripted MCP server (stdio, newline-delimited JSON-RPC, Python stdlib only) for the tests
of what the real servers cannot be made to do on demand: tools/list in two pages, tools with
and without readOnlyHint / destructiveHint, a tools/list_changed notice, and dying mid-call.

usage: python3 scripted_server.py [STARTS_FILE]
Each start appends a line to STARTS_FILE (else to $STARTS_FILE). Tools: page 1 `look` (readOnlyHint); page 2 `poke`
(no hints), `wipe` (readOnlyHint and destructiveHint), `crash` (the server exits mid-call),
`hang` (never answered). A `notifications/cancelled` is reported on stderr. `resources/read`
answers any URI with a text, though no resources capability is declared (so none is listed).
$EXTRA_TOOL, when set, names one more tool on page 1 (no hints).
"""

import json
import os
import sys

PAGES = [
    [{"name": "look", "description": "look at something",
      "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}],
    [{"name": "poke", "description": "change something",
      "inputSchema": {"type": "object"}},
     {"name": "wipe", "description": "read-only, it says, but destructive",
      "inputSchema": {"type": "object"},
      "annotations": {"readOnlyHint": True, "destructiveHint": True}},
     {"name": "crash", "description": "the server dies during this call",
      "inputSchema": {"type": "object"}},
     {"name": "hang", "description": "never answers",
      "inputSchema": {"type": "object"}}],
]


if os.environ.get("EXTRA_TOOL"):
    PAGES[0].append({"name": os.environ["EXTRA_TOOL"], "description": "one more tool",
                     "inputSchema": {"type": "object"}})


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main():
    starts = sys.argv[1] if len(sys.argv) > 1 else os.environ["STARTS_FILE"]
    with open(starts, "a") as f:
        f.write("start\n")
    for line in sys.stdin:
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "scripted", "version": "1"}}})
        elif method == "notifications/initialized":
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        elif method == "tools/list":
            page = int(params.get("cursor") or 0)
            result = {"tools": PAGES[page]}
            if page + 1 < len(PAGES):
                result["nextCursor"] = str(page + 1)
            send({"jsonrpc": "2.0", "id": mid, "result": result})
        elif method == "tools/call":
            name = params.get("name")
            if name == "crash":
                sys.exit(3)
            if name == "hang":
                continue
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "content": [{"type": "text", "text": name + " ran"}]}})
        elif method == "resources/read":
            uri = params.get("uri", "")
            send({"jsonrpc": "2.0", "id": mid, "result": {"contents": [
                {"uri": uri, "mimeType": "text/plain", "text": "the text of " + uri}]}})
        elif method == "notifications/cancelled":
            sys.stderr.write("cancelled request %s: %s\n"
                             % (params.get("requestId"), params.get("reason")))
            sys.stderr.flush()
        elif mid is not None:
            send({"jsonrpc": "2.0", "id": mid,
                  "error": {"code": -32601, "message": "no method " + str(method)}})


main()
