// server.mjs is one of the load harness's peers: the TypeScript MCP SDK's
// StreamableHTTPServerTransport, stateless (no session id generator), with
// one tool, echo, on Node's own http server. It follows the SDK's stateless
// example: a new McpServer and transport for each request. It is never
// shipped.
//
// Usage: node server.mjs -listen HOST:PORT
// It serves MCP at /mcp and answers 200 at /readyz.
import http from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const i = process.argv.indexOf("-listen");
const listen = i >= 0 ? process.argv[i + 1] : "127.0.0.1:8083";
const [host, port] = [listen.slice(0, listen.lastIndexOf(":")), Number(listen.slice(listen.lastIndexOf(":") + 1))];

function newServer() {
  const server = new McpServer({ name: "ts-peer", version: "1.32.2" });
  server.registerTool(
    "echo",
    {
      description: "Returns the given text unchanged.",
      inputSchema: { text: z.string().describe("The text to send back unchanged.") },
    },
    async ({ text }) => ({ content: [{ type: "text", text }] }),
  );
  return server;
}

async function readJSON(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

const httpServer = http.createServer(async (req, res) => {
  if (req.url === "/readyz") {
    res.writeHead(200).end("ok\n");
    return;
  }
  if (req.url !== "/mcp" || req.method !== "POST") {
    res.writeHead(405).end();
    return;
  }
  try {
    const body = await readJSON(req);
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  } catch (err) {
    if (!res.headersSent) res.writeHead(500).end(String(err));
  }
});
httpServer.keepAliveTimeout = 120_000;
httpServer.listen(port, host);
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => httpServer.close(() => process.exit(0)) && httpServer.closeAllConnections());
}
