// call-loop.mjs is a real MCP client for the end-to-end tests of replicas
// behind a load balancer, in either TypeScript SDK: v1
// (@modelcontextprotocol/sdk) or v2 (@modelcontextprotocol/client). It
// opens one 2025-11-25 session over Streamable HTTP with a bearer token,
// waits until the SDK holds the session's standalone GET stream (the SDKs
// open it after initialize), then calls the echo tool, one call after
// another, checking each result, until stdin closes or MCP_DURATION
// seconds have passed.
//
// Usage (Node >= 22; the SDKs are the ones scripts/install-node-tools.sh
// pins):
//
//   MCP_SDK_DIR=.cache/node-tools MCP_SDK=v1|v2 \
//   MCP_URL=http://127.0.0.1:PORT/mcp MCP_TOKEN=… [MCP_DURATION=10] \
//   node call-loop.mjs
//
// It writes one JSON object a line on stdout, each with at (an RFC 3339
// time with milliseconds):
//   {"event":"sdk","package":"…","version":"…"}
//   {"event":"stream","id":1,"state":"open","status":200,"lastEventId":"…"}
//       a GET the SDK made (the standalone stream, its reconnections with
//       Last-Event-ID, a POST stream's resumption), and each change of
//       its state: open, end (the server ended it), error (it broke; error
//       says how), refused (status: not 2xx), failed (no response; error),
//       cancelled (the SDK let it go); when it ends, what it carried:
//       messages (data lines not empty: a priming event has none),
//       lastIdSeen (the last event id) and retry
//       (the last retry hint, in ms)
//   {"event":"connected","protocolVersion":"2025-11-25","sessionId":"…"}
//       once initialized and a GET stream is open
//   {"event":"call","n":7,"ok":true,"started":"…"}
//   {"event":"call","n":8,"ok":false,"started":"…","error":"…"}
//       each call made, answered or not; a result that is an error or
//       lacks the text sent is a failure too
//   {"event":"transport-error","message":"…"}
//       what the SDK reported to the client's onerror (a stream lost, a
//       reconnection that failed)
//   {"event":"done","calls":N,"failures":F,"streamsOpen":S}
// and exits 0 once it stopped calling, 1 when it could not start (on
// stderr).

import { helpers, loadSDK } from './sdk.mjs';

const { fail, env } = helpers('call-loop');
const { which, pkg, sdkVersion, Client, StreamableHTTPClientTransport } = loadSDK('call-loop');

const url = new URL(env('MCP_URL'));
const token = env('MCP_TOKEN');
const duration = Number(process.env.MCP_DURATION || 0);
if (!(duration >= 0)) fail(`MCP_DURATION=${process.env.MCP_DURATION}: want seconds`);
// The protocol revision both SDKs open by default: the 2025 era's
// initialize handshake at its latest revision.
const wantProtocol = '2025-11-25';
const callTimeoutMs = 30_000;

const emit = (o) => process.stdout.write(`${JSON.stringify({ at: new Date().toISOString(), ...o })}\n`);
const message = (err) => String(err?.message ?? err);

// tracked is the transport's fetch: it passes every request on unchanged
// and reports each GET's stream (see the stream event above). streamsOpen
// counts the GET streams open now; streamOpened resolves on the first.
let streams = 0;
let streamsOpen = 0;
let streamOpened;
const firstStream = new Promise((resolve) => {
  streamOpened = resolve;
});
async function tracked(input, init) {
  if ((init?.method ?? 'GET').toUpperCase() !== 'GET') return fetch(input, init);
  const id = ++streams;
  const lastEventId = new Headers(init?.headers).get('last-event-id') ?? undefined;
  let res;
  try {
    res = await fetch(input, init);
  } catch (err) {
    emit({ event: 'stream', id, state: 'failed', lastEventId, error: message(err) });
    throw err;
  }
  if (!res.ok || !res.body) {
    emit({ event: 'stream', id, state: 'refused', status: res.status, lastEventId });
    return res;
  }
  emit({ event: 'stream', id, state: 'open', status: res.status, lastEventId });
  streamsOpen++;
  streamOpened();
  // What the stream carried, reported when it ends: its messages, the
  // last event id and the last retry hint the server sent.
  const seen = { messages: 0, lastId: undefined, retry: undefined };
  const decoder = new TextDecoder();
  let partial = '';
  const scan = (bytes) => {
    const lines = (partial + decoder.decode(bytes, { stream: true })).split(/\r\n|\r|\n/);
    partial = lines.pop();
    for (const line of lines) {
      const [field, ...rest] = line.split(':');
      const value = rest.join(':').replace(/^ /, '');
      if (field === 'id') seen.lastId = value;
      else if (field === 'retry') seen.retry = Number(value);
      else if (field === 'data' && value !== '') seen.messages++;
    }
  };
  let settled = false;
  const settle = (o) => {
    if (settled) return;
    settled = true;
    streamsOpen--;
    emit({ event: 'stream', id, ...o, messages: seen.messages, lastIdSeen: seen.lastId, retry: seen.retry });
  };
  const reader = res.body.getReader();
  const body = new ReadableStream({
    async pull(controller) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (err) {
        settle({ state: 'error', error: message(err) });
        controller.error(err);
        return;
      }
      if (chunk.done) {
        settle({ state: 'end' });
        controller.close();
      } else {
        scan(chunk.value);
        controller.enqueue(chunk.value);
      }
    },
    cancel(reason) {
      settle({ state: 'cancelled' });
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}

emit({ event: 'sdk', package: pkg, version: sdkVersion });
const transport = new StreamableHTTPClientTransport(url, {
  fetch: tracked,
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: `portcullis-e2e-call-loop-${which}`, version: '0.0.1' });
client.onerror = (err) => emit({ event: 'transport-error', message: message(err) });
try {
  await client.connect(transport);
} catch (err) {
  fail(`connect to ${url}: ${message(err)}`);
}
const protocolVersion = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion;
if (protocolVersion !== wantProtocol) fail(`negotiated protocol ${protocolVersion}, want ${wantProtocol}`);
let timer;
await Promise.race([
  firstStream,
  new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error('no GET stream opened within 10 s of initialize')), 10_000);
  }),
]).catch((err) => fail(message(err)));
clearTimeout(timer);
emit({ event: 'connected', protocolVersion, sessionId: transport.sessionId });

// Stop when stdin closes (the test is done) or after MCP_DURATION.
let stopping = false;
process.stdin.on('end', () => {
  stopping = true;
});
process.stdin.on('error', () => {
  stopping = true;
});
process.stdin.resume();
if (duration > 0) {
  setTimeout(() => {
    stopping = true;
  }, duration * 1000);
}

let calls = 0;
let failures = 0;
while (!stopping) {
  const n = ++calls;
  const text = `ts-${which}-${n}`;
  const started = new Date().toISOString();
  const args = { name: 'echo', arguments: { text } };
  let error;
  try {
    const res =
      which === 'v1'
        ? await client.callTool(args, undefined, { timeout: callTimeoutMs })
        : await client.callTool(args, { timeout: callTimeoutMs });
    const got = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    if (res.isError || !got.includes(text)) error = `unexpected result: isError=${!!res.isError} text=${JSON.stringify(got)}`;
  } catch (err) {
    error = message(err);
  }
  if (error === undefined) {
    emit({ event: 'call', n, ok: true, started });
  } else {
    failures++;
    emit({ event: 'call', n, ok: false, started, error });
  }
}
emit({ event: 'done', calls, failures, streamsOpen });
await transport.terminateSession().catch((err) => emit({ event: 'transport-error', message: `DELETE: ${message(err)}` }));
await client.close();
process.exit(0);
