// TypeScript SDK v2 server of the MCP-over-HTTP benchmark.
//
// The official TypeScript SDK's v2 line (@modelcontextprotocol/server, pinned in
// package.json; it implements 2026-07-28) serving one trivial read tool, books_get
// ({"ids": [int]} in, a small JSON text out), through the SDK's createMcpHandler (its
// web-standard fetch entry, default options: 2025-era traffic is served statelessly, without
// sessions) and the SDK's low-level Server, on node:http with a minimal request/response
// bridge, on 127.0.0.1 only. It stops itself after --max-seconds.
//
// Usage: node server.mjs --port PORT [--max-seconds S]

import { createServer } from "node:http";
import { Readable } from "node:stream";
import { parseArgs } from "node:util";
import { createMcpHandler, ProtocolError, ProtocolErrorCode, Server } from "@modelcontextprotocol/server";

const { values } = parseArgs({
  options: { port: { type: "string" }, "max-seconds": { type: "string", default: "900" } },
});
const port = Number(values.port);
const maxSeconds = Number(values["max-seconds"]);

const BOOK = { title: "The Left Hand of Darkness", author: "Ursula K. Le Guin", year: 1969, status: "read" };
const TOOL = {
  name: "books_get",
  description: "Get books by id.",
  inputSchema: {
    type: "object",
    properties: { ids: { type: "array", items: { type: "integer" } } },
    required: ["ids"],
    additionalProperties: false,
  },
};

function mcpServer() {
  const server = new Server({ name: "bench-typescript-v2", version: "0.1.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler("tools/list", async () => ({ tools: [TOOL] }));
  server.setRequestHandler("tools/call", async (request) => {
    if (request.params.name !== "books_get") {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `unknown tool ${request.params.name}`);
    }
    const ids = request.params.arguments?.ids ?? [];
    const books = ids.filter(Number.isInteger).map((id) => ({ id, ...BOOK }));
    return { content: [{ type: "text", text: JSON.stringify({ books, missing: [] }) }] };
  });
  return server;
}

const handler = createMcpHandler(() => mcpServer());

const http = createServer(async (req, res) => {
  try {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
    const hasBody = req.method !== "GET" && req.method !== "HEAD" && chunks.length > 0;
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      body: hasBody ? Buffer.concat(chunks) : undefined,
    });
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      Readable.fromWeb(response.body).pipe(res);
    } else {
      res.end();
    }
  } catch (error) {
    if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
    res.end(String(error));
  }
});

http.keepAliveTimeout = 60_000;
http.listen(port, "127.0.0.1", () => console.error(`bench-typescript-v2 listening on http://127.0.0.1:${port}/mcp`));
setTimeout(() => {
  console.error(`bench-typescript-v2: ${maxSeconds}s limit reached, stopping`);
  process.exit(0);
}, maxSeconds * 1000).unref();
