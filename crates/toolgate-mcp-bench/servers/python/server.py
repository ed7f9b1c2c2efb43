"""Python SDK server of the MCP-over-HTTP benchmark.

The official Python SDK (`mcp`, pinned in requirements.txt) serving one trivial read tool,
`books_get` (`{"ids": [int]}` in, a small JSON text out), over Streamable HTTP with its
low-level `Server` (no validation layer beyond the SDK's own), on 127.0.0.1 only. The SDK
serves both revisions on one endpoint: 2025-11-25 with sessions, 2026-07-28 stateless.
It stops itself after --max-seconds.

Usage: python server.py --port PORT [--max-seconds S]
"""

import argparse
import asyncio
import json

import mcp_types as types
import uvicorn
from mcp.server import Server

BOOK = {"title": "The Left Hand of Darkness", "author": "Ursula K. Le Guin", "year": 1969, "status": "read"}

TOOL = types.Tool(
    name="books_get",
    description="Get books by id.",
    input_schema={
        "type": "object",
        "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
        "required": ["ids"],
        "additionalProperties": False,
    },
)


async def list_tools(_ctx, _params):
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(_ctx, params):
    if params.name != "books_get":
        raise ValueError(f"unknown tool {params.name}")
    ids = (params.arguments or {}).get("ids", [])
    books = [{"id": i, **BOOK} for i in ids if isinstance(i, int)]
    text = json.dumps({"books": books, "missing": []}, separators=(",", ":"))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-seconds", type=float, default=900)
    args = parser.parse_args()

    server = Server("bench-python", version="0.1.0", on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
    web = uvicorn.Server(config)

    async def stop_later() -> None:
        await asyncio.sleep(args.max_seconds)
        web.should_exit = True

    stopper = asyncio.create_task(stop_later())
    await web.serve()
    stopper.cancel()


if __name__ == "__main__":
    asyncio.run(main())
