// A stdio MCP server whose tools are whatever a JSON file says, for the drift and poisoning
// tests: start it, change the file, start it again; or change the file while it runs, and it
// announces a new tool list (notifications/tools/list_changed), then appends a line to
// CALLS.log.announced. Built on the official TypeScript SDK that scripts/setup.sh installs (its
// folder is argv[2]); every call is appended to a log (argv[4]) so a test can show what reached
// the server, and what never did.
//
//
// TOOLS.json is an array of tool definitions; or `{"sequence": [ARRAY, ARRAY, ...]}`, a
// catalogue per start (the Nth start serves the Nth, the last one after that; starts are
// counted in TOOLS.json.starts), for a server that shows one thing to one connection and
// another to the next. Beside its definition, a tool may say what its calls answer (ours,
// never listed): `reply` (a text), `result` (a whole CallToolResult, sent as is) or `rpcError`
// (`{code, message, pad}`: a JSON-RPC error whose message is `message` then `pad` letters y).
//
//   node fixture_server.mjs NODE_MODULES TOOLS.json CALLS.log
import { appendFileSync, existsSync, readFileSync, watchFile, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, toolsFile, callsLog] = process.argv.slice(2);
const sdk = (rel) => import(pathToFileURL(join(nodeModules, "@modelcontextprotocol/sdk/dist/esm", rel)).href);
const { Server } = await sdk("server/index.js");
const { StdioServerTransport } = await sdk("server/stdio.js");
const { ListToolsRequestSchema, CallToolRequestSchema, McpError } = await sdk("types.js");

const startsFile = toolsFile + ".starts";
const starts = existsSync(startsFile) ? Number(readFileSync(startsFile, "utf8")) : 0;
writeFileSync(startsFile, String(starts + 1));
const catalogue = () => {
  const read = JSON.parse(readFileSync(toolsFile, "utf8"));
  if (Array.isArray(read)) return read;
  return read.sequence[Math.min(starts, read.sequence.length - 1)];
};
let tools = catalogue();
const server = new Server(
  { name: "toolgate-fixture", version: "1.0.0" },
  { capabilities: { tools: { listChanged: true } } },
);
// `reply` (what a call answers) is ours, not part of the definition.
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: tools.map(({ reply, result, rpcError, ...definition }) => definition),
}));
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const { name, arguments: args } = request.params;
  appendFileSync(callsLog, JSON.stringify({ name, arguments: args ?? {}, meta: request.params._meta ?? null }) + "\n");
  const tool = tools.find((t) => t.name === name);
  if (!tool) {
    return { isError: true, content: [{ type: "text", text: `no tool ${name}` }] };
  }
  if (tool.rpcError) {
    const { code, message, pad } = tool.rpcError;
    throw new McpError(code, message + "y".repeat(pad ?? 0));
  }
  if (tool.result) return tool.result;
  return { content: [{ type: "text", text: tool.reply ?? `${name} done with ${JSON.stringify(args ?? {})}` }] };
});
// The file watcher would keep Node alive: end with the session, or when stdin closes.
server.onclose = () => process.exit(0);
process.stdin.on("end", () => process.exit(0));
await server.connect(new StdioServerTransport());
watchFile(toolsFile, { interval: 100 }, async () => {
  tools = catalogue();
  await server.sendToolListChanged();
  appendFileSync(callsLog + ".announced", "tools/list_changed\n");
});
