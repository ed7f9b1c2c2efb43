"""A whole 2025-11-25 session with our server on the official Python SDK's client (the `mcp`
package pinned in crates/toolgate-mcp-bench/servers/python/requirements.txt): initialize, list
the tools, call one, and leave, which ends the session with an HTTP DELETE. The SDK's log at
WARNING and above goes to stderr (the test expects it empty, e.g. no "Session termination
failed: 202"); stdout gets one line per step.

    python session.py URL
"""

import asyncio
import logging
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url: str) -> None:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            result = await session.initialize()
            print(f"initialized {result.protocol_version}")
            tools = await session.list_tools()
            print("listed " + ",".join(t.name for t in tools.tools))
            called = await session.call_tool("echo_text", {"text": "from the sdk"})
            print("called " + " ".join(getattr(c, "text", "") for c in called.content))
    print("closed")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    asyncio.run(main(sys.argv[1]))
