// oauth-client.mjs is a real MCP client for the end-to-end tests: the
// TypeScript SDK's Client over Streamable HTTP with its OAuth support (an
// OAuthClientProvider for a pre-registered public client), driven by the
// Go test over stdin and stdout, since the browser step cannot run here.
//
// Usage (Node >= 22; the SDK is the one scripts/install-node-tools.sh
// installs with the Inspector):
//
//   MCP_SDK_DIR=.cache/node-tools MCP_URL=http://127.0.0.1:PORT/mcp \
//   MCP_CLIENT_ID=e2e-app MCP_REDIRECT_URL=http://127.0.0.1:PORT/callback \
//   MCP_CALLS='[{"name":"PingME","arguments":{}}]' node oauth-client.mjs
//
// MCP_DROP_REFRESH_TOKEN=1 keeps no refresh token, as a client that does
// not ask for offline access: the SDK (v1) then answers a step-up 403 with
// a new authorization; holding one, it refreshes instead, which cannot
// widen the scope, and gives up (typescript-sdk#2255, fixed in v2).
//
// It writes one JSON object a line on stdout:
//   {"event":"sdk","version":"1.x"}
//   {"event":"registered","clientId":"…"}  (without MCP_CLIENT_ID)
//   {"event":"authorize","url":"…"}   then waits for one line on stdin:
//                                     {"code":"…","state":"…"} (the redirect's)
//   {"event":"connected","protocolVersion":"…"}
//   {"event":"tools","names":[…]}
//   {"event":"result","name":"…","isError":false,"text":"…"}
//   {"event":"error","name":"…","message":"…"}  (a call that failed)
// and exits 0 when every call was made (each a result or an error), 1 on
// any other failure (on stderr).

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { createRequire } from 'node:module';

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    process.stderr.write(`oauth-client: ${name} is not set\n`);
    process.exit(1);
  }
  return v;
};

const require = createRequire(path.join(path.resolve(env('MCP_SDK_DIR')), 'package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { UnauthorizedError } = require('@modelcontextprotocol/sdk/client/auth.js');
// The package's own package.json (its exports map "./*" to dist/).
const sdkVersion = JSON.parse(
  fs.readFileSync(path.join(path.dirname(require.resolve('@modelcontextprotocol/sdk/client/index.js')), '..', '..', '..', 'package.json'), 'utf8'),
).version;

const mcpURL = new URL(env('MCP_URL'));
// Without MCP_CLIENT_ID the SDK registers the client (RFC 7591).
const clientID = process.env.MCP_CLIENT_ID;
const redirectURL = env('MCP_REDIRECT_URL');
const calls = JSON.parse(env('MCP_CALLS'));

const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

// provider keeps what a real client keeps (in memory here): the
// pre-registered client's id, the PKCE verifier, the state and the tokens.
const provider = {
  pending: undefined, // the authorization URL the SDK wants opened
  sentState: undefined,
  verifier: undefined,
  saved: undefined,
  get redirectUrl() {
    return redirectURL;
  },
  get clientMetadata() {
    return {
      client_name: 'portcullis-e2e-ts',
      redirect_uris: [redirectURL],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  },
  state() {
    this.sentState = crypto.randomBytes(24).toString('base64url');
    return this.sentState;
  },
  registered: undefined,
  clientInformation() {
    return clientID ? { client_id: clientID } : this.registered;
  },
  saveClientInformation(info) {
    this.registered = info;
    emit({ event: 'registered', clientId: info.client_id });
  },
  tokens() {
    return this.saved;
  },
  saveTokens(t) {
    // MCP_DROP_REFRESH_TOKEN=1: a client that keeps no refresh token.
    this.saved = process.env.MCP_DROP_REFRESH_TOKEN === '1' ? { ...t, refresh_token: undefined } : t;
  },
  redirectToAuthorization(url) {
    this.pending = url;
  },
  saveCodeVerifier(v) {
    this.verifier = v;
  },
  codeVerifier() {
    return this.verifier;
  },
};

// authorized runs fn; when the SDK stopped for an authorization (the 401
// of the first request, or a 403 insufficient_scope: step-up), it hands
// the URL to the test, which plays the browser, finishes the
// authorization with the code it sends back, and runs fn again.
async function authorized(transport, fn) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof UnauthorizedError) || !provider.pending || attempt >= 2) throw err;
      const url = provider.pending;
      provider.pending = undefined;
      emit({ event: 'authorize', url: url.href });
      const { value, done } = await lines.next();
      if (done) throw new Error('stdin closed before the authorization code came');
      const { code, state } = JSON.parse(value);
      if (state !== provider.sentState) throw new Error(`state ${state} is not the one sent`);
      await transport().finishAuth(code);
    }
  }
}

emit({ event: 'sdk', version: sdkVersion });
let transport;
let client;
await authorized(
  () => transport,
  async () => {
    transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
    client = new Client({ name: 'portcullis-e2e-ts', version: '0.0.1' });
    await client.connect(transport);
  },
);
emit({ event: 'connected', protocolVersion: transport.protocolVersion ?? null });
const { tools } = await authorized(() => transport, () => client.listTools());
emit({ event: 'tools', names: tools.map((t) => t.name) });
for (const { name, arguments: args } of calls) {
  try {
    const res = await authorized(() => transport, () => client.callTool({ name, arguments: args }));
    const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    emit({ event: 'result', name, isError: !!res.isError, text });
  } catch (err) {
    emit({ event: 'error', name, message: String(err?.message ?? err) });
  }
}
await client.close();
process.exit(0);
