// host.mjs is an MCP Apps host for the end-to-end tests: the page a chat
// client would be, reduced to what shows one App. It connects to an MCP
// server with the TypeScript SDK v2 client (@modelcontextprotocol/client)
// and a bearer token, calls a tool that names an App in its _meta, reads
// the App's HTML, shows it through a sandbox page on another origin (which
// writes it into an inner frame, sandbox.html), and joins the App to the
// server with the extension's own AppBridge
// (@modelcontextprotocol/ext-apps/app-bridge), which passes the App's own
// requests (tools/call, resources/read, …) to the client as the App sent
// them. Every request the bridge passes on is logged, with its answer.
//
// esbuild bundles it for the browser (e2e/apps_test.go); the test drives
// it over the DevTools protocol:
//
//   await window.appHost.open({mcpUrl, token, protocol, tool, arguments, sandboxUrl})
//     → {protocolVersion, tool, resourceUri, htmlBytes, result}
//   window.appHost.log   the App's requests: {method, name, uri, result, error}
//   window.appHost.tools the tools the server listed: [{name, _meta}]
//
// protocol "2026-07-28" pins the client to that revision; empty speaks the
// SDK's default, the 2025 era's initialize handshake.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { AppBridge, PostMessageTransport, getToolUiResourceUri } from '@modelcontextprotocol/ext-apps/app-bridge';

const log = [];
let tools = [];

// textOf is the text of a tool result's text content.
const textOf = (res) => (res?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

// record wraps client.request so that each request the bridge passes on
// for the App is logged with its answer. The host's own requests go
// through hostRequest, which is not logged.
function record(client) {
  const request = client.request.bind(client);
  client.hostRequest = request;
  client.request = async (req, ...rest) => {
    const entry = { method: req.method, name: req.params?.name, uri: req.params?.uri };
    log.push(entry);
    try {
      const res = await request(req, ...rest);
      entry.result = req.method === 'tools/call' ? { isError: !!res.isError, text: textOf(res) } : { ok: true };
      return res;
    } catch (err) {
      entry.error = { code: err?.code ?? null, message: String(err?.message ?? err) };
      throw err;
    }
  };
}

async function open({ mcpUrl, token, protocol, tool, arguments: args = {}, sandboxUrl }) {
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const options = protocol ? { versionNegotiation: { mode: { pin: protocol } } } : undefined;
  const client = new Client({ name: 'portcullis-e2e-app-host', version: '0.0.1' }, {
    ...options,
    capabilities: { extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: ['text/html;profile=mcp-app'] } } },
  });
  await client.connect(transport);
  const protocolVersion = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null;
  tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    tools.push(...page.tools.map((t) => ({ name: t.name, _meta: t._meta ?? null })));
    cursor = page.nextCursor;
  } while (cursor);
  const listed = tools.find((t) => t.name === tool);
  if (!listed) throw new Error(`the server lists no tool ${tool}: ${tools.map((t) => t.name).join(', ')}`);
  const resourceUri = getToolUiResourceUri(listed);
  if (!resourceUri) throw new Error(`${tool} names no App in its _meta: ${JSON.stringify(listed._meta)}`);
  const read = await client.readResource({ uri: resourceUri });
  const content = read.contents.find((c) => c.uri === resourceUri) ?? read.contents[0];
  const html = content?.text;
  if (typeof html !== 'string' || !html) throw new Error(`reading ${resourceUri}: no HTML: ${JSON.stringify(read).slice(0, 300)}`);
  record(client);

  const frame = document.createElement('iframe');
  frame.id = 'app';
  frame.style.width = '800px';
  frame.style.height = '600px';
  const sandboxReady = new Promise((resolve) => {
    const onMessage = (ev) => {
      if (ev.source === frame.contentWindow && ev.data?.method === 'ui/notifications/sandbox-proxy-ready') {
        window.removeEventListener('message', onMessage);
        resolve();
      }
    };
    window.addEventListener('message', onMessage);
  });
  frame.src = sandboxUrl;
  document.body.appendChild(frame);
  await sandboxReady;

  const bridge = new AppBridge(client, { name: 'portcullis-e2e-app-host', version: '0.0.1' },
    { openLinks: {}, serverTools: {}, serverResources: {}, logging: {} });
  const initialized = new Promise((resolve) => bridge.addEventListener('initialized', resolve));
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  await bridge.sendSandboxResourceReady({ html, sandbox: 'allow-scripts', csp: content?._meta?.ui?.csp });
  await initialized;

  // The model's call of the tool, whose input and result the App shows.
  const result = await client.hostRequest({ method: 'tools/call', params: { name: tool, arguments: args } });
  await bridge.sendToolInput({ arguments: args });
  await bridge.sendToolResult(result);
  return { protocolVersion, tool, resourceUri, htmlBytes: html.length, result: { isError: !!result.isError, text: textOf(result) } };
}

window.appHost = { open, log, get tools() { return tools; } };
