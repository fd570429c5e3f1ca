// call-loop.mjs is a real MCP client for the end-to-end tests of replicas
// behind a load balancer, in either TypeScript SDK: v1
// (@modelcontextprotocol/sdk) or v2 (@modelcontextprotocol/client). It
// opens one 2025-11-25 session over Streamable HTTP with a bearer token,
// declaring elicitation and sampling, waits until the SDK holds the
// session's standalone GET stream (the SDKs open it after initialize),
// subscribes to the watched resource (test://watched-resource) and then
// calls tools, one call after another, checking each result, until stdin
// closes or MCP_DURATION seconds have passed: mostly echo, and in turn
// test_elicitation and test_sampling (the server asks the client, which
// answers with a value made of the call's own text, so that a result
// shows its call got this answer), and every 2 s, and once each time the
// standalone stream is down, test_trigger_tool_change (a tool list
// change). The server must serve the core and conformance toolsets.
//
// Usage (Node >= 22; the SDKs are the ones scripts/install-node-tools.sh
// pins):
//
//   MCP_SDK_DIR=.cache/node-tools MCP_SDK=v1|v2 \
//   MCP_URL=http://127.0.0.1:PORT/mcp MCP_TOKEN=… [MCP_DURATION=10] \
//   [MCP_REPLICA_HEADER=X-Replica] node call-loop.mjs
//
// MCP_REPLICA_HEADER names a response header by which the balancer says
// which replica served a request; replica fields below are its values.
//
// It writes one JSON object a line on stdout, each with at (an RFC 3339
// time with milliseconds):
//   {"event":"sdk","package":"…","version":"…"}
//   {"event":"stream","id":1,"state":"open","status":200,"lastEventId":"…",
//    "standalone":true,"replica":"r0"}
//       a GET the SDK made (the standalone stream, its reconnections with
//       Last-Event-ID, a POST stream's resumption; standalone tells the
//       first two, whose event ids are "_n", from the last), and each
//       change of its state: open, end (the server ended it), error (it
//       broke; error says how), refused (status: not 2xx), failed (no
//       response; error), cancelled (the SDK let it go); when it ends,
//       what it carried: messages (events with data: a priming event has
//       none), lastIdSeen (the last event id) and retry (the last retry
//       hint, in ms)
//   {"event":"sse","stream":1,"eventId":"_4","method":"notifications/…"}
//       each event a GET stream carried, as the SDK reads it: a priming
//       event has no method, a response has method "response"
//   {"event":"connected","protocolVersion":"2025-11-25","sessionId":"…"}
//       once initialized and a GET stream is open
//   {"event":"subscribed","uri":"test://watched-resource"}
//   {"event":"notification","method":"notifications/tools/list_changed"}
//   {"event":"notification","method":"notifications/resources/updated","uri":"…"}
//       each notification of these the SDK handed the client
//   {"event":"call","n":7,"tool":"echo","ok":true,"started":"…"}
//   {"event":"call","n":8,"tool":"echo","ok":false,"started":"…","error":"…"}
//       each call made, answered or not; a result that is an error or
//       lacks what the call expects is a failure too. A call of
//       test_elicitation or test_sampling says which replica took it
//       (callReplica) and took the client's answers (answerReplicas);
//       one of test_trigger_tool_change fails unless a tool list change
//       reaches the client within 15 s of the call's start (the loop goes
//       on meanwhile; at is when the change arrived), and says when the
//       call was answered (answered) and whether the standalone stream was
//       down then (whileDown)
//   {"event":"transport-error","message":"…"}
//       what the SDK reported to the client's onerror (a stream lost, a
//       reconnection that failed)
//   {"event":"done","calls":N,"failures":F,"streamsOpen":S}
// and exits 0 once it stopped calling, 1 when it could not start (on
// stderr).

import { helpers, loadSDK } from './sdk.mjs';

const { fail, env } = helpers('call-loop');
const { which, pkg, sdkVersion, Client, StreamableHTTPClientTransport, onRequest, onNotification } = loadSDK('call-loop');

const url = new URL(env('MCP_URL'));
const token = env('MCP_TOKEN');
const duration = Number(process.env.MCP_DURATION || 0);
if (!(duration >= 0)) fail(`MCP_DURATION=${process.env.MCP_DURATION}: want seconds`);
const replicaHeader = process.env.MCP_REPLICA_HEADER;
// The protocol revision both SDKs open by default: the 2025 era's
// initialize handshake at its latest revision.
const wantProtocol = '2025-11-25';
const callTimeoutMs = 30_000;
// The conformance toolset's resource reported as updated every 3 s by
// every replica that holds a copy of a subscribed session.
const watchedURI = 'test://watched-resource';
// How often the loop changes the tool list, and how long a change may take
// to reach the client: through the standalone stream, so across a
// reconnection when the stream is down.
const triggerEveryMs = 2_000;
const notifyTimeoutMs = 15_000;

const emit = (o) => process.stdout.write(`${JSON.stringify({ at: new Date().toISOString(), ...o })}\n`);
const message = (err) => String(err?.message ?? err);
const replicaOf = (res) => (replicaHeader ? (res.headers.get(replicaHeader) ?? undefined) : undefined);

// current is the call the loop is making (one at a time): tracked notes
// on it which replica took the call and which took the client's answers.
let current;

// tracked is the transport's fetch: it passes every request on unchanged,
// notes on current where its call and answers went, and reports each
// GET's stream (see the stream and sse events above). streamsOpen counts
// the GET streams open now, standaloneOpen those of them that are the
// standalone stream; outages counts the times the last standalone stream
// open ended; streamOpened resolves on the first.
let streams = 0;
let streamsOpen = 0;
let standaloneOpen = 0;
let outages = 0;
let streamOpened;
const firstStream = new Promise((resolve) => {
  streamOpened = resolve;
});
async function tracked(input, init) {
  const method = (init?.method ?? 'GET').toUpperCase();
  if (method === 'POST') return trackedPost(input, init);
  if (method !== 'GET') return fetch(input, init);
  const id = ++streams;
  const lastEventId = new Headers(init?.headers).get('last-event-id') ?? undefined;
  // The standalone stream's event ids are "_n"; a POST stream's "stream_n".
  const standalone = lastEventId === undefined || lastEventId.startsWith('_');
  let res;
  try {
    res = await fetch(input, init);
  } catch (err) {
    emit({ event: 'stream', id, state: 'failed', lastEventId, standalone, error: message(err) });
    throw err;
  }
  const replica = replicaOf(res);
  if (!res.ok || !res.body) {
    emit({ event: 'stream', id, state: 'refused', status: res.status, lastEventId, standalone, replica });
    return res;
  }
  emit({ event: 'stream', id, state: 'open', status: res.status, lastEventId, standalone, replica });
  streamsOpen++;
  if (standalone) standaloneOpen++;
  streamOpened();
  // What the stream carried, reported event by event and when it ends:
  // its messages, the last event id and the last retry hint the server
  // sent. An event counts once its blank line arrived, as the SDK's parser
  // dispatches it.
  const seen = { messages: 0, lastId: undefined, retry: undefined };
  let event = { id: undefined, data: [] };
  const dispatch = () => {
    const data = event.data.join('\n');
    if (event.id !== undefined || data !== '') {
      let m;
      if (data !== '') {
        seen.messages++;
        try {
          const msg = JSON.parse(data);
          m = msg.method ?? 'response';
        } catch {
          m = 'unparsed';
        }
      }
      emit({ event: 'sse', stream: id, eventId: event.id ?? seen.lastId, method: m });
    }
    event = { id: undefined, data: [] };
  };
  const decoder = new TextDecoder();
  let partial = '';
  const scan = (bytes) => {
    const lines = (partial + decoder.decode(bytes, { stream: true })).split(/\r\n|\r|\n/);
    partial = lines.pop();
    for (const line of lines) {
      if (line === '') {
        dispatch();
        continue;
      }
      const [field, ...rest] = line.split(':');
      const value = rest.join(':').replace(/^ /, '');
      if (field === 'id') seen.lastId = event.id = value;
      else if (field === 'retry') seen.retry = Number(value);
      else if (field === 'data') event.data.push(value);
    }
  };
  let settled = false;
  const settle = (o) => {
    if (settled) return;
    settled = true;
    streamsOpen--;
    if (standalone && --standaloneOpen === 0) outages++;
    emit({ event: 'stream', id, ...o, standalone, messages: seen.messages, lastIdSeen: seen.lastId, retry: seen.retry });
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

// trackedPost passes a POST on and notes on current which replica took
// its call and which took the client's answers to the server's requests
// (a JSON-RPC response the client posts while the call runs), as promises:
// an answer's 202 may arrive after the call's result.
async function trackedPost(input, init) {
  const call = current;
  const res = fetch(input, init);
  if (call && typeof init?.body === 'string') {
    let msg;
    try {
      msg = JSON.parse(init.body);
    } catch {
      return res;
    }
    const replica = res.then(replicaOf, () => undefined);
    if (msg?.method === 'tools/call' && msg.params?.name === call.tool) call.callReplica = replica;
    else if (msg && msg.method === undefined && ('result' in msg || 'error' in msg)) call.answerReplicas.push(replica);
  }
  return res;
}

// The client's answers: each made of what the server's request carries
// (the call's own text), so that a call's result shows it got its answer.
const elicited = (text) => `elicited-${text}`;
const sampled = (text) => `sampled-${text}`;

// listChanged counts the tool list changes the SDK handed the client;
// changed resolves when it passes a count, or false after notifyTimeoutMs.
let listChanged = 0;
let waiters = [];
function changed(after) {
  if (listChanged > after) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), notifyTimeoutMs);
    waiters.push({
      after,
      resolve: () => {
        clearTimeout(timer);
        resolve(true);
      },
    });
  });
}

emit({ event: 'sdk', package: pkg, version: sdkVersion });
const transport = new StreamableHTTPClientTransport(url, {
  fetch: tracked,
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client(
  { name: `portcullis-e2e-call-loop-${which}`, version: '0.0.1' },
  { capabilities: { elicitation: {}, sampling: {} } },
);
client.onerror = (err) => emit({ event: 'transport-error', message: message(err) });
onRequest(client, 'elicitation/create', (req) => ({ action: 'accept', content: { username: elicited(req.params.message) } }));
onRequest(client, 'sampling/createMessage', (req) => {
  const text = (req.params.messages ?? []).map((m) => m.content?.text ?? '').join('\n');
  return { model: 'call-loop', role: 'assistant', content: { type: 'text', text: sampled(text) } };
});
onNotification(client, 'notifications/tools/list_changed', () => {
  listChanged++;
  emit({ event: 'notification', method: 'notifications/tools/list_changed' });
  const ready = waiters.filter((w) => listChanged > w.after);
  waiters = waiters.filter((w) => listChanged <= w.after);
  for (const w of ready) w.resolve();
});
onNotification(client, 'notifications/resources/updated', (n) => {
  emit({ event: 'notification', method: 'notifications/resources/updated', uri: n.params?.uri });
});
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
try {
  await client.subscribeResource({ uri: watchedURI });
} catch (err) {
  fail(`subscribe to ${watchedURI}: ${message(err)}`);
}
emit({ event: 'subscribed', uri: watchedURI });

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

// callTool calls a tool with the SDK's own signature, and returns its
// result's text.
async function callTool(name, args) {
  const params = { name, arguments: args };
  const res =
    which === 'v1'
      ? await client.callTool(params, undefined, { timeout: callTimeoutMs })
      : await client.callTool(params, { timeout: callTimeoutMs });
  const got = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  if (res.isError) throw new Error(`result is an error: ${JSON.stringify(got)}`);
  return got;
}

// The tools the loop calls, each with its arguments for call n and the
// check of its result's text (an error message, or undefined).
const tools = {
  echo: (text) => [{ text }, (got) => (got.includes(text) ? undefined : `text ${JSON.stringify(got)}, want ${text}`)],
  test_elicitation: (text) => [
    { message: text },
    (got) => (got.includes(elicited(text)) ? undefined : `text ${JSON.stringify(got)}, want the client's answer ${elicited(text)}`),
  ],
  test_sampling: (text) => [
    { prompt: text },
    (got) => (got.includes(sampled(text)) ? undefined : `text ${JSON.stringify(got)}, want the client's answer ${sampled(text)}`),
  ],
  test_trigger_tool_change: () => [{}, (got) => (got.includes('tools_list_changed published') ? undefined : `text ${JSON.stringify(got)}`)],
};
const rotation = ['echo', 'test_elicitation', 'echo', 'test_sampling'];

let calls = 0;
let failures = 0;
const report = (o) => {
  if (!o.ok) failures++;
  emit(o);
};
// settling holds the changes whose arrival the client waits for aside,
// so that the loop goes on meanwhile (and makes another change if the
// standalone stream goes down while it waits).
const settling = new Set();
let lastTrigger = Date.now();
let triggeredOutage = 0;
while (!stopping) {
  const n = ++calls;
  let tool = rotation[n % rotation.length];
  if (standaloneOpen === 0 && triggeredOutage < outages) {
    // A change made while the standalone stream is down reaches the
    // client only when the stream resumes with Last-Event-ID.
    tool = 'test_trigger_tool_change';
    triggeredOutage = outages;
  } else if (Date.now() - lastTrigger >= triggerEveryMs) {
    tool = 'test_trigger_tool_change';
  }
  const text = `ts-${which}-${n}`;
  const started = new Date().toISOString();
  const [args, check] = tools[tool](text);
  const call = (current = { tool, answerReplicas: [] });
  const before = listChanged;
  let error;
  try {
    error = check(await callTool(tool, args));
  } catch (err) {
    error = message(err);
  }
  current = undefined;
  const o = { event: 'call', n, tool, ok: error === undefined, started, error };
  if (tool === 'test_elicitation' || tool === 'test_sampling') {
    Object.assign(o, { callReplica: await call.callReplica, answerReplicas: await Promise.all(call.answerReplicas) });
  }
  if (tool === 'test_trigger_tool_change') {
    lastTrigger = Date.now();
    Object.assign(o, { answered: new Date().toISOString(), whileDown: standaloneOpen === 0 });
    if (o.ok) {
      const waiting = changed(before).then((seen) => {
        if (!seen) Object.assign(o, { ok: false, error: `no tools/list_changed within ${notifyTimeoutMs / 1000} s of the change` });
        report(o);
        settling.delete(waiting);
      });
      settling.add(waiting);
      continue;
    }
  }
  report(o);
}
await Promise.all(settling);
emit({ event: 'done', calls, failures, streamsOpen });
await transport.terminateSession().catch((err) => emit({ event: 'transport-error', message: `DELETE: ${message(err)}` }));
await client.close();
process.exit(0);
