// oauth-clients.mjs is a real MCP client for the end-to-end tests of the
// authorization server, in either TypeScript SDK: v1
// (@modelcontextprotocol/sdk) or v2 (@modelcontextprotocol/client), over
// Streamable HTTP with the SDK's own OAuth client (an OAuthClientProvider
// kept in memory). The client gets its client_id the way the test says:
// pre-registered (MCP_CLIENT_ID), from a Client ID Metadata Document
// (MCP_CLIENT_METADATA_URL: the SDK uses that URL as its client_id when the
// authorization server's metadata says it supports documents), or else
// by dynamic client registration (RFC 7591). The Go test plays the browser
// over stdin and stdout.
//
// Usage (Node >= 22; the SDKs are the ones scripts/install-node-tools.sh
// pins):
//
//   MCP_SDK_DIR=.cache/node-tools MCP_SDK=v2 MCP_URL=http://127.0.0.1:PORT/mcp \
//   MCP_REDIRECT_URL=http://127.0.0.1:PORT/callback \
//   [MCP_CLIENT_ID=e2e-app | MCP_CLIENT_METADATA_URL=https://…/client.json] \
//   [MCP_PROTOCOL=2026-07-28] \
//   MCP_CALLS='[{"name":"PingME","arguments":{}}]' node oauth-clients.mjs
//
// MCP_DROP_REFRESH_TOKEN=1 keeps no refresh token, as a client that does
// not store one.
//
// MCP_URL_ELICITATION=1 declares URL-mode elicitation (capabilities
// elicitation.url): a call answered with the URL elicitation error
// (-32042) hands its one elicitation to the test, which opens the URL as
// the user does and answers one line on stdin when done; the client then
// waits for notifications/elicitation/complete of its id and calls again,
// once. On 2026-07-28 the request comes in an input-required result,
// which the SDK hands to the client's elicitation handler: the same
// event and answer, then the handler accepts and the SDK calls again.
//
// MCP_PROTOCOL=2026-07-28 (v2 only) pins the client to that revision
// (versionNegotiation: { mode: { pin } }); without it each SDK speaks its
// default, the 2025 era's initialize handshake.
//
// It writes one JSON object a line on stdout:
//   {"event":"sdk","package":"…","version":"…"}
//   {"event":"registered","clientId":"…"}  (the client information the SDK saved)
//   {"event":"authorize","url":"…"}   then waits for one line on stdin:
//                                     {"code":"…","state":"…","iss":"…"} (the redirect's)
//   {"event":"connected","protocolVersion":"…"}
//   {"event":"tools","names":[…]}
//   {"event":"elicitation","name":"…","url":"…","elicitationId":"…","message":"…"}
//                                     then waits for one line on stdin
//   {"event":"elicitationComplete","elicitationId":"…"}
//   {"event":"result","name":"…","isError":false,"text":"…"}
//   {"event":"error","name":"…","message":"…"}  (a call that failed)
//   {"event":"client","clientId":"…"}  (the client_id it signed in with)
// and exits 0 when every call was made (each a result or an error), 1 on
// any other failure (on stderr).

import * as crypto from 'node:crypto';
import * as readline from 'node:readline';
import { helpers, loadSDK } from './sdk.mjs';

const { env } = helpers('oauth-clients');
const { which, pkg, sdkVersion, Client, StreamableHTTPClientTransport, UnauthorizedError, onRequest, onNotification } = loadSDK('oauth-clients');

const mcpURL = new URL(env('MCP_URL'));
const clientID = process.env.MCP_CLIENT_ID;
const metadataURL = process.env.MCP_CLIENT_METADATA_URL;
const redirectURL = env('MCP_REDIRECT_URL');
const protocol = process.env.MCP_PROTOCOL;
const calls = JSON.parse(env('MCP_CALLS'));
const urlElicitation = process.env.MCP_URL_ELICITATION === '1';
if (protocol && which !== 'v2') {
  process.stderr.write('oauth-clients: MCP_PROTOCOL is for the v2 SDK only\n');
  process.exit(1);
}

const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

// provider keeps what a real client keeps (in memory here).
const provider = {
  pending: undefined, // the authorization URL the SDK wants opened
  sentState: undefined,
  verifier: undefined,
  saved: undefined,
  registered: undefined,
  clientMetadataUrl: metadataURL,
  get redirectUrl() {
    return redirectURL;
  },
  get clientMetadata() {
    return {
      client_name: `portcullis-e2e-ts-${which}`,
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

// authorized runs fn; when the SDK stopped for an authorization, it hands
// the URL to the test, which plays the browser, finishes the
// authorization with what the redirect carried, and runs fn again.
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
      const { code, state, iss } = JSON.parse(value);
      if (state !== provider.sentState) throw new Error(`state ${state} is not the one sent`);
      if (which === 'v2') {
        // v2 checks iss (RFC 9207) against the issuer it discovered.
        await transport().finishAuth(new URLSearchParams({ code, state, iss }));
      } else {
        await transport().finishAuth(code);
      }
    }
  }
}

// completions are the ids of notifications/elicitation/complete that
// came, each with the waiter of its id, if any.
const completions = new Map();
function completed(id) {
  const waiter = completions.get(id);
  if (typeof waiter === 'function') waiter();
  completions.set(id, true);
}
function completion(id) {
  if (completions.get(id) === true) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no notifications/elicitation/complete for ${id} within 30s`)), 30000);
    completions.set(id, () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

// elicit hands a URL elicitation of the call of name to the test and
// returns once the test says the user is done.
async function elicit(name, { url, elicitationId, message }) {
  emit({ event: 'elicitation', name, url, elicitationId, message });
  const { done } = await lines.next();
  if (done) throw new Error('stdin closed before the elicitation was done');
}

// calling is the name of the tool being called.
let calling;

// call calls the tool; with URL elicitation, a -32042 answer is handed to
// the test, and once the elicitation is complete the tool is called again.
async function call(name, args) {
  calling = name;
  try {
    return await authorized(() => transport, () => client.callTool({ name, arguments: args }));
  } catch (err) {
    const elicitations = err?.data?.elicitations;
    if (!urlElicitation || err?.code !== -32042 || !Array.isArray(elicitations) || elicitations.length !== 1) throw err;
    const [e] = elicitations;
    const done = completion(e.elicitationId);
    await elicit(name, e);
    await done;
    emit({ event: 'elicitationComplete', elicitationId: e.elicitationId });
    return await authorized(() => transport, () => client.callTool({ name, arguments: args }));
  }
}

emit({ event: 'sdk', package: pkg, version: sdkVersion });
let transport;
let client;
await authorized(
  () => transport,
  async () => {
    transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
    const options = {
      ...(protocol ? { versionNegotiation: { mode: { pin: protocol } } } : {}),
      ...(urlElicitation ? { capabilities: { elicitation: { url: {} } } } : {}),
    };
    client = new Client({ name: `portcullis-e2e-ts-${which}`, version: '0.0.1' }, options);
    if (urlElicitation) {
      onNotification(client, 'notifications/elicitation/complete', (n) => completed(n.params.elicitationId));
      // 2026-07-28: the request for input of an input-required result.
      onRequest(client, 'elicitation/create', async ({ params }) => {
        if (params.mode !== 'url') return { action: 'decline' };
        await elicit(calling, params);
        return { action: 'accept' };
      });
    }
    await client.connect(transport);
  },
);
emit({ event: 'connected', protocolVersion: client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null });
const { tools } = await authorized(() => transport, () => client.listTools());
emit({ event: 'tools', names: tools.map((t) => t.name) });
for (const { name, arguments: args } of calls) {
  try {
    const res = await call(name, args);
    const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    emit({ event: 'result', name, isError: !!res.isError, text });
  } catch (err) {
    emit({ event: 'error', name, message: String(err?.message ?? err) });
  }
}
emit({ event: 'client', clientId: (await provider.clientInformation())?.client_id ?? null });
await client.close();
process.exit(0);
