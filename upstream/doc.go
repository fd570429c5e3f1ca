// Package upstream puts other MCP servers behind Portcullis: it connects
// to each configured upstream as an MCP client, over stdio (a child
// process it starts and supervises) or Streamable HTTP, and keeps what the
// upstream offers — tools, resources, resource templates, prompts — in a
// [tools.Catalog], so that the servers built from the catalog serve them
// with the same auth, policy, limits and telemetry as built-in tools.
//
// Build a [Manager] from the `upstreams:` config with [New], start it, and
// close it when the server stops:
//
//	m, err := upstream.New(cfg.Upstreams, catalog, upstream.Deps{Logger: logger})
//	if err != nil {
//		return err
//	}
//	m.Start(ctx)
//	defer m.Close()
//	health.AddCheck("required upstream MCP server not connected", m.Ready)
//
// An upstream tool "search" of an upstream whose prefix is "tickets" is
// served as "tickets_search"; prompts are prefixed the same way, resource
// URIs are served as the upstream names them. [Options.Allow] and
// [Options.Deny] choose the tools served. When an upstream's lists change
// (a list_changed notification, or a reconnect), the catalog follows and
// the SDK tells connected clients.
//
// A call reaches the upstream with the caller's arguments, a progress token
// of Portcullis's own (progress is passed back under the caller's token),
// the trace context [Hooks.Inject] writes and the log level the caller
// asked for; nothing else of the caller's request, and never the caller's
// token. What the upstream sends during the call — progress, log messages,
// elicitation, sampling and roots requests — goes to that call's caller, when it
// can be tied to the call and the caller's session can carry it; a request
// that cannot is refused with a JSON-RPC error (relay.go), as is every
// request a 2026-07-28 upstream sends within a call. An upstream's
// multi-round-trip result (2026-07-28) reaches a caller of that era with
// its requestState wrapped, so that the retry comes back to the same
// upstream; for an older caller Portcullis asks it within the call
// (mrtr.go). An upstream that offers the tasks extension may answer a
// caller that declared it with its task handle, which the MCP layer
// passes on; the caller's task requests come back through
// [Manager.RouteTask] (tasks.go). A tools/call to an http upstream on
// 2026-07-28 is sent as one direct HTTP exchange instead of through the
// SDK client, with the same params, headers, credentials and handling of
// the answer (hop.go). A call that fails
// because the upstream is down, crashed, hung or sent garbage ends with an
// error result that names the upstream ([KindTransport] and the other
// kinds go to [Hooks.StartCall]); the supervisor reconnects with backoff
// (restarting a stdio server), and other calls and upstreams go on. An
// http upstream on the 2025-11-25 era that closes a call's response
// stream mid-call (SEP-1699) has it resumed with Last-Event-ID when it gave
// event ids; the caller's own stream stays open meanwhile. Without event
// ids the call alone is lost, and its session kept.
//
// A stdio upstream is single-tenant: one process serves every caller, so
// whatever state it keeps is shared by all of them ([IsolationShared]).
//
// An http upstream with oauth.grant token_exchange ([GrantTokenExchange])
// is sent, on a session of each caller's own ([IsolationPerPrincipal]), a
// token that the authorization server issued for it in exchange for the
// caller's (RFC 8693); the caller's token itself, which comes from
// [Deps.SubjectToken], is sent only to the token endpoint.
//
// The package never imports Prometheus or OpenTelemetry: metrics and spans
// come in through [Hooks], which the root package wires to package observability.
//
// # The files, by job
//
// Keeping a session, apart from sending requests on it:
//
//   - manager.go: [Manager], started and closed, ready or not; the SDK
//     client sessions are opened with.
//   - upstream.go: the upstream, one per configured server, and its
//     current session.
//   - supervise.go: connecting, serving until the session ends, and
//     reconnecting with backoff.
//   - sync.go: the upstream's lists, read page by page and put into the
//     catalog under its prefix.
//   - transport.go, drain.go, notes.go: the connections (stdio processes,
//     HTTP with the upstream's credentials), kept alive across calls,
//     their notifications counted.
//   - principal.go: per_principal sessions, one per caller.
//   - options.go, files.go: the configuration and its mounted secrets.
//
// Sending a caller's request:
//
//   - call.go: tools/call, and the forward of prompts/get and
//     resources/read: the session, the _meta sent, rounds of input, the
//     StartCall hook.
//   - sender.go: the interface of the two ways a request goes, chosen per
//     request: the SDK client session, or the direct hop (hop.go).
//   - resources.go, prompts.go, completion.go, subscriptions.go,
//     progress.go: each feature's requests and notifications.
//   - errors.go: failures classified, and worded for the caller.
//   - caller.go: the caller's capabilities and log level.
//   - relay.go: what the upstream sends during a call, to its caller.
//   - mrtr.go, tasks.go: input-required results and task handles.
package upstream
