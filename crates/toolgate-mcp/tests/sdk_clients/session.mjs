// A whole session with our server, as a host on an official TypeScript SDK client has it:
// connect, list the tools, call one, end the session, close. Anything the SDK reports (an
// `onerror`, a failed `terminateSession`, a warning it logs) goes to stderr, which the test
// expects empty; stdout gets one line per step.
//
//   node session.mjs NODE_MODULES URL v1|v2
//
// v1: @modelcontextprotocol/sdk (1.x, 2025-11-25, sessions ended with an HTTP DELETE);
// v2: @modelcontextprotocol/client (2.x, 2026-07-28 first).
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [nodeModules, url, line] = process.argv.slice(2);
const load = (rel) => import(pathToFileURL(join(nodeModules, rel)).href);

let Client, StreamableHTTPClientTransport;
if (line === "v1") {
  ({ Client } = await load("@modelcontextprotocol/sdk/dist/esm/client/index.js"));
  ({ StreamableHTTPClientTransport } = await load(
    "@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js"
  ));
} else {
  ({ Client, StreamableHTTPClientTransport } = await load(
    "@modelcontextprotocol/client/dist/index.mjs"
  ));
}

const transport = new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: `sdk-${line}`, version: "1.0.0" });
let phase = "connect";
const report = (where) => (error) => console.error(`${where} (${phase}): ${error?.stack ?? error}`);
// The Protocol layer hands the transport's errors to the client's handler.
client.onerror = report("client.onerror");

await client.connect(transport);
phase = "session";
console.log(`connected ${transport.sessionId ?? "(no session)"}`);
const { tools } = await client.listTools();
console.log(`listed ${tools.map((t) => t.name).join(",")}`);
const result = await client.callTool({ name: "echo_text", arguments: { text: "from the sdk" } });
console.log(`called ${JSON.stringify(result.content)}`);
if (transport.sessionId) {
  try {
    await transport.terminateSession();
    console.log(`terminated ${transport.sessionId ?? "(forgotten)"}`);
  } catch (error) {
    report("terminateSession")(error);
  }
}
phase = "close";
await client.close();
console.log("closed");
