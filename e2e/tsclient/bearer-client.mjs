// bearer-client.mjs is a real MCP client for the end-to-end tests of
// virtual servers, in either TypeScript SDK: v1 (@modelcontextprotocol/sdk)
// or v2 (@modelcontextprotocol/client). It connects over Streamable HTTP
// with a bearer token it is given, lists every tool (following pages),
// then makes the calls it is given, one after another.
//
// Usage (Node >= 22; the SDKs are the ones scripts/install-node-tools.sh
// pins):
//
//   MCP_SDK_DIR=.cache/node-tools MCP_SDK=v1|v2 \
//   MCP_URL=http://127.0.0.1:PORT/mcp/team-a MCP_TOKEN=… \
//   [MCP_PROTOCOL=2026-07-28] \
//   MCP_CALLS='[{"name":"order","arguments":{"order_id":"A-1"}}]' \
//   node bearer-client.mjs
//
// MCP_PROTOCOL=2026-07-28 (v2 only) pins the client to that revision;
// without it each SDK speaks its default, the 2025 era's initialize
// handshake.
//
// It writes one JSON object a line on stdout:
//   {"event":"sdk","package":"…","version":"…"}
//   {"event":"connected","protocolVersion":"…"}
//   {"event":"tools","tools":[…]}   (each tool as the SDK decoded it)
//   {"event":"result","name":"…","isError":false,"text":"…"}
//   {"event":"error","name":"…","code":-32602,"message":"…"}
// and exits 0 when every call was made (each a result or an error), 1 on
// any other failure (on stderr).

import { helpers, loadSDK } from './sdk.mjs';

const { fail, env } = helpers('bearer-client');
const { which, pkg, sdkVersion, Client, StreamableHTTPClientTransport } = loadSDK('bearer-client');

const url = new URL(env('MCP_URL'));
const token = env('MCP_TOKEN');
const protocol = process.env.MCP_PROTOCOL;
const calls = JSON.parse(process.env.MCP_CALLS || '[]');
if (protocol && which !== 'v2') fail('MCP_PROTOCOL is for the v2 SDK only');

const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

emit({ event: 'sdk', package: pkg, version: sdkVersion });
const transport = new StreamableHTTPClientTransport(url, {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const options = protocol ? { versionNegotiation: { mode: { pin: protocol } } } : undefined;
const client = new Client({ name: `portcullis-e2e-bearer-${which}`, version: '0.0.1' }, options);
try {
  await client.connect(transport);
} catch (err) {
  fail(`connect to ${url}: ${err?.message ?? err}`);
}
emit({ event: 'connected', protocolVersion: client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null });
const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : undefined);
  tools.push(...page.tools);
  cursor = page.nextCursor;
} while (cursor);
emit({ event: 'tools', tools });
for (const { name, arguments: args } of calls) {
  try {
    const res = await client.callTool({ name, arguments: args });
    const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    emit({ event: 'result', name, isError: !!res.isError, text });
  } catch (err) {
    emit({ event: 'error', name, code: err?.code ?? null, message: String(err?.message ?? err) });
  }
}
await client.close();
process.exit(0);
