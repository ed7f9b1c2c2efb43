// TypeScript SDK server of the MCP-over-HTTP benchmark.
//
// The official TypeScript SDK (@modelcontextprotocol/sdk, pinned in package.json) serving one
// trivial read tool, books_get ({"ids": [int]} in, a small JSON text out), over Streamable
// HTTP with the SDK's low-level Server and node:http (no framework), on 127.0.0.1 only. One
// transport and Server per session, as the SDK's own examples do; a sessionless request gets
// a one-shot stateless transport, so the SDK answers the 2026-07-28 shape itself. It stops itself after
// --max-seconds.
//
// Usage: node server.mjs --port PORT [--max-seconds S]

import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ErrorCode,
  isInitializeRequest,
} from "@modelcontextprotocol/sdk/types.js";

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
  const server = new Server({ name: "bench-typescript", version: "0.1.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [TOOL] }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    if (request.params.name !== "books_get") {
      throw new McpError(ErrorCode.InvalidParams, `unknown tool ${request.params.name}`);
    }
    const ids = request.params.arguments?.ids ?? [];
    const books = ids.filter(Number.isInteger).map((id) => ({ id, ...BOOK }));
    return { content: [{ type: "text", text: JSON.stringify({ books, missing: [] }) }] };
  });
  return server;
}

const transports = new Map();

function reply(res, status, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
}

const http = createServer(async (req, res) => {
  try {
    const sessionId = req.headers["mcp-session-id"];
    const body = req.method === "POST" ? await readJson(req) : undefined;
    let transport = sessionId ? transports.get(sessionId) : undefined;
    if (!transport && !sessionId && req.method === "POST" && !isInitializeRequest(body)) {
      // A sessionless request (the 2026-07-28 shape): a one-shot stateless transport, so the
      // SDK itself decides whether it speaks that revision.
      const oneShot = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      const server = mcpServer();
      res.on("close", () => {
        oneShot.close();
        server.close();
      });
      await server.connect(oneShot);
      return await oneShot.handleRequest(req, res, body);
    }
    if (!transport) {
      if (sessionId || req.method !== "POST") {
        return reply(res, 404, "Session not found");
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => {
        if (transport.sessionId) transports.delete(transport.sessionId);
      };
      await mcpServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  } catch (error) {
    if (!res.headersSent) reply(res, 500, String(error));
  }
});

http.keepAliveTimeout = 60_000;
http.listen(port, "127.0.0.1", () => console.error(`bench-typescript listening on http://127.0.0.1:${port}/mcp`));
setTimeout(() => {
  console.error(`bench-typescript: ${maxSeconds}s limit reached, stopping`);
  process.exit(0);
}, maxSeconds * 1000).unref();
