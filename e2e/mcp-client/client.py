#!/usr/bin/env python3
# A real MCP client for the e2e tests (e2e/tests/mcp.rs): the reference Python SDK (`mcp` from
# PyPI) spawns `aoctl mcp` over stdio with the given environment, initializes, lists the tools and
# makes the calls read as a JSON list from stdin ([{"name": ..., "arguments": {...}}, ...]). It
# prints one JSON document: the negotiated protocol version, the tool names, and per call either
# the tool result (camelCase, as on the wire) or the JSON-RPC error the server answered.
#
# Usage: client.py AOCTL_BINARY < calls.json   (AOCTL_SERVER and AOCTL_SESSION_TOKEN from the environment)
import asyncio
import json
import os
import sys

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client


async def main() -> None:
    calls = json.load(sys.stdin)
    env = {k: os.environ[k] for k in ("AOCTL_SERVER", "AOCTL_SESSION_TOKEN", "PATH", "HOME") if k in os.environ}
    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], env=env)
    out = {"calls": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=120) as session:
            init = await session.initialize()
            out["protocolVersion"] = init.protocol_version
            tools = await session.list_tools()
            out["tools"] = [t.name for t in tools.tools]
            for call in calls:
                try:
                    result = await session.call_tool(call["name"], call.get("arguments"))
                    out["calls"].append({"result": result.model_dump(by_alias=True, mode="json", exclude_none=True)})
                except MCPError as e:
                    out["calls"].append({"error": {"code": e.code, "message": e.message}})
    print(json.dumps(out))


asyncio.run(main())
